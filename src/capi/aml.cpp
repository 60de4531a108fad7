// The AML-compatible C API: aml_area_hip_* and aml_area_cuda_* over memarea's areas.
// Unlike AML itself it restores the calling thread's device (memarea's areas never change it),
// validates flags, maps every error (never success with NULL) and keeps aml_errno per thread.
#include "capi/c_call.hpp"
#include "core/area_impl.hpp"
#include "core/system.hpp"

#include <memarea/aml.h>
#include <memarea/aml/area/cuda.h>
#include <memarea/aml/area/hip.h>

#include <cstdlib>
#include <new>

namespace {

thread_local int t_aml_errno = AML_SUCCESS;
constexpr unsigned kAllFlags = MEMAREA_AREA_HOST | MEMAREA_AREA_UNIFIED | MEMAREA_AREA_MAPPED | MEMAREA_AREA_GLOBAL;

/// The AML code for a memarea status, as seed 004 documents aml_area_hip_mmap's errors.
int aml_code(memarea::errc e) {
  using memarea::errc;
  switch (e) {
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

// Both AML flavours share the layout {int device; int flags;} and the same flag bits.
static_assert(sizeof(aml_area_hip_data) == sizeof(aml_area_cuda_data));
static_assert(AML_AREA_HIP_FLAG_ALLOC_GLOBAL == MEMAREA_AREA_GLOBAL &&
              AML_AREA_CUDA_FLAG_ALLOC_MAPPED == MEMAREA_AREA_MAPPED);

struct area_value {
  int device;
  int flags;
};

int create(aml_area** out, int device, int flags, aml_area_ops* ops) {
  if (!out) return -AML_EINVAL;
  int count = 0;
  try {
    count = memarea::detail::system::get().device_count();
  } catch (...) {
    return -AML_FAILURE;  // the backend could not tell how many devices there are
  }
  if (device >= count) return -AML_EINVAL;
  if (static_cast<unsigned>(flags) & ~kAllFlags) return -AML_EINVAL;
  // One block: the area and its data, freed together by destroy.
  struct block {
    aml_area area;
    area_value data;
  };
  auto* b = static_cast<block*>(std::malloc(sizeof(block)));
  if (!b) return -AML_ENOMEM;
  b->data = area_value{device < 0 ? -1 : device, flags};
  b->area.ops = ops;
  b->area.data = reinterpret_cast<aml_area_data*>(&b->data);
  *out = &b->area;
  return AML_SUCCESS;
}

void destroy(aml_area** area) {
  if (!area || !*area) return;
  std::free(*area);  // the area is the block's first member
  *area = nullptr;
}

void* mmap_impl(const aml_area_data* data, size_t size, aml_area_mmap_options* opts) {
  if (!data) {
    t_aml_errno = AML_EINVAL;
    return nullptr;
  }
  const auto* a = reinterpret_cast<const area_value*>(data);
  const auto* o = reinterpret_cast<const aml_area_hip_mmap_options*>(opts);
  // AML compatibility: the option selects the device only when > 0 (seed 004).
  const int option_device = (o && o->device > 0) ? o->device : -1;
  void* option_ptr = o ? o->ptr : nullptr;
  void* result = nullptr;
  memarea_status s = memarea::detail::c_call("aml_area_mmap", [&] {
    if (static_cast<unsigned>(a->flags) & ~kAllFlags)
      throw memarea::error(memarea::errc::invalid_value, "unknown flag bits");
    result = memarea::detail::area_mmap(a->device < 0 ? -1 : a->device,
                                        static_cast<unsigned>(a->flags), size, option_device,
                                        option_ptr);
  });
  if (s != MEMAREA_SUCCESS) {
    t_aml_errno = aml_code(static_cast<memarea::errc>(s));
    return nullptr;
  }
  return result;
}

int munmap_impl(const aml_area_data*, void* ptr, size_t size) {
  memarea_status s = memarea::detail::c_call("aml_area_munmap", [&] {
    memarea::detail::free_record(
        ptr,
        [&](const memarea::detail::record& r) {
          if (r.made_by != memarea::detail::origin::area)
            throw memarea::error(memarea::errc::invalid_value, "not an area allocation");
          if (r.requested != size)
            throw memarea::error(memarea::errc::invalid_value, "size does not match");
        },
        "aml_area_munmap");
  });
  if (s == MEMAREA_SUCCESS) return AML_SUCCESS;
  t_aml_errno = aml_code(static_cast<memarea::errc>(s));
  return -t_aml_errno;
}

int fprintf_impl(const char* kind, const aml_area_data* data, FILE* stream, const char* prefix) {
  if (!data || !stream) return -AML_EINVAL;
  const auto* a = reinterpret_cast<const area_value*>(data);
  if (!prefix) prefix = "";
  std::fprintf(stream, "%s: area-%s: %p\n%s: device: %d\n%s: flags: %#x\n", prefix, kind,
               static_cast<const void*>(data), prefix, a->device, prefix,
               static_cast<unsigned>(a->flags));
  return AML_SUCCESS;
}

area_value g_hip_default{-1, AML_AREA_HIP_FLAG_DEFAULT};
area_value g_hip_unified{-1, AML_AREA_HIP_FLAG_ALLOC_UNIFIED | AML_AREA_HIP_FLAG_ALLOC_GLOBAL};
area_value g_cuda_default{-1, AML_AREA_CUDA_FLAG_DEFAULT};
area_value g_cuda_unified{-1,
                          AML_AREA_CUDA_FLAG_ALLOC_UNIFIED | AML_AREA_CUDA_FLAG_ALLOC_GLOBAL};

}  // namespace

extern "C" {

int* memarea_aml_errno_location(void) { return &t_aml_errno; }

const char* aml_strerror(const int errnum) {
  static const char* const messages[AML_ERROR_MAX] = {
      "Success",          "Generic failure",   "Not enough memory", "Invalid argument",
      "Value out of bound", "Operation not supported", "Resource busy", "Not permitted"};
  const int e = errnum < 0 ? -errnum : errnum;
  if (e >= AML_ERROR_MAX) return "Unknown error";
  return messages[e];
}

void* aml_area_mmap(const aml_area* area, size_t size, aml_area_mmap_options* opts) {
  if (!area || !area->ops || !area->ops->mmap) {
    t_aml_errno = AML_EINVAL;
    return nullptr;
  }
  return area->ops->mmap(area->data, size, opts);
}

int aml_area_munmap(const aml_area* area, void* ptr, size_t size) {
  if (!area || !area->ops || !area->ops->munmap) return -AML_EINVAL;
  return area->ops->munmap(area->data, ptr, size);
}

int aml_area_fprintf(FILE* stream, const char* prefix, const aml_area* area) {
  if (!area || !area->ops || !area->ops->fprintf || !stream) return -AML_EINVAL;
  return area->ops->fprintf(area->data, stream, prefix);
}

// --- HIP ------------------------------------------------------------------------------------
int aml_area_hip_create(aml_area** area, const int device, const int flags) {
  return create(area, device, flags, &aml_area_hip_ops);
}
void aml_area_hip_destroy(aml_area** area) { destroy(area); }
void* aml_area_hip_mmap(const aml_area_data* d, size_t size, aml_area_mmap_options* o) {
  return mmap_impl(d, size, o);
}
int aml_area_hip_munmap(const aml_area_data* d, void* ptr, const size_t size) {
  return munmap_impl(d, ptr, size);
}
int aml_area_hip_fprintf(const aml_area_data* d, FILE* stream, const char* prefix) {
  return fprintf_impl("hip", d, stream, prefix);
}
aml_area_ops aml_area_hip_ops = {aml_area_hip_mmap, aml_area_hip_munmap, aml_area_hip_fprintf};
aml_area aml_area_hip = {&aml_area_hip_ops, reinterpret_cast<aml_area_data*>(&g_hip_default)};
aml_area aml_area_hip_unified = {&aml_area_hip_ops,
                                 reinterpret_cast<aml_area_data*>(&g_hip_unified)};

// --- CUDA -----------------------------------------------------------------------------------
int aml_area_cuda_create(aml_area** area, const int device, const int flags) {
  return create(area, device, flags, &aml_area_cuda_ops);
}
void aml_area_cuda_destroy(aml_area** area) { destroy(area); }
void* aml_area_cuda_mmap(const aml_area_data* d, size_t size, aml_area_mmap_options* o) {
  return mmap_impl(d, size, o);
}
int aml_area_cuda_munmap(const aml_area_data* d, void* ptr, const size_t size) {
  return munmap_impl(d, ptr, size);
}
int aml_area_cuda_fprintf(const aml_area_data* d, FILE* stream, const char* prefix) {
  return fprintf_impl("cuda", d, stream, prefix);
}
aml_area_ops aml_area_cuda_ops = {aml_area_cuda_mmap, aml_area_cuda_munmap,
                                  aml_area_cuda_fprintf};
aml_area aml_area_cuda = {&aml_area_cuda_ops, reinterpret_cast<aml_area_data*>(&g_cuda_default)};
aml_area aml_area_cuda_unified = {&aml_area_cuda_ops,
                                  reinterpret_cast<aml_area_data*>(&g_cuda_unified)};

}  // extern "C"
