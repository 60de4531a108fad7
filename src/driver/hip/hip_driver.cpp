// The HIP backend: AMD's HIP runtime (libamdhip64), loaded with dlopen so that one binary runs on
// machines with an AMD GPU, another GPU or none. Thin: each operation is one HIP call (plus the
// device switch the contract asks for) and an explicit translation of its hipError_t.
//
// Arguments are the front's (driver/front.hpp): pointers, flags, enums and device ordinals are
// checked before a call reaches this file. What stays is what only this backend knows: whether
// the runtime loaded and has devices, ROCm 5/6 differences, what HIP cannot do. The
// shareable-memory steps are driver/vmm.hpp's, over this backend's calls (vmm_calls); the entry
// points it resolves are listed in hip_symbols.hpp.
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

#include "driver/hip/hip_errors.hpp"
#include "driver/hip/hip_symbols.hpp"
#include "driver/front.hpp"
#include "driver/vmm.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>

namespace memarea::detail {

namespace {

// ROCm 6's hipMemAllocationProp (CUDA's layout); our 5.2 headers declare the older one.
struct mem_location_r6 {
  int type;
  int id;
};
struct mem_allocation_prop_r6 {
  int type;
  int requested_handle_types;
  mem_location_r6 location;
  void* win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
  } alloc_flags;
};

// ROCm 6's hipMemoryType values (CUDA's numbering).
constexpr int r6_memory_type_unregistered = 0;
constexpr int r6_memory_type_host = 1;
constexpr int r6_memory_type_device = 2;
constexpr int r6_memory_type_managed = 3;
constexpr int r6_memory_type_array = 10;
constexpr int r6_memory_type_unified = 11;
// ROCm 6's hipDeviceAttributeVirtualMemoryManagementSupported (after MemoryPoolsSupported, 88).
constexpr int r6_attribute_vmm_supported = 89;


// Makes `device` current until the end of the enclosing scope (device_scope), or returns why not.
#define MEMAREA_HIP_ON_DEVICE(device, what)                                           \
  device_scope scope(*this);                                                          \
  if (auto memarea_scope_st_ = scope.enter(device, what); !memarea_scope_st_.ok()) \
  return memarea_scope_st_

class hip_driver final : public driver {
 public:
  hip_driver() = default;
  hip_driver(const hip_driver&) = delete;
  hip_driver& operator=(const hip_driver&) = delete;
  /// The library stays loaded: unloading HIP runtimes is known to crash in their teardown, and
  /// pointers it handed out may outlive this object.
  ~hip_driver() override = default;

