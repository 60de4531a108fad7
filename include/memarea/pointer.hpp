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

/// The allocation that contains a pointer (memarea_allocation_info).
struct allocation_info {
  void* base = nullptr;
  /// The size asked for: a pool piece's allocation size, not its rounded piece; for memory
  /// imported through IPC, the buffer the other process exported.
  std::size_t size = 0;
  memory_kind kind = memory_kind::unknown;
  /// Where the memory lives: for IPC-imported memory the exporter's device (as that process
  /// numbers it), not the device it was opened on; MEMAREA_CPU_DEVICE_ID for host memory.
  int device = MEMAREA_INVALID_DEVICE_ID;
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
/// that maps at a fixed address (MAP_FIXED) must not replace. invalid_value for size 0.
bool overlaps_allocation(const void* ptr, std::size_t size);

/// An owning, move-only handle on an allocation that memarea frees by its base pointer alone
/// (as memarea_free does): what managed::managed_buffer and host::host_buffer share.
class owned_allocation {
 public:
  owned_allocation() = default;
  ~owned_allocation() { reset(); }
  owned_allocation(owned_allocation&& o) noexcept : ptr_(o.ptr_), size_(o.size_) {
    o.ptr_ = nullptr;
  }
  owned_allocation& operator=(owned_allocation&& o) noexcept;
  owned_allocation(const owned_allocation&) = delete;
  owned_allocation& operator=(const owned_allocation&) = delete;

  /// The allocation's start (nullptr when empty).
  void* data() const noexcept { return ptr_; }
  /// The size asked for (the allocation may be larger: whole pages).
  std::size_t size() const noexcept { return size_; }
  /// True while an allocation is owned.
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  /// Frees now (no-op when empty). A failure goes to the release-failure record (error.hpp)
  /// and the handle lets go of the memory, which stays allocated.
  void reset() noexcept;
  /// Frees the memory now and becomes empty; on failure returns the status (its message in *message
  /// when given), keeps owning it and changes nothing, so that the caller may try again. Success
  /// when empty.
  errc try_reset(std::string* message = nullptr) noexcept;
  /// Gives up ownership; the caller frees (memarea_free, managed::free, host::free).
  void* release() noexcept {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 protected:
  /// Takes ownership of ptr, a live memarea allocation of `size` bytes asked for.
  owned_allocation(void* ptr, std::size_t size) noexcept : ptr_(ptr), size_(size) {}

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace memarea
