// memarea — areas: where memory lives and who can see it (AML's area concept, seed 004).
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>

#include <cstddef>

namespace memarea {

/// Area flags; the same bits as MEMAREA_AREA_* and AML_AREA_{HIP,CUDA}_FLAG_*.
namespace area_flags {
inline constexpr unsigned device_only = MEMAREA_AREA_DEFAULT;  ///< device memory
inline constexpr unsigned host = MEMAREA_AREA_HOST;            ///< pinned host memory
inline constexpr unsigned unified = MEMAREA_AREA_UNIFIED;      ///< managed memory
inline constexpr unsigned mapped = MEMAREA_AREA_MAPPED;        ///< host memory mapped on devices
inline constexpr unsigned global = MEMAREA_AREA_GLOBAL;        ///< visible to every device
inline constexpr unsigned all = host | unified | mapped | global;
}  // namespace area_flags

/// Per-call options of area::mmap.
struct mmap_options {
  int device = -1;      ///< >= 0 (0 included): allocate on this device instead of the area's
  void* ptr = nullptr;  ///< MAPPED without HOST: the existing host range to register
  const void* tag = nullptr;  ///< the allocation's tag (nullptr: none): see tag_of (pointer.hpp)
};

class buffer;

/// Where memory lives and who sees it: a value type (copies are equal and interchangeable).
///
/// | flags              | allocation                                                    |
/// |--------------------|---------------------------------------------------------------|
/// | 0                  | device memory (cuMemAlloc / hipMalloc)                        |
/// | HOST               | pinned host memory; portable with GLOBAL                      |
/// | UNIFIED (+any)     | managed memory; attach global with GLOBAL, else attach host   |
/// | MAPPED+HOST        | mapped pinned host memory; portable with GLOBAL               |
/// | MAPPED             | registers (pins and maps) options.ptr; portable with GLOBAL   |
class area {
 public:
  /// The calling thread's current device at each mmap.
  static constexpr int current_device = -1;

  /// Throws invalid_value for unknown flag bits and invalid_device for device >= count.
  explicit area(int device = current_device, unsigned flags = area_flags::device_only);

  /// Allocates size bytes; the calling thread's current device is unchanged on every path.
  [[nodiscard]] void* mmap(std::size_t size, const mmap_options& options = {}) const;
  /// Frees what mmap returned; throws invalid_value (changing nothing) unless ptr is a live
  /// allocation of an equal area with exactly this size.
  void munmap(void* ptr, std::size_t size) const;
  /// mmap into an owning buffer.
  [[nodiscard]] buffer allocate(std::size_t size, const mmap_options& options = {}) const;

  int device() const noexcept { return device_; }
  unsigned flags() const noexcept { return flags_; }
  /// The kind of memory this area hands out.
  memory_kind kind() const noexcept;
  /// Whether mmap draws from a pool (pool::as_area) instead of the driver.
  bool pooled() const noexcept { return pool_ != nullptr; }
  bool operator==(const area&) const = default;

 private:
  friend class pool;
  area(int device, unsigned flags, memarea_pool_t pool) noexcept
      : device_(device), flags_(flags), pool_(pool) {}
  int device_;
  unsigned flags_;
  memarea_pool_t pool_ = nullptr;  ///< mmap and munmap go to this pool when set
};

/// An owning, move-only allocation from an area.
class buffer {
 public:
  buffer() = default;
  buffer(area a, void* ptr, std::size_t size) noexcept : area_(a), ptr_(ptr), size_(size) {}
  ~buffer() { reset(); }
  buffer(buffer&& o) noexcept : area_(o.area_), ptr_(o.ptr_), size_(o.size_) { o.ptr_ = nullptr; }
  buffer& operator=(buffer&& o) noexcept;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;

  void* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  const memarea::area& source() const noexcept { return area_; }
  /// The device the memory was allocated on (lookup's device).
  int device() const;
  memory_kind kind() const noexcept { return area_.kind(); }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  /// Frees the memory now (no-op when empty). It cannot throw: a failure (busy under
  /// free_policy::refuse, say) goes to the release-failure record (error.hpp) and the buffer
  /// lets go of the memory, which stays allocated.
  void reset() noexcept;
  /// Frees the memory now and becomes empty; on failure returns the status (its message in *message
  /// when given), keeps owning it and changes nothing, so that the caller may try again. Success
  /// when empty.
  errc try_reset(std::string* message = nullptr) noexcept;
  /// Gives up ownership; the caller must munmap through source().
  void* release() noexcept {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 private:
  memarea::area area_;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

/// The device pointer of mapped or registered-mapped host memory.
void* host_get_device_pointer(void* host_ptr);

}  // namespace memarea
