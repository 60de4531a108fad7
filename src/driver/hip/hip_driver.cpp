// The HIP backend: AMD's HIP runtime (libamdhip64), loaded with dlopen so that one binary runs on
// machines with an AMD GPU, another GPU or none, as the traits of driver/gpu_backend.hpp (which
// writes the driver interface once, for CUDA and HIP). Thin: each operation is one HIP call, the
// device switch the contract asks for and an explicit translation of its hipError_t.
//
// What stays here is what only HIP knows: loading the runtime and counting its devices, its entry
// points in memarea's types, ROCm 5/6 differences, what HIP cannot do. The entry points it
// resolves are listed in hip_symbols.hpp. Its context policy is the device: calls that name one
// run with it current (and put the previous one back); calls that name a pointer or none run as
// they are, since HIP finds the memory's device itself.
//
// ROCm 5 and ROCm 6+ differ in ways that the 5.2 headers we compile against cannot show, so the
// runtime's major version (hipRuntimeGetVersion) picks the right values at run time:
//   - hipIpcMemLazyEnablePeerAccess is 0 in ROCm 5 and 0x1 in ROCm 6; AMD rejects any other flag.
//   - hipMemoryType was renumbered in ROCm 6 (Unregistered 0, Host 1, Device 2, Managed 3,
//     Array 10, Unified 11) from ROCm 5 (Host 0, Device 1, Array 2, Unified 3).
//   - hipMemAllocationProp took CUDA's layout in ROCm 6.
//   - hipDeviceProp_t changed (hipDeviceProp_tR0600); it is not used: attributes are queried one
//     by one, and their numbers are the same in both.
// HIP's NVIDIA platform, built into a libamdhip64.so.5 by tools/hip-nvidia-shim, is how this code
// runs on GPUs at all (no AMD GPU is reachable): it reports the CUDA runtime's version and keeps
// ROCm 5's conventions; what it cannot do is in docs/hip-nvidia.md.
#include "driver/hip/hip_driver.hpp"

#include "driver/hip/hip_vendor.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

namespace memarea::detail {

namespace {

using hip_backend = gpu_backend<hip_vendor>;

/// The file the loader took for `lib` (a bare soname is searched on the library path), or "".
std::string loaded_path(void* lib) {
  link_map* map = nullptr;
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return map->l_name;
}

/// "libamdhip64.so.6/.so.5/.so" for the default list, else the names joined.
std::string candidates_text(const std::vector<std::string>& libraries) {
  if (libraries == hip_library_candidates()) return "libamdhip64.so.6/.so.5/.so";
  std::string text;
  for (const auto& l : libraries) text += (text.empty() ? "" : "/") + l;
  return text.empty() ? "(no library named)" : text;
}

}  // namespace

void hip_vendor::load(const std::vector<std::string>& libraries) {
  std::string errors;
  for (const auto& name : libraries) {
    ::dlerror();
    void* lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      lib_ = lib;
      lib_name_ = name;
      break;
    }
    const char* e = ::dlerror();
    if (!errors.empty()) errors += "; ";
    errors += e ? e : name + ": dlopen failed";
  }
  if (!lib_) {
    reason_ = fmt::format("{} not found: {}", candidates_text(libraries), errors);
    return;
  }

