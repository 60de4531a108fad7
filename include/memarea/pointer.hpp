// memarea — what any pointer is.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/owner.hpp>

#include <cstddef>
#include <optional>

namespace memarea {

/// What memory is (values equal the C API's memarea_memory_kind).
enum class memory_kind : int {
  unknown = 0,       ///< not memarea's, and the driver does not know it
  device = 1,        ///< device memory
  host_pinned = 2,   ///< pinned host memory
  managed = 3,       ///< managed (unified) memory
  mapped = 4,        ///< pinned host memory mapped on devices
  registered = 5,    ///< an existing host range registered (and mapped)
  ipc_imported = 6,  ///< memory of another process, opened through IPC
  host = 7,          ///< pageable host memory (host::allocate)
};

/// "device", "host_pinned", "managed", ...
const char* to_string(memory_kind k) noexcept;

/// The allocation that contains a pointer (memarea_allocation_info).
struct allocation_info {
  void* base = nullptr;
  /// The size asked for: a pool piece's allocation size, not its rounded piece; for memory
  /// imported through IPC, the buffer the other process exported.
  std::size_t size = 0;
  memory_kind kind = memory_kind::unknown;
  /// Where the memory lives: for IPC-imported memory the exporter's device (as that process
  /// numbers it), not the device it was opened on; cpu_device_id for host memory.
  int device = invalid_device_id;
  /// Bytes usable from base, >= size: a pool piece's rounded size; equal to size otherwise.
  std::size_t capacity = 0;
};

/// Any pointer inside an allocation: memarea's own registry first (O(log n)), then the driver
/// (cuMemGetAddressRange / hipMemGetAddressRange). Throws not_found for anything else.
allocation_info lookup(const void* ptr);
/// As lookup, but empty instead of throwing not_found.
std::optional<allocation_info> find(const void* ptr);

// Tags: an allocation may carry a tag, an address its maker chose (mmap_options::tag,
// host::allocate_placed), by which a library on top of memarea tells its own allocations from
// everyone else's. memarea never reads through a tag.

/// The tag of the allocation that holds ptr; nullptr when it was made without one (pool pieces
/// and IPC mappings have none). Throws not_found when ptr is not inside memory memarea allocated
/// or mapped.
const void* tag_of(const void* ptr);
/// Frees the allocation that starts at ptr, as memarea_free does, only when it was made with
/// tag (not nullptr) and, for size other than 0, asked for exactly size bytes; anything else
/// throws invalid_value and frees nothing. The check and the free are one step: another
/// thread's free and a new allocation at the same address cannot come between them.
void free_tagged(void* ptr, std::size_t size, const void* tag);
/// Whether a byte of [ptr, ptr+size) lies in memory memarea allocated or mapped (an area's, a
/// pool's blocks, managed and pageable host memory, IPC and shareable mappings): what code
/// that maps at a fixed address (MAP_FIXED) must not replace. Advisory: a snapshot of memarea's
/// records, which another thread may change as soon as it returns (memory mapped but not yet
/// recorded, or freed just after, is not seen), so a check followed by MAP_FIXED is a race;
/// map with MAP_FIXED_NOREPLACE where the range may hold free pages. invalid_value for size 0.
bool overlaps_allocation(const void* ptr, std::size_t size);

/// The releaser of owned_allocation (owner.hpp), so of managed::managed_buffer and
/// host::host_buffer: memarea's free by base pointer alone, as memarea_free does.
struct allocation_release {
  /// Frees the allocation that starts at ptr (size is not needed); invalid_value, freeing
  /// nothing, when ptr is not the start of a live memarea allocation.
  void free(void* ptr, std::size_t size) const;
};

/// An owning, move-only allocation that memarea frees by its base pointer alone (owner.hpp:
/// data() its start, size() as asked for, reset(), try_reset(), release()): what
/// managed::managed_buffer and host::host_buffer build on. After release() the caller frees
/// with managed::free or host::free.
using owned_allocation = owner<allocation_release>;

}  // namespace memarea

#pragma GCC visibility pop
