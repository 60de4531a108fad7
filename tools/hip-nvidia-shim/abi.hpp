// The binary interface between memarea's HIP backend and a libamdhip64: the values and layouts
// that cross it, written out once. Both sides check themselves against this file at compile time:
//   - amd_abi_check.cpp, with the AMD-platform headers exactly as the backend includes them
//     (src/driver/hip/hip_api.hpp), proves these are ROCm 5.2's values;
//   - shim.cpp, with HIP's NVIDIA platform, proves each value it passes through unchanged is the
//     same there, and translates the ones that differ.
// No HIP or CUDA header here: the two platforms cannot be included in one translation unit.
#pragma once

#include <cstddef>

namespace memarea::hip_abi {

// --- the ROCm 5 runtime the shim stands in for -------------------------------------------------

/// The soname: the backend tries libamdhip64.so.6 first, then .so.5. The shim takes .so.5 because
/// it keeps ROCm 5's conventions (the 5.2 headers it is built from), which is also what the
/// backend assumes of a runtime whose version is not a ROCm 6 one.
inline constexpr const char* soname = "libamdhip64.so.5";

// --- sizes ---------------------------------------------------------------------------------------

inline constexpr std::size_t error_size = 4;        ///< hipError_t, an enum
inline constexpr std::size_t enum_size = 4;         ///< every enum argument
inline constexpr std::size_t handle_size = 8;       ///< hipStream_t, hipEvent_t, hipDeviceptr_t
inline constexpr std::size_t device_size = 4;       ///< hipDevice_t (an int on both platforms)
inline constexpr std::size_t ipc_handle_size = 64;  ///< hipIpcMemHandle_t, passed by value
inline constexpr std::size_t ipc_handle_align = 1;  ///< a char array: passed in memory alike

/// hipPointerAttribute_t (defined once for both platforms in 5.2's hip_runtime_api.h).
struct pointer_attribute_layout {
  static constexpr std::size_t size = 32;
  static constexpr std::size_t memory_type = 0;
  static constexpr std::size_t device = 4;
  static constexpr std::size_t device_pointer = 8;
  static constexpr std::size_t host_pointer = 16;
  static constexpr std::size_t is_managed = 24;
  static constexpr std::size_t allocation_flags = 28;
};

// --- values that pass through unchanged ---------------------------------------------------------

// hipMemoryType, ROCm 5 numbering (what the backend reads when the runtime is not ROCm 6).
inline constexpr int memory_type_host = 0;
inline constexpr int memory_type_device = 1;
inline constexpr int memory_type_array = 2;
inline constexpr int memory_type_unified = 3;

// hipMemcpyKind: the backend copies with hipMemcpyDefault only.
inline constexpr int memcpy_default = 4;

// Flags.
inline constexpr unsigned host_malloc_portable = 0x1;
inline constexpr unsigned host_malloc_mapped = 0x2;
inline constexpr unsigned host_register_portable = 0x1;
inline constexpr unsigned host_register_mapped = 0x2;
inline constexpr unsigned mem_attach_global = 0x1;
inline constexpr unsigned mem_attach_host = 0x2;
inline constexpr unsigned mem_attach_single = 0x4;
inline constexpr unsigned stream_non_blocking = 0x1;
inline constexpr unsigned event_default = 0x0;
inline constexpr unsigned event_disable_timing = 0x2;
inline constexpr int cpu_device_id = -1;

// hipMemRangeAttribute (the same numbers as CUDA's cudaMemRangeAttribute).
inline constexpr int range_read_mostly = 1;
inline constexpr int range_preferred_location = 2;
inline constexpr int range_accessed_by = 3;
inline constexpr int range_last_prefetch_location = 4;

// hipError_t codes the shim's NVIDIA platform returns where the backend looks for them by value.
inline constexpr int error_invalid_value = 1;
inline constexpr int error_invalid_device = 101;
inline constexpr int error_not_ready = 600;

// --- values that differ between the platforms (the shim translates these) ----------------------

/// hipDeviceP2PAttr: 0-based on AMD; HIP's NVIDIA platform passes CUDA's cudaDeviceP2PAttr
/// (1-based) through.
inline constexpr int p2p_performance_rank = 0;
inline constexpr int p2p_access_supported = 1;
inline constexpr int p2p_native_atomic_supported = 2;
inline constexpr int p2p_array_access_supported = 3;

/// hipMemoryAdvise: 1-based on AMD; the NVIDIA platform's own enum starts at 0.
inline constexpr int advise_set_read_mostly = 1;
inline constexpr int advise_unset_read_mostly = 2;
inline constexpr int advise_set_preferred_location = 3;
inline constexpr int advise_unset_preferred_location = 4;
inline constexpr int advise_set_accessed_by = 5;
inline constexpr int advise_unset_accessed_by = 6;

/// hipIpcMemLazyEnablePeerAccess: 0 in ROCm 5 (the only flag ROCm 5 accepts, and ROCm maps peers
/// lazily whatever is asked); CUDA's cudaIpcMemLazyEnablePeerAccess is 1.
inline constexpr unsigned ipc_lazy_enable_peer_access = 0x0;

}  // namespace memarea::hip_abi
