// AML's CUDA and HIP areas (aml/area/cuda.h, aml/area/hip.h) over memarea's areas. Unlike AML
// they never change the calling thread's device (memarea's areas never do), validate flags,
// honour an mmap option's device 0, map every backend error to an AML code (never success
// with NULL) and keep aml_errno positive and per thread. docs/aml.md lists the differences.
#include "aml_impl.hpp"

#include <memarea/area.hpp>
#include <memarea/device.hpp>
#include <memarea/pointer.hpp>

#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>

#include <cstdlib>

namespace {

constexpr unsigned kAllFlags =
    MEMAREA_AREA_HOST | MEMAREA_AREA_UNIFIED | MEMAREA_AREA_MAPPED | MEMAREA_AREA_GLOBAL;

// Both flavours share one layout, {flags, device} as AML declares it, and memarea's flag bits.
static_assert(sizeof(aml_area_hip_data) == sizeof(aml_area_cuda_data));
static_assert(offsetof(aml_area_hip_data, flags) == offsetof(aml_area_cuda_data, flags) &&
              offsetof(aml_area_hip_data, device) == offsetof(aml_area_cuda_data, device));
static_assert(sizeof(aml_area_hip_mmap_options) == sizeof(aml_area_cuda_mmap_options));
static_assert(AML_AREA_HIP_FLAG_ALLOC_HOST == MEMAREA_AREA_HOST &&
              AML_AREA_HIP_FLAG_ALLOC_UNIFIED == MEMAREA_AREA_UNIFIED &&
              AML_AREA_HIP_FLAG_ALLOC_MAPPED == MEMAREA_AREA_MAPPED &&
              AML_AREA_HIP_FLAG_ALLOC_GLOBAL == MEMAREA_AREA_GLOBAL &&
              AML_AREA_CUDA_FLAG_ALLOC_HOST == MEMAREA_AREA_HOST &&
              AML_AREA_CUDA_FLAG_ALLOC_UNIFIED == MEMAREA_AREA_UNIFIED &&
              AML_AREA_CUDA_FLAG_ALLOC_MAPPED == MEMAREA_AREA_MAPPED &&
              AML_AREA_CUDA_FLAG_ALLOC_GLOBAL == MEMAREA_AREA_GLOBAL);

/// The tag of the CUDA and HIP areas' memory (memarea::tag_of): its address, never its value.
// Writable, not const: identical read-only constants may be merged (-fmerge-all-constants,
// identical-code folding), which would give two areas one tag.
char g_tag = 0;
const void* tag() noexcept { return &g_tag; }

/// One block holds the area and its data, freed together by destroy.
struct area_block {
  aml_area area;
  aml_area_cuda_data data;
};

int create(aml_area** out, int device, int flags, aml_area_ops* ops) {
  if (!out) return -AML_EINVAL;
  *out = nullptr;
  int count = 0;
  try {
    count = memarea::device_count();
  } catch (...) {
    return -AML_FAILURE;  // the backend could not tell how many devices there are
  }
  // -1 is the current device at each mmap; any other id must be a device (docs/aml.md).
  if (device < -1 || device >= count) return -AML_EINVAL;
  if (static_cast<unsigned>(flags) & ~kAllFlags) return -AML_EINVAL;
  auto* b = static_cast<area_block*>(std::malloc(sizeof(area_block)));
  if (!b) return -AML_ENOMEM;
  b->data.flags = flags;
  b->data.device = device;
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
  if (!data) return memarea::aml::fail_null_code(AML_EINVAL);
  const auto* a = reinterpret_cast<const aml_area_cuda_data*>(data);
  const auto* o = reinterpret_cast<const aml_area_cuda_mmap_options*>(opts);
  // -1 keeps the area's device and 0 selects device 0 (AML itself ignores 0, a bug docs/aml.md
  // describes); an id below -1 is no device, refused as memarea refuses it.
  const int option_device = o ? o->device : -1;
  void* option_ptr = o ? o->ptr : nullptr;
  void* result = nullptr;
  memarea_status s = memarea::c_call("aml_area_mmap", [&] {
    if (static_cast<unsigned>(a->flags) & ~kAllFlags)
      throw memarea::error(memarea::errc::invalid_value, "unknown flag bits");
    result = memarea::area(a->device, static_cast<unsigned>(a->flags))
                 .mmap(size, memarea::mmap_options{option_device, option_ptr, tag()});
  });
  if (s != MEMAREA_SUCCESS) return memarea::aml::fail_null(s);
  return result;
}

int munmap_impl(const aml_area_data*, void* ptr, size_t size) {
  // Any CUDA or HIP area of this library's memory (its tag), with exactly the mmap's size.
  memarea_status s = memarea::c_call("aml_area_munmap", [&] {
    if (ptr && size == 0)
      throw memarea::error(memarea::errc::invalid_value, "size 0 does not match the mmap's");
    memarea::free_tagged(ptr, size, tag());
  });
  if (s == MEMAREA_SUCCESS) return AML_SUCCESS;
  return memarea::aml::fail_status(s);
}

int fprintf_impl(const char* kind, const aml_area_data* data, FILE* stream, const char* prefix) {
  if (!stream) return -AML_EINVAL;
  if (!prefix) prefix = "";
  std::fprintf(stream, "%s: area-%s: %p\n", prefix, kind, static_cast<const void*>(data));
  if (!data) return AML_SUCCESS;
  const auto* a = reinterpret_cast<const aml_area_cuda_data*>(data);
  std::fprintf(stream, "%s: device: %d\n%s: flags: %#x\n", prefix, a->device, prefix,
               static_cast<unsigned>(a->flags));
  return AML_SUCCESS;
}

aml_area_cuda_data g_hip_default{AML_AREA_HIP_FLAG_DEFAULT, -1};
aml_area_cuda_data g_hip_unified{AML_AREA_HIP_FLAG_ALLOC_UNIFIED, -1};
aml_area_cuda_data g_cuda_default{AML_AREA_CUDA_FLAG_DEFAULT, -1};
aml_area_cuda_data g_cuda_unified{AML_AREA_CUDA_FLAG_ALLOC_UNIFIED, -1};

}  // namespace

extern "C" {

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
