// Internals shared by the AML allocators (src/aml/*allocator*.cpp, buddy.cpp, sized.cpp): the
// memarea pool behind an allocator over memarea's CUDA or HIP area, a flat pointer map for the
// bookkeeping of the other path, and the table of chunks handed out by alloc_chunk.
#pragma once

#include "aml_impl.hpp"

#include <memarea/pool.hpp>

#include <aml.h>
#include <aml/higher/allocator.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace memarea::aml {

/// The memarea pool an allocator over area with opts draws from: one over the same memory as
/// the area's mmap would give (the options' device when >= 0, else the area's; an area of "the
/// current device" takes the calling thread's current device now), keeping every freed byte
/// (release threshold at the maximum), each piece aligned on alignment. Empty when area is not
/// memarea's CUDA or HIP area, when the options ask for what a pool cannot give (MAPPED without
/// HOST registers the caller's memory), or when the pool cannot be made (no device, a bad
/// device or flags): the allocator then works through the area's own calls, which report the
/// area's error. Over AML's linux area without options: a pool of pageable host memory when
/// the area's policy is DEFAULT or BIND to one node (others: empty).
std::optional<memarea::pool> pool_for_area(const aml_area* area, const aml_area_mmap_options* opts,
                                           std::size_t alignment) noexcept;

/// pool.allocate without exceptions: the pointer, or NULL with aml_errno set to the AML code of
/// the failure (and memarea's last error message set).
void* pooled_alloc(memarea::pool& pool, std::size_t size) noexcept;

/// pool.deallocate without exceptions: AML_SUCCESS or the negative AML code (-AML_EINVAL for a
/// pointer the pool did not hand out or that was freed already; nothing changes then).
int pooled_free(memarea::pool& pool, void* ptr) noexcept;

/// Whether pool has live pieces (or pieces held for IPC): what makes a destroy refuse.
bool pooled_live(const memarea::pool& pool) noexcept;

/// Destroys pool (pool.destroy(): -AML_EBUSY while pieces are live, the pool unchanged then)
/// and empties it: AML_SUCCESS or the negative AML code. A forced destroy, which gives back live
/// pieces too, is pool.reset().
int pooled_destroy(std::optional<memarea::pool>& pool) noexcept;

/// Sets aml_errno to code (positive) and returns NULL: the failure of a chunk call.
inline aml_allocator_chunk* fail_chunk(int code) noexcept {
  (void)fail_null_code(code);
  return nullptr;
}

/// -code: the int an AML function returns for a failure whose positive code is code.
inline int negative(int code) noexcept { return code > 0 ? -code : code; }

/// An open-addressing map from non-null pointers to small values (linear probing, at most
/// half full, deletion by backward shift). Lookups and updates never allocate; only
/// reserve_more does, so a caller reserves first and then changes state that cannot fail.
template <class V>
class ptr_map {
 public:
  /// The value stored for key, or nullptr when key is absent.
  V* find(const void* key) noexcept {
    if (slots_.empty()) return nullptr;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    for (std::size_t i = home(k);; i = (i + 1) & mask()) {
      if (slots_[i].key == k) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  /// Makes room for n more entries, so that that many inserts cannot allocate. Throws
  /// std::bad_alloc (the map unchanged) when host memory runs out.
  void reserve_more(std::size_t n) {
    const std::size_t want = count_ + n;
    if (want * 2 <= slots_.size()) return;
    std::vector<slot> old(std::bit_ceil(std::max<std::size_t>(16, want * 2)));
    old.swap(slots_);
    for (const slot& s : old)
      if (s.key) place(s.key, s.value);
  }

  /// Adds key (not null, absent) with value; reserve_more must have made room.
  void insert(const void* key, V value) noexcept {
    place(reinterpret_cast<std::uintptr_t>(key), value);
    ++count_;
  }

  /// Removes key; false when it was absent.
  bool erase(const void* key) noexcept {
    if (slots_.empty()) return false;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    std::size_t hole = home(k);
    while (slots_[hole].key != k) {
      if (slots_[hole].key == 0) return false;
      hole = (hole + 1) & mask();
    }
    // Backward shift: each later entry of the run that may move into the hole (its home is
    // not cyclically within (hole, j]) does, so no lookup ever meets an early empty slot.
    for (std::size_t j = (hole + 1) & mask(); slots_[j].key != 0; j = (j + 1) & mask()) {
      const std::size_t h = home(slots_[j].key);
      const bool stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = slot{};
    --count_;
    return true;
  }

  std::size_t size() const noexcept { return count_; }

  /// Calls f(key, value) for every entry (f must not change the map).
  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : slots_)
      if (s.key) f(reinterpret_cast<void*>(s.key), s.value);
  }

 private:
  struct slot {
    std::uintptr_t key = 0;  // 0: empty (null pointers are never stored)
    V value{};
  };
  std::size_t mask() const noexcept { return slots_.size() - 1; }
  std::size_t home(std::uintptr_t k) const noexcept {
    // Fibonacci hashing: the high bits of the product mix every bit of the address, whose
    // low bits are mostly zero (aligned pieces).
    const int bits = std::countr_zero(slots_.size());
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> (64 - bits));
  }
  void place(std::uintptr_t k, V value) noexcept {
    std::size_t i = home(k);
    while (slots_[i].key != 0) i = (i + 1) & mask();
    slots_[i] = slot{k, value};
  }

  std::vector<slot> slots_;
  std::size_t count_ = 0;
};

/// The chunks an allocator handed out through alloc_chunk: each is a struct
/// aml_allocator_chunk the caller sees (and may write user_data of) plus the pointer and size
/// the allocator trusts. Records live in slabs that grow geometrically and are recycled, so a
/// chunk call allocates host memory only while the number of live chunks reaches a new high.
/// Not locked: its owner serialises calls.
class chunk_table {
 public:
  /// A record of (ptr, size) with user_data NULL; nullptr when host memory runs out.
  aml_allocator_chunk* take(void* ptr, std::size_t size) noexcept;

  /// The trusted pointer of c when c is a live record of this table, else nullptr. Never
  /// reads through c unless it lies inside one of this table's slabs at a record's start.
  void* live_ptr(const aml_allocator_chunk* c) const noexcept;

  /// Gives back c, a live record (live_ptr(c) not null).
  void give_back(aml_allocator_chunk* c) noexcept;

  /// How many records are live.
  std::size_t live_count() const noexcept { return live_; }

 private:
  struct record {
    aml_allocator_chunk chunk;  // first: the caller's pointer is the record's
    void* ptr;                  // what the allocator handed out (chunk.ptr is the caller's)
    record* next_free;          // nullptr while live (and at the end of the free list)
    bool live;
  };
  record* find(const aml_allocator_chunk* c) const noexcept;

  std::vector<std::unique_ptr<record[]>> slabs_;
  std::vector<std::size_t> slab_sizes_;
  record* free_ = nullptr;
  std::size_t live_ = 0;
};

}  // namespace memarea::aml
