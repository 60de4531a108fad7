// libmemarea-aml's generic part: aml_errno, the error strings, aml_init/aml_finalize,
// aml_support_backends, the version constants and the generic area calls (aml.h).
#include "aml_impl.hpp"

#include <memarea/device.hpp>

#include <aml.h>

#include <cstdio>
#include <string>

namespace memarea::aml {

namespace {
thread_local int t_errno = AML_SUCCESS;
// memarea's message for the failure that last set aml_errno on this thread, and the code it
// set: the reason applies only while aml_errno still holds that code (a program may reset
// aml_errno itself, and AML's own failures drop it).
thread_local std::string t_reason;
thread_local int t_reason_code = AML_SUCCESS;
// What aml_strerror returned last on this thread, when it carried a reason.
thread_local std::string t_text;

void set_reason(int code, const char* reason) {
  try {
    t_reason = reason ? reason : "";
    t_reason_code = code;
  } catch (...) {  // out of memory: the bare text then
    t_reason.clear();
    t_reason_code = AML_SUCCESS;
  }
}
}  // namespace

int& thread_errno() noexcept { return t_errno; }

int code_of(memarea_status s) noexcept {
  switch (static_cast<errc>(s)) {
    case errc::success: return AML_SUCCESS;
    case errc::no_device:
    case errc::not_supported: return AML_ENOTSUP;
    case errc::invalid_value:
    case errc::invalid_device:
    case errc::not_found:
    case errc::invalid_handle: return AML_EINVAL;
    case errc::busy:
    case errc::invalid_context: return AML_EBUSY;
    case errc::out_of_memory: return AML_ENOMEM;
    case errc::not_permitted: return AML_EPERM;
    default: return AML_FAILURE;
  }
}

void* fail_null(memarea_status s) noexcept {
  fail_status(s);
  return nullptr;
}

int fail_status(memarea_status s) noexcept {
  const int code = code_of(s);
  t_errno = code;
  // The public C API's message: libmemarea-aml reads memarea only through it.
  set_reason(code, memarea_last_error_message());
  return -code;
}

void* fail_null_code(int code) noexcept {
  fail_code(code);
  return nullptr;
}

int fail_code(int code) noexcept {
  t_errno = code;
  t_reason.clear();
  t_reason_code = AML_SUCCESS;
  return -code;
}

}  // namespace memarea::aml

extern "C" {

const int aml_version_major = AML_VERSION_MAJOR;
const int aml_version_minor = AML_VERSION_MINOR;
const int aml_version_patch = AML_VERSION_PATCH;
const char* aml_version_revision = AML_VERSION_REVISION;
const char* aml_version_string = AML_VERSION_STRING;

int* memarea_aml_errno_location(void) { return &memarea::aml::thread_errno(); }

const char* aml_strerror(const int err) {
  static const char* const messages[AML_ERROR_MAX] = {
      "Success",           "Generic error",           "Not enough memory",
      "Invalid argument",  "Value out of bound",      "Operation not supported",
      "Underlying resource is not available for operation", "Insufficient permissions"};
  // Range first: negating INT_MIN would overflow.
  if (err <= -AML_ERROR_MAX || err >= AML_ERROR_MAX) return "Unknown error";
  const int code = err < 0 ? -err : err;
  // The code of this thread's last failure: memarea's reason for it too, where it gave one.
  if (code != AML_SUCCESS && code == memarea::aml::t_errno &&
      code == memarea::aml::t_reason_code && !memarea::aml::t_reason.empty()) {
    try {
      memarea::aml::t_text = std::string(messages[code]) + ": " + memarea::aml::t_reason;
      return memarea::aml::t_text.c_str();
    } catch (...) {  // out of memory: the bare text
    }
  }
  return messages[code];
}

void aml_perror(const char* msg) {
  std::fprintf(stderr, "%s:%s\n", msg ? msg : "", aml_strerror(aml_errno));
}

int aml_init(int* argc, char** argv[]) {
  (void)argc;
  (void)argv;
  try {
    (void)memarea::device_count();  // starts the backend now, not at the first mmap
  } catch (...) {
    return -AML_FAILURE;  // MEMAREA_BACKEND or the sim settings are malformed
  }
  return AML_SUCCESS;
}

int aml_finalize(void) { return AML_SUCCESS; }

int aml_support_backends(const unsigned long backends) {
  constexpr unsigned long never = AML_BACKEND_HWLOC | AML_BACKEND_OPENCL | AML_BACKEND_ZE;
  if (backends & never) return 0;
  if (backends & (AML_BACKEND_CUDA | AML_BACKEND_HIP)) {
    try {
      if (memarea::device_count() <= 0) return 0;
    } catch (...) {
      return 0;
    }
  }
  return 1;
}

void* aml_area_mmap(const aml_area* area, size_t size, aml_area_mmap_options* opts) {
  if (size == 0) return nullptr;  // AML: no error, aml_errno untouched
  if (!area || !area->ops) return memarea::aml::fail_null_code(AML_EINVAL);
  if (!area->ops->mmap) return memarea::aml::fail_null_code(AML_ENOTSUP);
  return area->ops->mmap(area->data, size, opts);
}

int aml_area_munmap(const aml_area* area, void* ptr, size_t size) {
  if (!ptr || size == 0) return AML_SUCCESS;  // AML: cleanup code unmaps NULL
  if (!area || !area->ops) return -AML_EINVAL;
  if (!area->ops->munmap) return -AML_ENOTSUP;
  return area->ops->munmap(area->data, ptr, size);
}

int aml_area_fprintf(FILE* stream, const char* prefix, const aml_area* area) {
  if (!stream || !area || !area->ops) return -AML_EINVAL;
  if (!area->ops->fprintf) return -AML_ENOTSUP;
  return area->ops->fprintf(area->data, stream, prefix ? prefix : "");
}

}  // extern "C"
