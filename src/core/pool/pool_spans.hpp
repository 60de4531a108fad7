// The arena's building blocks (pool_state.hpp says how a pool is made of them): spans and
// their state words, the table that holds them, the two-level size classes, the index of
// handed-out spans by start, and one stream tag's free lists. Included by the pool's files
// only, through pool_state.hpp.
#pragma once

#include "driver/driver.hpp"

#include <memarea/error.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

namespace memarea::detail {

/// The pool's building blocks. They were one file's private types; a namespace of their own
/// keeps their plain names (span, word, live) apart from the rest of detail at link time, and
/// the using-directive below lets the pool's files name them as before (this header is
/// included by those files only).
namespace pool_internal {

inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
inline constexpr int kSub = 3;  // 8 second-level classes per power of two
inline constexpr int kLists = 64 << kSub;
inline constexpr std::size_t kMinBlock = std::size_t{2} << 20;
inline constexpr std::size_t kMaxGrowth = std::size_t{1} << 30;

/// Shelves: which blocks a piece comes from. Pieces under kSmallPiece come from blocks of their
/// own, larger ones from theirs, so that small pieces never cut up the room large ones need:
/// on REFERENCE.md's mixed trace and five more of its kind (other seeds) that held the peak
/// reserved at 1.106-1.149x the peak live, against 1.113-1.229x with one shelf
/// (bench/experiments/pool_fit_model.py). The initial block (pool_options::initial_size)
/// serves every size: it is the shared shelf, searched first. A shelf grows by its own
/// blocks; a piece comes from the other shelf only when the pool may not grow (past its
/// maximum, or the driver out of memory) or its own shelf is cut up (pool_state::cut_up_locked).
enum shelf : std::uint8_t { shared_shelf = 0, small_shelf = 1, large_shelf = 2 };
inline constexpr int kShelves = 3;
inline constexpr std::size_t kSmallPiece = std::size_t{256} << 10;
inline shelf shelf_for(std::size_t n) { return n < kSmallPiece ? small_shelf : large_shelf; }

/// exported: live, and shared through IPC; held: freed while another process has it open;
/// pending: freed while other streams may still use it, waiting for events recorded at its free
/// (pool_streams.cpp).
enum span_state : std::uint8_t { unused = 0, free_span, live, cached, exported, held, pending };

/// A span's state word: its span_state in the low byte, above it the incarnation, which grows
/// each time the span is handed out. A thread's cache frees by compare-and-swap on the word it
/// saw at allocation, so a stale entry of an earlier incarnation never takes a later one.
constexpr std::uint64_t word(std::uint64_t incarnation, span_state st) {
  return incarnation << 8 | st;
}

/// One piece of a block. A cache line each: two threads' cached pieces never share one.
struct alignas(64) span {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::uint32_t phys_prev = kNone, phys_next = kNone;
  std::uint32_t free_prev = kNone, free_next = kNone;
  std::uint64_t freed_seq = 0;  // the arena's free counter when it was freed (stream order)
  std::uint16_t tag = 0;        // while free: the stream tag whose lists hold it
  shelf on = shared_shelf;      // its block's shelf
  std::uint16_t list_class = 0;  // while free: the class of the list that holds it
  std::atomic<std::uint64_t> state{unused};
  /// While live: the bytes its allocation asked for (size is that rounded up, or more when a
  /// larger span was reused), which lookup reports. Atomic: the allocating thread sets it
  /// after the arena's lock is dropped, and a lookup may read it under that lock.
  std::atomic<std::size_t> requested{0};