  /// Loads the first library of `libraries` that opens and resolves its symbols, then counts
  /// devices. Every failure is recorded in reason_ and leaves count_ at 0.
  void load(const std::vector<std::string>& libraries) {
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
#define MEMAREA_HIP_LOAD_REQUIRED(name)                                               \
  if (ok && !resolve(lib_, #name, &api_.name)) {                                     \
    reason_ = fmt::format("{}: missing symbol {}", lib_name_, #name);                 \
    ok = false;                                                                       \
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

  /// Records why the backend could not start when loading itself threw.
  void fail(std::string why) {
    count_ = 0;
    reason_ = std::move(why);
  }

  // --- identity ------------------------------------------------------------------------------

  const char* name() const noexcept override { return "hip"; }
  std::string unavailable_reason() const override { return count_ > 0 ? "" : reason_; }

  /// "HIP runtime 5.2.21153, driver ... (/opt/rocm/lib/libamdhip64.so.5)", or for HIP's NVIDIA
  /// platform "HIP's NVIDIA platform over CUDA runtime 13.0, driver 13.0 (...)": which runtime
  /// answered, and from which file, since several libamdhip64 may be on the library path.
  std::string version() const override {
    if (!loaded_) return "";
    std::string text;
    if (nvidia_platform_) {
      text = "HIP's NVIDIA platform over CUDA runtime " + cuda_version_text(runtime_version_);
      if (driver_version_ > 0) text += ", driver " + cuda_version_text(driver_version_);
    } else {
      text = "HIP runtime " + version_text(runtime_version_);
      if (driver_version_ > 0) text += ", driver " + version_text(driver_version_);
    }
    if (!lib_path_.empty()) text += " (" + lib_path_ + ")";
    return text;
  }

  int device_count() const noexcept override { return count_; }

  dstatus get_properties(int device, memarea_device_properties* props) override {
    if (auto s = check_available("get_properties"); !s.ok()) return s;
    memarea_device_properties p{};
    std::snprintf(p.backend, sizeof p.backend, "%s", "hip");
    p.ordinal = device;

    hipDevice_t dev = 0;
    if (auto s = call(api_.hipDeviceGet(&dev, device), "hipDeviceGet"); !s.ok()) return s;
    dstatus named = call(api_.hipDeviceGetName(p.name, static_cast<int>(sizeof p.name), dev),
                         "hipDeviceGetName");
    if (!named.ok()) return named;
    p.name[sizeof p.name - 1] = '\0';
    // A missing PCI id is not fatal (the contract allows ""), so its failure is not reported.
    if (api_.hipDeviceGetPCIBusId(p.pci_bus_id, static_cast<int>(sizeof p.pci_bus_id), device) !=
        hipSuccess) {
      p.pci_bus_id[0] = '\0';
    }
    p.pci_bus_id[sizeof p.pci_bus_id - 1] = '\0';

    size_t total = 0;
    if (auto s = call(api_.hipDeviceTotalMem(&total, dev), "hipDeviceTotalMem"); !s.ok()) return s;
    p.total_memory = total;
    size_t free_bytes = 0, total_again = 0;
    if (auto s = mem_get_info(device, &free_bytes, &total_again); !s.ok()) return s;
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
      const hipError_t e = api_.hipDeviceGetAttribute(&value, f.attribute, device);
      // HIP 5.2's NVIDIA platform maps no CUDA attribute to unified addressing and answers
      // hipErrorInvalidValue. Every HIP device has it (this backend's copies rely on it: they
      // all pass hipMemcpyDefault, which only unified addressing can resolve), so a runtime
      // that does not know the attribute reports 1 rather than failing the whole query.
      if (e == hipErrorInvalidValue && f.attribute == hipDeviceAttributeUnifiedAddressing) {
        *f.field = 1;
        continue;
      }
      if (e != hipSuccess)  // the name is formatted only for the message
        return call(e, fmt::format("hipDeviceGetAttribute({})", static_cast<int>(f.attribute)));
      *f.field = value;
    }
    // Booleans are normalised to 0/1 as the public struct documents.
    for (int* b : {&p.unified_addressing, &p.managed_memory, &p.concurrent_managed_access,
                   &p.pageable_memory_access, &p.can_map_host_memory}) {
      *b = *b != 0;
    }
    p.virtual_memory_management = vmm_supported(device) ? 1 : 0;
    // HIP has no IPC attribute: legacy IPC is part of every Linux HIP runtime.
    p.ipc = 1;
    *props = p;
    return dstatus::success();
  }

  dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) override {
    MEMAREA_HIP_ON_DEVICE(device, "mem_get_info");
    return call(api_.hipMemGetInfo(free_bytes, total_bytes), "hipMemGetInfo");
  }

  // --- the per-thread current device ---------------------------------------------------------

  dstatus set_current_device(int device) override {
    if (auto s = check_available("set_current_device"); !s.ok()) return s;
    return call(api_.hipSetDevice(device), "hipSetDevice");
  }

  dstatus get_current_device(int* device) override {
    if (auto s = check_available("get_current_device"); !s.ok()) return s;
    return call(api_.hipGetDevice(device), "hipGetDevice");
  }

  // --- allocation ----------------------------------------------------------------------------

  dstatus malloc_device(int device, size_t size, void** ptr) override {
    MEMAREA_HIP_ON_DEVICE(device, "malloc_device");
    return call(api_.hipMalloc(ptr, size), "hipMalloc");
  }

  dstatus free_device(void* ptr) override {
    if (auto s = check_available("free_device"); !s.ok()) return s;
    return call(api_.hipFree(ptr), "hipFree");
  }

  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) override {
    MEMAREA_HIP_ON_DEVICE(device, "malloc_host");
    const unsigned hip_flags = host_flags_to_hip(flags, hipHostMallocPortable, hipHostMallocMapped);
    return call(api_.hipHostMalloc(ptr, size, hip_flags), "hipHostMalloc");
  }

  dstatus free_host(void* ptr) override {
    if (auto s = check_available("free_host"); !s.ok()) return s;
    return call(api_.hipHostFree(ptr), "hipHostFree");
  }

  dstatus host_register(int device, void* ptr, size_t size, unsigned flags) override {
    MEMAREA_HIP_ON_DEVICE(device, "host_register");
    const unsigned hip_flags =
        host_flags_to_hip(flags, hipHostRegisterPortable, hipHostRegisterMapped);
    return call(api_.hipHostRegister(ptr, size, hip_flags), "hipHostRegister");
  }

  dstatus host_unregister(void* ptr) override {
    if (auto s = check_available("host_unregister"); !s.ok()) return s;
    return call(api_.hipHostUnregister(ptr), "hipHostUnregister");
  }

  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) override {
    if (auto s = check_available("host_get_device_pointer"); !s.ok()) return s;
    return call(api_.hipHostGetDevicePointer(device_ptr, host_ptr, 0), "hipHostGetDevicePointer");
  }

  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) override {
    MEMAREA_HIP_ON_DEVICE(device, "malloc_managed");
    return call(api_.hipMallocManaged(ptr, size, hip_attach(attach_flags)), "hipMallocManaged");
  }

