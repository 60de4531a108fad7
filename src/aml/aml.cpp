// libmemarea-aml's generic part: aml_errno, the error strings, aml_init/aml_finalize,
// aml_support_backends, the version constants and the generic area calls (aml.h).
#include "aml/aml_impl.hpp"
#include "core/system.hpp"

#include <aml.h>

#include <cstdio>

namespace memarea::aml {

namespace {
thread_local int t_errno = AML_SUCCESS;
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

void* fail_null(memarea_status s) noexcept { return fail_null_code(code_of(s)); }

void* fail_null_code(int code) noexcept {
  t_errno = code;
  return nullptr;
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
  return messages[err < 0 ? -err : err];
}

void aml_perror(const char* msg) {
  std::fprintf(stderr, "%s:%s\n", msg ? msg : "", aml_strerror(aml_errno));
}

int aml_init(int* argc, char** argv[]) {
  (void)argc;
  (void)argv;
  try {
    (void)memarea::detail::system::get();  // starts the backend now, not at the first mmap
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
      if (memarea::detail::system::get().device_count() <= 0) return 0;
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