  bool ok = true;
#define MEMAREA_HIP_LOAD_REQUIRED(name)                               \
if (ok && !resolve(lib_, #name, &api_.name)) {                      \
  reason_ = fmt::format("{}: missing symbol {}", lib_name_, #name); \
  ok = false;                                                       \
}
  MEMAREA_HIP_REQUIRED(MEMAREA_HIP_LOAD_REQUIRED)
  MEMAREA_HIP_LOAD_REQUIRED(hipMalloc)
  MEMAREA_HIP_LOAD_REQUIRED(hipHostMalloc)
  MEMAREA_HIP_LOAD_REQUIRED(hipMallocManaged)
#undef MEMAREA_HIP_LOAD_REQUIRED
  if (!ok) return;

  bool vmm = true;
#define MEMAREA_HIP_LOAD_VMM(name) vmm = resolve(lib_, #name, &api_.name) && vmm;
  MEMAREA_HIP_VMM(MEMAREA_HIP_LOAD_VMM)
#undef MEMAREA_HIP_LOAD_VMM
  api_.have_vmm = vmm;
#define MEMAREA_HIP_LOAD_OPTIONAL(name) (void)resolve(lib_, #name, &api_.name);
  MEMAREA_HIP_OPTIONAL(MEMAREA_HIP_LOAD_OPTIONAL)
#undef MEMAREA_HIP_LOAD_OPTIONAL
  (void)resolve(lib_, "hipStreamGetDevice", &api_.hipStreamGetDevice);

  // Versions first: they decide the ROCm 5/6 differences and work without a device.
  int v = 0;
  if (api_.hipRuntimeGetVersion(&v) == hipSuccess) runtime_version_ = v;
  v = 0;
  if (api_.hipDriverGetVersion(&v) == hipSuccess) driver_version_ = v;
  rocm6_ = runtime_version_ > 0 ? runtime_version_ >= 60000000
                                : lib_name_.find(".so.5") == std::string::npos;
  // HIP's NVIDIA platform answers with the CUDA runtime's version (13000 for 13.0); every
  // ROCm version is major * 10^7 + ..., so above 10^7. It keeps ROCm 5's conventions where the
  // platforms differ (tools/hip-nvidia-shim translates them), so rocm6_ stays false.
  nvidia_platform_ = runtime_version_ > 0 && runtime_version_ < 10000000;
  lib_path_ = loaded_path(lib_);
  loaded_ = true;

  int n = 0;
  const hipError_t e = api_.hipGetDeviceCount(&n);
  if (e != hipSuccess) {
    const std::string text = error_text(e);
    reason_ = fmt::format("hipGetDeviceCount: {} ({}){}{}", hip_error_name(e),
                          static_cast<int>(e), text.empty() ? "" : ": ", text);
    return;
  }
  if (n <= 0) {
    reason_ = "hipGetDeviceCount: 0 devices";
    return;
  }
  count_ = n;
}


// --- what is HIP's alone -------------------------------------------------------------------------

template <>
dstatus hip_backend::get_properties(int device, memarea_device_properties* props) {
  MEMAREA_GPU_READY("get_properties");
  const hip_api& api = v_.api();
  memarea_device_properties p{};
  std::snprintf(p.backend, sizeof p.backend, "%s", "hip");
  p.ordinal = device;

  hipDevice_t dev = 0;
  MEMAREA_GPU_TRY(call(api.hipDeviceGet(&dev, device), "hipDeviceGet"));
  MEMAREA_GPU_TRY(
      call(api.hipDeviceGetName(p.name, static_cast<int>(sizeof p.name), dev), "hipDeviceGetName"));
  p.name[sizeof p.name - 1] = '\0';
  // A missing PCI id is not fatal (the contract allows ""), so its failure is not reported.
  if (api.hipDeviceGetPCIBusId(p.pci_bus_id, static_cast<int>(sizeof p.pci_bus_id), device) !=
      hipSuccess) {
    p.pci_bus_id[0] = '\0';
  }
  p.pci_bus_id[sizeof p.pci_bus_id - 1] = '\0';

  size_t total = 0;
  MEMAREA_GPU_TRY(call(api.hipDeviceTotalMem(&total, dev), "hipDeviceTotalMem"));
  p.total_memory = total;
  size_t free_bytes = 0, total_again = 0;
  MEMAREA_GPU_TRY(mem_get_info(device, &free_bytes, &total_again));
  p.free_memory = free_bytes;

  struct attribute_field {
    hipDeviceAttribute_t attribute;
    int* field;
  };
  const attribute_field fields[] = {
      {hipDeviceAttributeUnifiedAddressing, &p.unified_addressing},
      {hipDeviceAttributeManagedMemory, &p.managed_memory},
      {hipDeviceAttributeConcurrentManagedAccess, &p.concurrent_managed_access},
      {hipDeviceAttributePageableMemoryAccess, &p.pageable_memory_access},
      {hipDeviceAttributeCanMapHostMemory, &p.can_map_host_memory},
      {hipDeviceAttributeComputeCapabilityMajor, &p.compute_major},
      {hipDeviceAttributeComputeCapabilityMinor, &p.compute_minor},
  };
  for (const auto& f : fields) {
    int value = 0;
    const hipError_t e = api.hipDeviceGetAttribute(&value, f.attribute, device);
    // HIP 5.2's NVIDIA platform maps no CUDA attribute to unified addressing and answers
    // hipErrorInvalidValue. Every HIP device has it (this backend's copies rely on it: they
    // all pass hipMemcpyDefault, which only unified addressing can resolve), so a runtime
    // that does not know the attribute reports 1 rather than failing the whole query.
    if (e == hipErrorInvalidValue && f.attribute == hipDeviceAttributeUnifiedAddressing) {
      *f.field = 1;
      continue;
    }
    if (e != hipSuccess)  // the name is formatted only for the message
      return fail(e, fmt::format("hipDeviceGetAttribute({})", static_cast<int>(f.attribute)));
    *f.field = value;
  }
  // Booleans are normalised to 0/1 as the public struct documents.
  for (int* b : {&p.unified_addressing, &p.managed_memory, &p.concurrent_managed_access,
                 &p.pageable_memory_access, &p.can_map_host_memory}) {
    *b = *b != 0;
  }
  p.virtual_memory_management = v_.vmm_supported(device) ? 1 : 0;
  // HIP has no IPC attribute: legacy IPC is part of every Linux HIP runtime.
  p.ipc = 1;
  *props = p;
  return {};
}

template <>
dstatus hip_backend::get_current_device(int* device) {
  MEMAREA_GPU_READY("get_current_device");
  return call(v_.api().hipGetDevice(device), "hipGetDevice");
}

/// hipStreamGetDevice where the runtime has it; else only whether the runtime knows the
/// stream (hipStreamQuery answers success or not-ready for a live one), the device unknown.
template <>
dstatus hip_backend::stream_get_device(native_stream s, int* device) {
  MEMAREA_GPU_READY("stream_get_device");
  const hip_api& api = v_.api();
  if (api.hipStreamGetDevice) {
    hipDevice_t dev = 0;
    const hipError_t r = api.hipStreamGetDevice(as_stream(s), &dev);
    if (r != hipSuccess) return fail(r, "hipStreamGetDevice");
    *device = static_cast<int>(dev);
    return {};
  }
  const hipError_t r = api.hipStreamQuery(as_stream(s));
  if (r != hipSuccess && r != hipErrorNotReady) return fail(r, "hipStreamQuery");
  *device = -1;
  return {};
}

template <>
dstatus hip_backend::pointer_query(const void* ptr, pointer_info* info) {
  MEMAREA_GPU_READY("pointer_query");
  const hip_api& api = v_.api();
  hipPointerAttribute_t attr{};
  const hipError_t e = api.hipPointerGetAttributes(&attr, ptr);
  // ROCm 5 answers hipErrorInvalidValue for memory it does not know; ROCm 6 answers success
  // with hipMemoryTypeUnregistered (checked below). Both mean "not HIP's".
  if (e == hipErrorInvalidValue) {
    dstatus s = fail(e, "hipPointerGetAttributes");
    s.code = errc::not_found;
    return s;
  }
  MEMAREA_GPU_TRY(call(e, "hipPointerGetAttributes"));

  pointer_info out;
  const int type = static_cast<int>(attr.memoryType);
  bool host = false;
  if (attr.isManaged) {
    out.kind = MEMAREA_MEMORY_MANAGED;
  } else if (v_.rocm6()) {
    switch (type) {
      case r6_memory_type_unregistered:
        return refusal(errc::not_found, "pointer_query: the HIP runtime does not know ptr");
      case r6_memory_type_host: host = true; break;
      case r6_memory_type_device:
      case r6_memory_type_array: out.kind = MEMAREA_MEMORY_DEVICE; break;
      case r6_memory_type_managed:
      case r6_memory_type_unified: out.kind = MEMAREA_MEMORY_MANAGED; break;
      default:
        return refusal(errc::unknown,
                       fmt::format("pointer_query: unexpected hipMemoryType {}", type));
    }
  } else {
    switch (type) {
      case hipMemoryTypeHost: host = true; break;
      case hipMemoryTypeDevice:
      case hipMemoryTypeArray: out.kind = MEMAREA_MEMORY_DEVICE; break;
      case hipMemoryTypeUnified: out.kind = MEMAREA_MEMORY_MANAGED; break;
      default:
        return refusal(errc::unknown,
                       fmt::format("pointer_query: unexpected hipMemoryType {}", type));
    }
  }
  if (host) {
    // HIP cannot tell hipHostMalloc from hipHostRegister; the core's registry knows better.
    out.kind = (attr.allocationFlags & hipHostMallocMapped) && attr.devicePointer
                   ? MEMAREA_MEMORY_MAPPED
                   : MEMAREA_MEMORY_HOST_PINNED;
    out.device = MEMAREA_CPU_DEVICE_ID;
  } else {
    out.device = attr.device;
  }

  hipDeviceptr_t base = nullptr;
  size_t size = 0;
  dstatus range = call(api.hipMemGetAddressRange(&base, &size, const_cast<void*>(ptr)),
                       "hipMemGetAddressRange");
  // Pinned host memory is known by kind and device even where the runtime keeps no range for
  // it (HIP's NVIDIA platform asks cuMemGetAddressRange, which covers device allocations);
  // its range is then unknown (null, 0), as the CUDA backend reports it. The core's registry
  // holds the range of everything memarea allocated itself.
  if (!range.ok() && !host) return range;
  out.base = range.ok() ? base : nullptr;
  out.size = range.ok() ? size : 0;
  *info = out;
  return {};
}

/// A new or imported allocation needs the device's support; an export or a release only the API.
template <>
dstatus hip_backend::shareable_check(shareable_step step, int device, const char* what) const {
  if (step == shareable_step::create || step == shareable_step::import)
    return v_.check_vmm(device, what);
  if (!v_.api().have_vmm)
    return refusal(errc::not_supported, fmt::format("{}: this HIP runtime has no VMM API", what));
  return {};
}

/// The hipMem* calls that driver/vmm.hpp's sequence makes, on the caller's current device.
template <>
struct hip_backend::vmm_calls {
  using handle = hipMemGenericAllocationHandle_t;
  const hip_backend& d;

  const hip_api& api() const { return d.v_.api(); }
  /// A runtime that names no granularity gets pages.
  dstatus granularity(int device, size_t* g) const {
    vmm_prop prop(device, d.v_.rocm6());
    dstatus s = d.call(
        api().hipMemGetAllocationGranularity(g, prop.get(), hipMemAllocationGranularityMinimum),
        "hipMemGetAllocationGranularity");
    if (s.ok() && *g == 0) *g = 4096;
    return s;
  }
  dstatus create(int device, size_t size, handle* h) const {
    vmm_prop prop(device, d.v_.rocm6());
    return d.call(api().hipMemCreate(h, size, prop.get(), 0), "hipMemCreate");
  }
  dstatus import(int fd, handle* h) const {
    void* os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd));
    return d.call(
        api().hipMemImportFromShareableHandle(h, os_handle, hipMemHandleTypePosixFileDescriptor),
        "hipMemImportFromShareableHandle");
  }
  /// HIP has no properties-from-handle call: the importing device's granularity.
  dstatus import_granularity(handle, int device, size_t* g) const {
    return granularity(device, g);
  }
  /// HIP writes an int through the pointer; a zeroed 8-byte buffer also survives a runtime
  /// that writes a pointer-sized value.
  dstatus export_fd(handle h, int* fd) const {
    std::uint64_t raw = 0;
    MEMAREA_GPU_TRY(d.call(
        api().hipMemExportToShareableHandle(&raw, h, hipMemHandleTypePosixFileDescriptor, 0),
        "hipMemExportToShareableHandle"));
    int value = -1;
    std::memcpy(&value, &raw, sizeof value);
    if (value < 0)
      return refusal(errc::unknown, "hipMemExportToShareableHandle returned no file descriptor");
    *fd = value;
    return {};
  }
  dstatus reserve(size_t size, size_t alignment, void** addr) const {
    return d.call(api().hipMemAddressReserve(addr, size, alignment, nullptr, 0),
                  "hipMemAddressReserve");
  }
  dstatus free_address(void* addr, size_t size) const {
    return d.call(api().hipMemAddressFree(addr, size), "hipMemAddressFree");
  }
  dstatus map(void* addr, size_t size, handle h) const {
    return d.call(api().hipMemMap(addr, size, 0, h, 0), "hipMemMap");
  }
  dstatus unmap(void* addr, size_t size) const {
    return d.call(api().hipMemUnmap(addr, size), "hipMemUnmap");
  }
  dstatus set_access(void* addr, size_t size, const int* devices, size_t n) const {
    std::vector<hipMemAccessDesc> access(n);
    for (size_t i = 0; i < n; ++i) {
      access[i] = hipMemAccessDesc{};
      access[i].location.type = hipMemLocationTypeDevice;
      access[i].location.id = devices[i];
      access[i].flags = hipMemAccessFlagsProtReadWrite;
    }
    return d.call(api().hipMemSetAccess(addr, size, access.data(), n), "hipMemSetAccess");
  }
  dstatus release(handle h) const { return d.call(api().hipMemRelease(h), "hipMemRelease"); }
  int device_count() const { return d.v_.device_count(); }
  bool can_reach(int from, int to) const {
    int can = 0;
    return api().hipDeviceCanAccessPeer(&can, from, to) == hipSuccess && can;
  }
  static std::uint64_t to_opaque(handle h) { return reinterpret_cast<std::uintptr_t>(h); }
  static handle from_opaque(std::uint64_t w) {
    return reinterpret_cast<handle>(static_cast<std::uintptr_t>(w));
  }
};

std::vector<std::string> hip_library_candidates() {
  return {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
}

std::unique_ptr<driver> make_hip_driver_from(const std::vector<std::string>& libraries) {
  std::unique_ptr<hip_backend> d;
  try {
    d = std::make_unique<hip_backend>();
  } catch (...) {
    return nullptr;  // out of memory for a small object: nothing sensible can be built
  }
  try {
    d->vendor().load(libraries);
  } catch (const std::exception& e) {
    d->vendor().fail(std::string("HIP backend failed to initialise: ") + e.what());
  } catch (...) {
    d->vendor().fail("HIP backend failed to initialise");
  }
  return d;
}

std::unique_ptr<driver> make_hip_driver() {
  try {
    return make_hip_driver_from(hip_library_candidates());
  } catch (...) {
    return nullptr;
  }
}

}  // namespace memarea::detail