  dstatus free_managed(void* ptr) override {
    if (auto s = check_available("free_managed"); !s.ok()) return s;
    return call(api_.hipFree(ptr), "hipFree");
  }

  dstatus address_range(const void* ptr, void** base, size_t* size) override {
    if (auto s = check_available("address_range"); !s.ok()) return s;
    hipDeviceptr_t b = nullptr;
    size_t n = 0;
    const hipError_t e = api_.hipMemGetAddressRange(&b, &n, const_cast<void*>(ptr));
    if (e == hipErrorInvalidValue || e == hipErrorNotFound) {
      // Memory HIP does not know (as pointer_query reads ROCm 5's answer).
      dstatus s = call(e, "hipMemGetAddressRange");
      s.code = errc::not_found;
      return s;
    }
    if (e != hipSuccess) return call(e, "hipMemGetAddressRange");
    *base = b;
    *size = n;
    return {};
  }

  dstatus pointer_query(const void* ptr, pointer_info* info) override {
    if (auto s = check_available("pointer_query"); !s.ok()) return s;

    hipPointerAttribute_t attr{};
    const hipError_t e = api_.hipPointerGetAttributes(&attr, ptr);
    // ROCm 5 answers hipErrorInvalidValue for memory it does not know; ROCm 6 answers success
    // with hipMemoryTypeUnregistered (checked below). Both mean "not HIP's".
    if (e == hipErrorInvalidValue) {
      dstatus s = call(e, "hipPointerGetAttributes");
      s.code = errc::not_found;
      return s;
    }
    if (e != hipSuccess) return call(e, "hipPointerGetAttributes");

    pointer_info out;
    const int type = static_cast<int>(attr.memoryType);
    bool host = false;
    if (attr.isManaged) {
      out.kind = MEMAREA_MEMORY_MANAGED;
    } else if (rocm6_) {
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
    dstatus range = call(api_.hipMemGetAddressRange(&base, &size, const_cast<void*>(ptr)),
                         "hipMemGetAddressRange");
    // Pinned host memory is known by kind and device even where the runtime keeps no range for
    // it (HIP's NVIDIA platform asks cuMemGetAddressRange, which covers device allocations);
    // its range is then unknown (null, 0), as the CUDA backend reports it. The core's registry
    // holds the range of everything memarea allocated itself.
    if (!range.ok() && !host) return range;
    out.base = range.ok() ? base : nullptr;
    out.size = range.ok() ? size : 0;
    *info = out;
    return dstatus::success();
  }

  // --- peer access ---------------------------------------------------------------------------

  dstatus can_access_peer(int device, int peer, int* can_access) override {
    if (auto s = check_available("can_access_peer"); !s.ok()) return s;
    return call(api_.hipDeviceCanAccessPeer(can_access, device, peer), "hipDeviceCanAccessPeer");
  }

  dstatus enable_peer_access(int device, int peer, unsigned flags) override {
    MEMAREA_HIP_ON_DEVICE(device, "enable_peer_access");
    dstatus s = call(api_.hipDeviceEnablePeerAccess(peer, flags), "hipDeviceEnablePeerAccess");
    // The front checked both ordinals, so AMD's hipErrorInvalidDevice can only mean that this
    // device cannot reach the peer (REFERENCE.md); say so, keeping the native code.
    if (s.native == hipErrorInvalidDevice) {
      s.code = errc::peer_access_unsupported;
      s.detail = fmt::format("device {} cannot access device {} ({})", device, peer,
                             s.detail.view());
    }
    return s;
  }

  dstatus disable_peer_access(int device, int peer) override {
    MEMAREA_HIP_ON_DEVICE(device, "disable_peer_access");
    return call(api_.hipDeviceDisablePeerAccess(peer), "hipDeviceDisablePeerAccess");
  }

  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) override {
    if (auto s = check_available("get_p2p_attribute"); !s.ok()) return s;
    return call(api_.hipDeviceGetP2PAttribute(value, hip_p2p(attr), src, dst),
                "hipDeviceGetP2PAttribute");
  }

  // --- copies --------------------------------------------------------------------------------

  dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                       native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "memcpy_async");
    return call(api_.hipMemcpyAsync(dst, src, size, hipMemcpyDefault, as_stream(s)),
                "hipMemcpyAsync");
  }

  dstatus memcpy_sync(void* dst, const void* src, size_t size, int device,
                      native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "memcpy_sync");
    if (dstatus st = call(api_.hipMemcpyAsync(dst, src, size, hipMemcpyDefault, as_stream(s)),
                          "hipMemcpyAsync");
        !st.ok())
      return st;
    return call(api_.hipStreamSynchronize(as_stream(s)), "hipStreamSynchronize");
  }

  dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                            size_t size, int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "memcpy_peer_async");
    return call(api_.hipMemcpyPeerAsync(dst, dst_device, src, src_device, size, as_stream(s)),
                "hipMemcpyPeerAsync");
  }

  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "memset_async");
    return call(api_.hipMemsetAsync(dst, value, size, as_stream(s)), "hipMemsetAsync");
  }

  // --- streams and events --------------------------------------------------------------------

  dstatus stream_create(int device, native_stream* s) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_create");
    // Non-blocking: memarea streams must not serialise with the legacy default stream.
    hipStream_t stream = nullptr;
    dstatus st = call(api_.hipStreamCreateWithFlags(&stream, hipStreamNonBlocking),
                      "hipStreamCreateWithFlags");
    if (st.ok()) *s = stream;
    return st;
  }

  dstatus stream_destroy(int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_destroy");
    return call(api_.hipStreamDestroy(as_stream(s)), "hipStreamDestroy");
  }

  dstatus stream_synchronize(int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_synchronize");
    return call(api_.hipStreamSynchronize(as_stream(s)), "hipStreamSynchronize");
  }

  dstatus stream_query(int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_query");
    const hipError_t r = api_.hipStreamQuery(as_stream(s));
    if (r == hipSuccess) return {};
    if (r == hipErrorNotReady) return dstatus::not_ready(static_cast<int>(r), "hipErrorNotReady");
    return call(r, "hipStreamQuery");
  }

  dstatus event_create(int device, native_event* e, event_timing timing) override {
    MEMAREA_HIP_ON_DEVICE(device, "event_create");
    hipEvent_t event = nullptr;
    const unsigned flags = timing == event_timing::on ? hipEventDefault : hipEventDisableTiming;
    dstatus st = call(api_.hipEventCreateWithFlags(&event, flags), "hipEventCreateWithFlags");
    if (st.ok()) *e = event;
    return st;
  }

  dstatus event_destroy(int device, native_event e) override {
    MEMAREA_HIP_ON_DEVICE(device, "event_destroy");
    return call(api_.hipEventDestroy(as_event(e)), "hipEventDestroy");
  }

  dstatus event_record(native_event e, int device, native_stream s) override {
    MEMAREA_HIP_ON_DEVICE(device, "event_record");
    return call(api_.hipEventRecord(as_event(e), as_stream(s)), "hipEventRecord");
  }

  dstatus stream_wait_event(int device, native_stream s, native_event e) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_wait_event");
    return call(api_.hipStreamWaitEvent(as_stream(s), as_event(e), 0), "hipStreamWaitEvent");
  }

  dstatus event_synchronize(native_event e) override {
    if (auto st = check_available("event_synchronize"); !st.ok()) return st;
    return call(api_.hipEventSynchronize(as_event(e)), "hipEventSynchronize");
  }

  dstatus event_query(native_event e) override {
    if (auto st = check_available("event_query"); !st.ok()) return st;
    const hipError_t r = api_.hipEventQuery(as_event(e));
    if (r == hipSuccess) return {};
    if (r == hipErrorNotReady) return dstatus::not_ready(static_cast<int>(r), "hipErrorNotReady");
    return call(r, "hipEventQuery");
  }

  dstatus event_elapsed_ms(float* ms, native_event start, native_event end) override {
    if (auto st = check_available("event_elapsed_ms"); !st.ok()) return st;
    return call(api_.hipEventElapsedTime(ms, as_event(start), as_event(end)),
                "hipEventElapsedTime");
  }

  dstatus device_synchronize(int device) override {
    MEMAREA_HIP_ON_DEVICE(device, "device_synchronize");
    return call(api_.hipDeviceSynchronize(), "hipDeviceSynchronize");
  }

  // --- legacy IPC ----------------------------------------------------------------------------

  dstatus ipc_get_handle(void* base, ipc_native_handle* handle) override {
    if (auto st = check_available("ipc_get_handle"); !st.ok()) return st;
    hipIpcMemHandle_t h{};
    static_assert(sizeof h == sizeof handle->bytes, "hipIpcMemHandle_t is 64 bytes");
    dstatus st = call(api_.hipIpcGetMemHandle(&h, base), "hipIpcGetMemHandle");
    if (st.ok()) std::memcpy(handle->bytes, &h, sizeof h);
    return st;
  }

  dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned /*flags*/,
                          void** ptr) override {
    MEMAREA_HIP_ON_DEVICE(device, "ipc_open_handle");
    hipIpcMemHandle_t h{};
    std::memcpy(&h, handle.bytes, sizeof h);
    // AMD accepts exactly hipIpcMemLazyEnablePeerAccess, whose value changed with ROCm 6, and
    // maps peers lazily anyway: pass it whatever the caller asked.
    const unsigned lazy = rocm6_ ? 0x1u : 0x0u;
    return call(api_.hipIpcOpenMemHandle(ptr, h, lazy), "hipIpcOpenMemHandle");
  }

  dstatus ipc_close_handle(void* ptr) override {
    if (auto st = check_available("ipc_close_handle"); !st.ok()) return st;
    return call(api_.hipIpcCloseMemHandle(ptr), "hipIpcCloseMemHandle");
  }

  // --- shareable memory: driver/vmm.hpp's steps ----------------------------------------------

  dstatus shareable_create(int device, size_t size, shareable_allocation* out) override {
    if (auto st = check_available("shareable_create"); !st.ok()) return st;
    if (auto st = check_vmm(device, "shareable_create"); !st.ok()) return st;
    MEMAREA_HIP_ON_DEVICE(device, "shareable_create");
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).create(device, size, out);
  }

  dstatus shareable_export_fd(const shareable_allocation& a, int* fd) override {
    if (!a.opaque[0]) return refusal(errc::invalid_value, "shareable_export_fd: not an allocation");
    if (auto st = check_available("shareable_export_fd"); !st.ok()) return st;
    if (!api_.have_vmm)
      return refusal(errc::not_supported, "shareable_export_fd: this HIP runtime has no VMM API");
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).export_fd(a, fd);
  }

  dstatus shareable_import_fd(int device, int fd, size_t size,
                              shareable_allocation* out) override {
    // HIP takes the descriptor as the pointer's value and rejects a null pointer.
    if (fd == 0)
      return refusal(errc::not_supported, "shareable_import_fd: HIP cannot import descriptor 0");
    if (auto st = check_available("shareable_import_fd"); !st.ok()) return st;
    if (auto st = check_vmm(device, "shareable_import_fd"); !st.ok()) return st;
    MEMAREA_HIP_ON_DEVICE(device, "shareable_import_fd");
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).import_fd(device, fd, size, out);
  }

  dstatus shareable_release(const shareable_allocation& a) override {
    if (!a.opaque[0]) return refusal(errc::invalid_value, "shareable_release: not an allocation");
    if (auto st = check_available("shareable_release"); !st.ok()) return st;
    if (!api_.have_vmm)
      return refusal(errc::not_supported, "shareable_release: this HIP runtime has no VMM API");
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).release(a);
  }

  // --- managed memory ------------------------------------------------------------------------

  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s) override {
    int target = 0;
    if (auto st = location_to_hip(to, "mem_prefetch_async", &target); !st.ok()) return st;
    MEMAREA_HIP_ON_DEVICE(device, "mem_prefetch_async");
    return call(api_.hipMemPrefetchAsync(ptr, count, target, as_stream(s)),
                "hipMemPrefetchAsync");
  }

  /// Advice that takes no location still goes through HIP's device check: the front gives it
  /// the host, whose id HIP always accepts.
  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                     location where) override {
    int target = hipCpuDeviceId;
    if (auto st = location_to_hip(where, "mem_advise", &target); !st.ok()) return st;
    if (auto st = check_available("mem_advise"); !st.ok()) return st;
    return call(api_.hipMemAdvise(ptr, count, hip_advice(advice), target), "hipMemAdvise");
  }

  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count) override {
    if (auto st = check_available("mem_range_get_attribute"); !st.ok()) return st;
    // The contract pads unused accessed-by slots with the invalid id, as CUDA does; HIP may
    // write fewer. A scratch copy keeps *data unchanged when HIP fails.
    std::vector<int> ids(data_size / sizeof(int), MEMAREA_INVALID_DEVICE_ID);
    dstatus st = call(api_.hipMemRangeGetAttribute(ids.data(), data_size,
                                                   hip_range_attribute(attribute), ptr, count),
                      "hipMemRangeGetAttribute");
    if (st.ok()) std::memcpy(data, ids.data(), data_size);
    return st;
  }

  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags) override {
    MEMAREA_HIP_ON_DEVICE(device, "stream_attach_mem_async");
    return call(api_.hipStreamAttachMemAsync(as_stream(s), ptr, length, hip_attach(flags)),
                "hipStreamAttachMemAsync");
  }

 private:
  /// Runs on `device` and puts the thread's previous device back on every path: the contract's
  /// promise, and the defect of AML this backend must not repeat.
  class device_scope {
   public:
    explicit device_scope(hip_driver& d) : d_(d) {}
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;
    ~device_scope() {
      // A failed restore cannot be reported from a destructor; HIP keeps its own last error.
      if (switched_) (void)d_.api_.hipSetDevice(previous_);
    }

    /// Makes `device` (an ordinal the front checked) current, remembering the previous one.
    /// The current device is asked every time, never remembered: the user may change it
    /// between two calls (hipSetDevice behind our back). On a copy's path (its fixed cost counts
    /// every step), so its steps test HIP's codes and make a status only on failure.
    dstatus enter(int device, const char* what) {
      if (d_.count_ <= 0) [[unlikely]]
        return d_.check_available(what);
      int previous = 0;
      hipError_t e = d_.api_.hipGetDevice(&previous);
      if (e != hipSuccess) [[unlikely]]
        return d_.call(e, "hipGetDevice");
      if (previous == device) [[likely]]
        return dstatus::success();
      e = d_.api_.hipSetDevice(device);
      if (e != hipSuccess) return d_.call(e, "hipSetDevice");
      previous_ = previous;
      switched_ = true;
      return dstatus::success();
    }

   private:
    hip_driver& d_;
    int previous_ = 0;
    bool switched_ = false;
  };

  /// The properties handed to hipMemCreate and hipMemGetAllocationGranularity, in the layout
  /// of the runtime actually loaded.
  class vmm_prop {
   public:
    vmm_prop(int device, bool rocm6) : rocm6_(rocm6) {
      r5_.type = hipMemAllocationTypePinned;
      r5_.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
      r5_.location.type = hipMemLocationTypeDevice;
      r5_.location.id = device;
      r6_.type = hipMemAllocationTypePinned;
      r6_.requested_handle_types = hipMemHandleTypePosixFileDescriptor;
      r6_.location = {hipMemLocationTypeDevice, device};
    }
    /// The prop as the header's type; for ROCm 6 the bytes are those of the newer layout.
    const hipMemAllocationProp* get() const {
      return rocm6_ ? reinterpret_cast<const hipMemAllocationProp*>(&r6_) : &r5_;
    }

   private:
    bool rocm6_;
    hipMemAllocationProp r5_{};
    mem_allocation_prop_r6 r6_{};
  };

  /// A HIP status (native code, name and hipGetErrorString's text) for a failed call; success
  /// passes through. `what` names the HIP function, for the detail. A view, not a std::string:
  /// most callers pass a literal, and success (every copy's case) must build no string.
  dstatus call(hipError_t e, std::string_view what) const {
    if (e == hipSuccess) [[likely]]
      return dstatus::success();
    return failed(e, what);
  }

  /// call()'s failure path, out of line.
  [[gnu::cold, gnu::noinline]] dstatus failed(hipError_t e, std::string_view what) const {
    dstatus s;
    s.native = static_cast<int>(e);
    s.code = map_hip_error(s.native);
    if (s.code == errc::success) s.code = errc::unknown;  // cannot happen; never report success
    s.native_name = hip_error_name(s.native);
    const std::string text = error_text(e);
    s.detail = text.empty() ? fmt::format("{} failed", what) : fmt::format("{}: {}", what, text);
    return s;
  }

  /// hipGetErrorString's text, or "" when the runtime has none.
  std::string error_text(hipError_t e) const {
    const char* text = api_.hipGetErrorString ? api_.hipGetErrorString(e) : nullptr;
    // Some runtimes answer with the enumerator's name, which the status already carries.
    if (!text || std::strcmp(text, hip_error_name(static_cast<int>(e))) == 0) return "";
    return text;
  }

  /// no_device, with the reason, when the runtime is missing or has no devices; this keeps every
  /// call away from a runtime that is not there or not usable.
  dstatus check_available(const char* what) const {
    if (count_ > 0) return dstatus::success();
    return refusal(errc::no_device, fmt::format("{}: HIP has no devices: {}", what, reason_));
  }

  /// The HIP device id of a managed-memory location (hipCpuDeviceId for the host); HIP has no
  /// NUMA nodes.
  static dstatus location_to_hip(const location& where, const char* what, int* id) {
    switch (where.kind) {
      case location::type::device:
        *id = where.id;
        return dstatus::success();
      case location::type::host:
        *id = hipCpuDeviceId;
        return dstatus::success();
      case location::type::host_numa:
        return refusal(errc::not_supported,
                      fmt::format("{}: HIP takes a device or the host, not a host NUMA node ({})",
                                  what, where.id));
      case location::type::invalid: break;
    }
    return refusal(errc::invalid_value, fmt::format("{}: no location given", what));
  }

  // --- memarea's values as HIP's (the front let only valid ones through) --------------------

  /// host_flags as HIP's bits (the same meaning for hipHostMalloc and hipHostRegister).
  static unsigned host_flags_to_hip(unsigned flags, unsigned portable, unsigned mapped) {
    return ((flags & host_portable) ? portable : 0u) | ((flags & host_mapped) ? mapped : 0u);
  }

  /// MEMAREA_MEM_ATTACH_GLOBAL, _HOST or _SINGLE as HIP's flag.
  static unsigned hip_attach(unsigned flags) {
    if (flags == MEMAREA_MEM_ATTACH_GLOBAL) return hipMemAttachGlobal;
    if (flags == MEMAREA_MEM_ATTACH_HOST) return hipMemAttachHost;
    return hipMemAttachSingle;
  }

  static hipDeviceP2PAttr hip_p2p(memarea_p2p_attribute a) {
    switch (a) {
      case MEMAREA_P2P_ATTR_PERFORMANCE_RANK: return hipDevP2PAttrPerformanceRank;
      case MEMAREA_P2P_ATTR_ACCESS_SUPPORTED: return hipDevP2PAttrAccessSupported;
      case MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED: return hipDevP2PAttrNativeAtomicSupported;
      case MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED: break;
    }
    return hipDevP2PAttrHipArrayAccessSupported;
  }

  static hipMemoryAdvise hip_advice(memarea_mem_advice a) {
    switch (a) {
      case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY: return hipMemAdviseSetReadMostly;
      case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY: return hipMemAdviseUnsetReadMostly;
      case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION: return hipMemAdviseSetPreferredLocation;
      case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION: return hipMemAdviseUnsetPreferredLocation;
      case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY: return hipMemAdviseSetAccessedBy;
      case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY: break;
    }
    return hipMemAdviseUnsetAccessedBy;
  }

  static hipMemRangeAttribute hip_range_attribute(memarea_mem_range_attribute a) {
    switch (a) {
      case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: return hipMemRangeAttributeReadMostly;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        return hipMemRangeAttributePreferredLocation;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: return hipMemRangeAttributeAccessedBy;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: break;
    }
    return hipMemRangeAttributeLastPrefetchLocation;
  }

  /// Whether `device` supports hipMemCreate & co. The attribute exists from ROCm 6; ROCm 5's
  /// VMM API was a beta whose support cannot be queried, so it is not advertised.
  bool vmm_supported(int device) const {
    if (!api_.have_vmm || !rocm6_) return false;
    int value = 0;
    return api_.hipDeviceGetAttribute(
               &value, static_cast<hipDeviceAttribute_t>(r6_attribute_vmm_supported), device) ==
               hipSuccess &&
           value != 0;
  }

  /// not_supported, with why, when shareable memory cannot work here. ROCm 5 is still tried (its
  /// runtime answers for itself) when its symbols exist.
  dstatus check_vmm(int device, const char* what) const {
    if (!api_.have_vmm)
      return refusal(errc::not_supported,
                    fmt::format("{}: this HIP runtime lacks the virtual memory API", what));
    if (rocm6_ && !vmm_supported(device))
      return refusal(errc::not_supported,
                    fmt::format("{}: device {} does not support HIP virtual memory management",
                                what, device));
    return dstatus::success();
  }

  /// The hipMem* calls that driver/vmm.hpp's sequence makes, on the caller's current device.
  struct vmm_calls {
    using handle = hipMemGenericAllocationHandle_t;
    const hip_driver& d;

    /// A runtime that names no granularity gets pages.
    dstatus granularity(int device, size_t* g) const {
      vmm_prop prop(device, d.rocm6_);
      dstatus s = d.call(d.api_.hipMemGetAllocationGranularity(g, prop.get(),
                                                               hipMemAllocationGranularityMinimum),
                         "hipMemGetAllocationGranularity");
      if (s.ok() && *g == 0) *g = 4096;
      return s;
    }
    dstatus create(int device, size_t size, handle* h) const {
      vmm_prop prop(device, d.rocm6_);
      return d.call(d.api_.hipMemCreate(h, size, prop.get(), 0), "hipMemCreate");
    }
    dstatus import(int fd, handle* h) const {
      void* os_handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd));
      return d.call(
          d.api_.hipMemImportFromShareableHandle(h, os_handle, hipMemHandleTypePosixFileDescriptor),
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
      dstatus s = d.call(
          d.api_.hipMemExportToShareableHandle(&raw, h, hipMemHandleTypePosixFileDescriptor, 0),
          "hipMemExportToShareableHandle");
      if (!s.ok()) return s;
      int value = -1;
      std::memcpy(&value, &raw, sizeof value);
      if (value < 0)
        return refusal(errc::unknown, "hipMemExportToShareableHandle returned no file descriptor");
      *fd = value;
      return {};
    }
    dstatus reserve(size_t size, size_t alignment, void** addr) const {
      return d.call(d.api_.hipMemAddressReserve(addr, size, alignment, nullptr, 0),
                    "hipMemAddressReserve");
    }
    dstatus free_address(void* addr, size_t size) const {
      return d.call(d.api_.hipMemAddressFree(addr, size), "hipMemAddressFree");
    }
    dstatus map(void* addr, size_t size, handle h) const {
      return d.call(d.api_.hipMemMap(addr, size, 0, h, 0), "hipMemMap");
    }
    dstatus unmap(void* addr, size_t size) const {
      return d.call(d.api_.hipMemUnmap(addr, size), "hipMemUnmap");
    }
    dstatus set_access(void* addr, size_t size, const int* devices, size_t n) const {
      std::vector<hipMemAccessDesc> access(n);
      for (size_t i = 0; i < n; ++i) {
        access[i] = hipMemAccessDesc{};
        access[i].location.type = hipMemLocationTypeDevice;
        access[i].location.id = devices[i];
        access[i].flags = hipMemAccessFlagsProtReadWrite;
      }
      return d.call(d.api_.hipMemSetAccess(addr, size, access.data(), n), "hipMemSetAccess");
    }
    dstatus release(handle h) const { return d.call(d.api_.hipMemRelease(h), "hipMemRelease"); }
    int device_count() const { return d.count_; }
    bool can_reach(int from, int to) const {
      int can = 0;
      return d.api_.hipDeviceCanAccessPeer(&can, from, to) == hipSuccess && can;
    }
    static std::uint64_t to_opaque(handle h) { return reinterpret_cast<std::uintptr_t>(h); }
    static handle from_opaque(std::uint64_t w) {
      return reinterpret_cast<handle>(static_cast<std::uintptr_t>(w));
    }
  };

  static hipStream_t as_stream(native_stream s) { return static_cast<hipStream_t>(s); }
  static hipEvent_t as_event(native_event e) { return static_cast<hipEvent_t>(e); }

  /// "5.2.21153" from HIP's encoding (major * 10^7 + minor * 10^5 + patch).
  static std::string version_text(int v) {
    if (v <= 0) return "unknown";
    return fmt::format("{}.{}.{}", v / 10000000, (v / 100000) % 100, v % 100000);
  }

  /// "13.0" from CUDA's encoding (major * 1000 + minor * 10), which HIP's NVIDIA platform returns.
  static std::string cuda_version_text(int v) {
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  }

  /// The file the loader took for `lib` (a bare soname is searched on the library path), or "".
  static std::string loaded_path(void* lib) {
    link_map* map = nullptr;
    if (::dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
    return map->l_name;
  }

  /// "libamdhip64.so.6/.so.5/.so" for the default list, else the names joined.
  static std::string candidates_text(const std::vector<std::string>& libraries) {
    if (libraries == hip_library_candidates()) return "libamdhip64.so.6/.so.5/.so";
    std::string text;
    for (const auto& l : libraries) text += (text.empty() ? "" : "/") + l;
    return text.empty() ? "(no library named)" : text;
  }

  void* lib_ = nullptr;
  std::string lib_name_;
  std::string lib_path_;
  hip_api api_;
  bool loaded_ = false;
  bool rocm6_ = false;
  bool nvidia_platform_ = false;  ///< HIP's NVIDIA platform (tools/hip-nvidia-shim), not ROCm
  int runtime_version_ = 0;
  int driver_version_ = 0;
  int count_ = 0;
  std::string reason_ = "not loaded";
};

#undef MEMAREA_HIP_ON_DEVICE

}  // namespace

std::vector<std::string> hip_library_candidates() {
  return {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
}

std::unique_ptr<driver> make_hip_driver_from(const std::vector<std::string>& libraries) {
  std::unique_ptr<hip_driver> d;
  try {
    d = std::make_unique<hip_driver>();
  } catch (...) {
    return nullptr;  // out of memory for a small object: nothing sensible can be built
  }
  try {
    d->load(libraries);
  } catch (const std::exception& e) {
    d->fail(std::string("HIP backend failed to initialise: ") + e.what());
  } catch (...) {
    d->fail("HIP backend failed to initialise");
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
