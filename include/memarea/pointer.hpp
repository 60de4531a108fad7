// memarea — what any pointer is.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <cstddef>
#include <optional>

namespace memarea {

/// What memory is (values equal memarea_memory_kind).
enum class memory_kind : int {
  unknown = MEMAREA_MEMORY_UNKNOWN,
  device = MEMAREA_MEMORY_DEVICE,
  host_pinned = MEMAREA_MEMORY_HOST_PINNED,
  managed = MEMAREA_MEMORY_MANAGED,
  mapped = MEMAREA_MEMORY_MAPPED,
  registered = MEMAREA_MEMORY_REGISTERED,
  ipc_imported = MEMAREA_MEMORY_IPC_IMPORTED,
  host = MEMAREA_MEMORY_HOST,
};

/// "device", "host_pinned", "managed", ...
const char* to_string(memory_kind k) noexcept;

/// The allocation that contains a pointer.
struct allocation_info {
  void* base = nullptr;
  std::size_t size = 0;
  memory_kind kind = memory_kind::unknown;
  int device = MEMAREA_INVALID_DEVICE_ID;  ///< MEMAREA_CPU_DEVICE_ID for host memory
};

/// Any pointer inside an allocation: memarea's own registry first (O(log n)), then the driver
/// (cuMemGetAddressRange / hipMemGetAddressRange). Throws not_found for anything else.
allocation_info lookup(const void* ptr);
/// As lookup, but empty instead of throwing not_found.
std::optional<allocation_info> find(const void* ptr);

}  // namespace memarea
