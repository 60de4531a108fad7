// memarea — areas: where memory lives and who can see it (AML's area concept, seed 004).
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>
#include <memarea/owner.hpp>
#include <memarea/pointer.hpp>

#include <cstddef>

namespace memarea {

/// Area flags; the same bits as MEMAREA_AREA_* and AML_AREA_{HIP,CUDA}_FLAG_*.
namespace area_flags {
inline constexpr unsigned device_only = 0;     ///< device memory
inline constexpr unsigned host = 1u << 0;      ///< pinned host memory
inline constexpr unsigned unified = 1u << 1;   ///< managed memory
inline constexpr unsigned mapped = 1u << 2;    ///< host memory mapped on devices
inline constexpr unsigned global = 1u << 3;    ///< visible to every device
inline constexpr unsigned all = host | unified | mapped | global;
}  // namespace area_flags

namespace detail {
/// What a pool is inside memarea (opaque here).
struct pool_object;
}  // namespace detail

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
  area(int device, unsigned flags, detail::pool_object* pool) noexcept
      : device_(device), flags_(flags), pool_(pool) {}
  int device_;
  unsigned flags_;
  detail::pool_object* pool_ = nullptr;  ///< mmap and munmap go to this pool when set
};

/// The releaser of buffer (owner.hpp): its area's munmap.
struct area_release {
  area source{};  ///< the area the memory came from
  /// source.munmap(ptr, size).
  void free(void* ptr, std::size_t size) const { source.munmap(ptr, size); }
};

/// An owning, move-only allocation from an area (owner.hpp: data(), size() as asked for,
/// reset(), try_reset(), release()). After release() the caller frees with source().munmap.
class buffer : public owner<area_release> {
 public:
  /// Empty: holds nothing.
  buffer() = default;
  /// Takes ownership of ptr, `size` bytes that a.mmap returned.
  buffer(area a, void* ptr, std::size_t size) noexcept
      : owner(ptr, size, area_release{a}) {}

  /// The area the memory came from.
  const memarea::area& source() const noexcept { return releaser().source; }
  /// The device the memory was allocated on (lookup's device).
  int device() const;
  /// The kind of memory (the area's).
  memory_kind kind() const noexcept { return source().kind(); }
};

/// The device pointer of mapped or registered-mapped host memory.
void* host_get_device_pointer(void* host_ptr);

}  // namespace memarea

#pragma GCC visibility pop
