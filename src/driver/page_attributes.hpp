// Per-page managed-memory attributes (read-mostly, preferred location, last prefetch location,
// accessed-by set, HIP's coarse grain) and cuMemRangeGetAttribute's answers over a run of pages. Shared by the sim
// driver, which emulates managed memory, and the core, which keeps the attributes of memarea's
// pageable host memory that the kernel has no place for. Not thread-safe: the owner locks.
#pragma once

#include <memarea/memarea.h>

#include <cstddef>
#include <cstdint>
#include <map>

namespace memarea::detail {

/// The attributes of one page, as cuMemRangeGetAttribute reports them.
struct page_state {
  bool read_mostly = false;
  int preferred = MEMAREA_INVALID_DEVICE_ID;
  int last_prefetch = MEMAREA_INVALID_DEVICE_ID;
  std::uint64_t accessed_by = 0;  ///< bit d: device d
  bool accessed_by_cpu = false;
  bool coarse_grain = false;  ///< HIP's coarse-grain advice (fine grain otherwise)
  bool operator==(const page_state&) const = default;
};

/// The attributes of every page of one allocation, kept as runs of pages that share them: memory
/// is proportional to how differently the allocation was advised, not to its size (a 1 TiB
/// allocation advised as a whole is one run).
class page_attributes {
 public:
  /// Device ordinals an accessed-by set can hold (a 64-bit mask per page).
  static constexpr int max_devices = 64;

  page_attributes() = default;
  /// `pages` pages with no attribute set; throws std::bad_alloc.
  explicit page_attributes(std::size_t pages);

  /// Number of pages.
  std::size_t size() const noexcept { return pages_; }
  /// Number of runs of pages with equal attributes (for tests: it stays small).
  std::size_t runs() const noexcept { return runs_.size(); }

  /// Makes pages [first, last] (inclusive, inside the table) a whole number of runs, changing no
  /// answer; throws std::bad_alloc. After it, advise() and prefetched() on exactly that range
  /// allocate nothing and cannot throw: a caller that must not fail once it has acted (after a
  /// system call) isolates first.
  void isolate(std::size_t first, std::size_t last);
  /// Applies `advice` to pages [first, last]. `id` is what SET_PREFERRED_LOCATION and
  /// (UN)SET_ACCESSED_BY name: an ordinal below max_devices or MEMAREA_CPU_DEVICE_ID; the other
  /// advice ignores it. False, changing nothing, for an unknown advice or an id the advice
  /// cannot take. Throws std::bad_alloc (changing nothing) unless the range was isolated.
  bool advise(std::size_t first, std::size_t last, memarea_mem_advice advice, int id);
  /// Records `id` as the last prefetch location of pages [first, last]; throws as advise().
  void prefetched(std::size_t first, std::size_t last, int id);

  /// Whether `attribute` is known and `data_size` fits it: 4 bytes for the single-value
  /// attributes (COHERENCY_MODE included), a non-zero multiple of 4 for ACCESSED_BY.
  static bool fits(memarea_mem_range_attribute attribute, std::size_t data_size) noexcept;
  /// Writes the answer for pages [first, last] to data: read-mostly 1 only when every page is;
  /// a location when every page agrees, else MEMAREA_INVALID_DEVICE_ID; accessed-by the ids
  /// every page shares (the CPU first, then ordinals ascending), MEMAREA_INVALID_DEVICE_ID in
  /// every slot left over; coherency mode fine or coarse grain when every page is, else
  /// indeterminate. False, writing nothing, when !fits(attribute, data_size).
  bool answer(memarea_mem_range_attribute attribute, void* data, std::size_t data_size,
              std::size_t first, std::size_t last) const noexcept;

 private:
  using run_map = std::map<std::size_t, page_state>;  ///< first page of a run -> its state

  /// Starts a run at page `at` (< pages_), copying the state of the run it splits.
  void split(std::size_t at);
  /// Applies f to the state of every run of the isolated range [first, last], then merges runs
  /// that became equal to their neighbours.
  template <class F>
  void update(std::size_t first, std::size_t last, F&& f) noexcept;
  /// The run holding page p.
  run_map::const_iterator run_of(std::size_t p) const noexcept;

  std::size_t pages_ = 0;
  run_map runs_;  ///< covers [0, pages_): a run lasts until the next key
};

}  // namespace memarea::detail