  span_state st() const { return static_cast<span_state>(state.load(std::memory_order_relaxed) & 0xff); }
  std::uint64_t incarnation() const { return state.load(std::memory_order_relaxed) >> 8; }
  /// Under the arena's lock, or by the cache that holds the span: a new state, same incarnation.
  void set(span_state v) { state.store(word(incarnation(), v), std::memory_order_relaxed); }
};

static_assert(sizeof(span) == 64, "a span is one cache line");

/// Spans by index, in chunks that never move: a thread's cache reads a span it holds without
/// the arena's lock while the arena adds spans (a std::deque's index would move under it).
class span_table {
 public:
  static constexpr std::uint32_t kChunk = 1024, kChunks = 4096;  // 4 Mi spans a pool
  span_table() = default;
  span_table(const span_table&) = delete;
  span_table& operator=(const span_table&) = delete;
  ~span_table() {
    for (std::uint32_t k = 0; k < kChunks; ++k) delete[] chunks_[k].load(std::memory_order_relaxed);
  }
  /// On every path of alloc and free, several times each: always inline, one load of the
  /// chunk's address (the table is in the object, not behind a pointer).
  [[gnu::always_inline]] span& operator[](std::uint32_t i) const {
    return chunks_[i / kChunk].load(std::memory_order_acquire)[i % kChunk];
  }
  std::uint32_t size() const { return size_; }
  /// Adds a span (under the arena's lock); out_of_memory past 4 Mi spans.
  std::uint32_t push() {
    if (size_ == kChunk * kChunks)
      throw error(errc::out_of_memory, "pool: more than 4 Mi pieces in one pool");
    if (size_ % kChunk == 0 && !chunks_[size_ / kChunk].load(std::memory_order_relaxed))
      chunks_[size_ / kChunk].store(new span[kChunk], std::memory_order_release);
    return size_++;
  }
  void pop() { --size_; }

 private:
  std::atomic<span*> chunks_[kChunks] = {};  // 32 KiB in the pool's state
  std::uint32_t size_ = 0;
};

inline int floor_log2(std::size_t x) {
  return 63 - std::countl_zero(static_cast<std::uint64_t>(x));
}

/// The class whose every span is >= s (search) or that holds a span of size s (insert).
inline int insert_class(std::size_t s) {
  const int fl = floor_log2(s);
  const int sl = static_cast<int>((s >> (fl - kSub)) & ((1 << kSub) - 1));
  return (fl << kSub) | sl;
}
inline int search_class(std::size_t s) {
  const int fl = floor_log2(s);
  const std::size_t up = s + ((std::size_t{1} << (fl - kSub)) - 1);
  return up < s ? kLists - 1 : insert_class(up);
}

/// start -> span index; open addressing, linear probing, backward-shift deletion.
class start_index {
 public:
  start_index() : slots_(64) {}
  std::uint32_t find(std::uintptr_t k) const {
    for (std::size_t i = home(k);; i = (i + 1) & mask()) {
      if (slots_[i].key == k) return slots_[i].value;
      if (slots_[i].key == 0) return kNone;
    }
  }
  /// Makes room for one insert (the only step of insert that may throw).
  void prepare_insert() {
    if ((count_ + 1) * 2 > slots_.size()) grow();
  }
  void insert(std::uintptr_t k, std::uint32_t v) {
    prepare_insert();
    place(k, v);
    ++count_;
  }
  void erase(std::uintptr_t k) {
    std::size_t i = home(k);
    while (slots_[i].key != k) {
      if (slots_[i].key == 0) return;
      i = (i + 1) & mask();
    }
    for (std::size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
      if (slots_[j].key == 0) break;
      const std::size_t h = home(slots_[j].key);
      // Move j back into the hole at i unless its home lies cyclically in (i, j].
      if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = {};
    --count_;
  }
  std::size_t size() const { return count_; }

 private:
  struct slot {
    std::uintptr_t key = 0;
    std::uint32_t value = kNone;
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t home(std::uintptr_t k) const {
    return static_cast<std::size_t>((k >> 4) * 0x9e3779b97f4a7c15ull >> 17) & mask();
  }
  void place(std::uintptr_t k, std::uint32_t v) {
    std::size_t i = home(k);
    while (slots_[i].key != 0) i = (i + 1) & mask();
    slots_[i] = {k, v};
  }
  void grow() {
    std::vector<slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const slot& s : old)
      if (s.key) place(s.key, s.value);
  }
  std::vector<slot> slots_;
  std::size_t count_ = 0;
};

/// One stream tag's free lists: kLists classes on each shelf (head[shelf * kLists + class]).
struct free_lists {
  std::uint64_t fl_map[kShelves] = {};
  std::uint8_t sl_map[kShelves][64] = {};
  std::uint32_t head[kShelves * kLists];
  std::size_t bytes[kShelves] = {};  // free bytes on each shelf
  std::size_t spans = 0;
  native_stream stream = nullptr;
  native_event event = nullptr;    // recorded on stream to learn when its frees are safe
  std::uint64_t event_seq = 0;     // frees up to this sequence number are covered by event
  bool event_pending = false;
  free_lists() { std::fill(std::begin(head), std::end(head), kNone); }
};

struct thread_cache;
}  // namespace pool_internal

}  // namespace memarea::detail
