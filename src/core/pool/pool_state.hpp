// The pool's private state, shared by the files of pools (src/core/pool_*.cpp and pool.cpp):
// what the rest of core asks of pools is in pool_impl.hpp.
//
// A pool is one pool_state; its parts are defined in one file per concern:
//   pool_alloc.cpp  alloc and free: the per-thread caches (the fast path) and the arena's
//                   free lists (the slow path), flushing the caches, fork()'s hold on them,
//                   giving empty blocks back to the driver
//   pool_arena.cpp  new blocks from the driver, stream-ordered reclaim of freed spans, trim,
//                   statistics, retiring a stream
//   pool_ipc.cpp    lookup of a block's live piece, and pieces shared through IPC
//   pool.cpp        making and destroying pools, the list of live pools, the C API's calls
//                   and the C++ classes
// The hot paths (alloc, free, the thread cache) stay in one translation unit; what they call
// in other files is inline here (the span lists, take_locked, give_back_locked).
//
// Layout of the work:
// - The arena (one per pool, one lock) keeps the blocks and their spans. Free spans sit in
//   two-level segregated-fit lists (TLSF: a power-of-two class split in 8), one set of lists per
//   stream tag and shelf (small pieces, large pieces, the initial block: see shelf). A span
//   freed on stream A goes to A's lists and is reused by allocations on A at once; tag 0 holds
//   memory any stream may take. Spans of A move to tag 0 once an event recorded on A after
//   their free has completed (queried when another stream is short of memory; never waited
//   for). Neighbours of one tag coalesce on free.
// - Per-thread caches (one per thread and pool) keep a few freed spans per size class and
//   stream, and the thread's recent allocations: a free and re-allocation of a like size on
//   one thread touch no shared line. A span in a cache stays known to the arena (its state
//   says cached), so a free from another thread, or a double free, is refused exactly.
// - Every block is one registry record (origin::pool, owner = the pool): copies and managed
//   calls see the block; lookup() asks the pool for the live piece that holds a pointer.
// - A piece shared through IPC is marked (state exported, an entry in ipc_marks): its free
//   bypasses the threads' caches and asks IPC, which may hold it back (state held) until
//   every importer closed it; then IPC gives it back (pool_release_held).
#pragma once

#include "base/fork_safety.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/memory/registry.hpp"

#include <memarea/pool.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <thread>
#include <string>
#include <unordered_map>
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
/// blocks; only a pool that may not grow (past its maximum, or the driver out of memory) takes
/// a piece from the other shelf.
enum shelf : std::uint8_t { shared_shelf = 0, small_shelf = 1, large_shelf = 2 };
inline constexpr int kShelves = 3;
inline constexpr std::size_t kSmallPiece = std::size_t{256} << 10;
inline shelf shelf_for(std::size_t n) { return n < kSmallPiece ? small_shelf : large_shelf; }

/// exported: live, and shared through IPC; held: freed while another process has it open.
enum span_state : std::uint8_t { unused = 0, free_span, live, cached, exported, held };

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
  std::size_t bytes = 0;
  std::size_t spans = 0;
  native_stream stream = nullptr;
  native_event event = nullptr;    // recorded on stream to learn when its frees are safe
  std::uint64_t event_seq = 0;     // frees up to this sequence number are covered by event
  bool event_pending = false;
  free_lists() { std::fill(std::begin(head), std::end(head), kNone); }
};

struct thread_cache;
}  // namespace pool_internal

using namespace pool_internal;  // the pool's files only: see above

/// A pool's state (memarea_pool_t points at it).
struct pool_state {
  // What it draws from.
  int device = 0;
  unsigned area_flags = 0;
  bool host_pool = false;  // pageable host memory (host_malloc)
  int host_node = -1;
  memarea_memory_kind kind = MEMAREA_MEMORY_DEVICE;
  std::size_t alignment = 256;
  std::size_t maximum = 0;
  std::size_t release_threshold = SIZE_MAX;
  std::uint64_t serial = 0;
  std::uint64_t fork_generation = 0;  // g_fork_generation when made

  ranked_mutex caches_m{lock_rank::pool_caches};
  std::vector<thread_cache*> caches;

  ranked_mutex m{lock_rank::pool_arena};
  span_table spans;
  std::vector<std::uint32_t> unused_spans;
  std::vector<free_lists> tags;  // [0]: any stream
  std::unordered_map<native_stream, std::uint16_t> tag_of_stream;
  std::vector<std::uint16_t> retired_tags;  // of destroyed streams, empty, to reuse
  /// Most tags (tag 0 included): a tag is 16 bits. Tests lower it to reach "too many streams".
  std::size_t tag_limit = std::numeric_limits<std::uint16_t>::max();
  /// The stream tag_for answered last (under the arena's lock; forgotten when a tag retires).
  struct {
    native_stream stream = nullptr;
    std::uint16_t tag = 0;
    bool valid = false;
  } tag_memo;
  start_index handed_out;        // handed-out spans (live, cached, exported, held) by start
  struct block {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    std::uint32_t first = kNone;
    shelf on = shared_shelf;
    record rec;
    /// Where a lookup of a pointer inside a piece starts its walk: per region of the block
    /// (up to 1,024, each at least 4 KiB), a span that started there when a walk last passed
    /// (piece_at_locked). Made by the first such lookup; only hints, checked before each use.
    mutable std::vector<std::uint32_t> anchors;
  };
  std::vector<block> blocks;
  std::uint64_t free_seq = 0;
  std::size_t reserved = 0, peak_reserved = 0;
  std::size_t shelf_reserved[kShelves] = {};  // of reserved, each shelf's blocks
  std::size_t handed_bytes = 0, peak_handed = 0;  // live + cached in threads
  std::size_t driver_allocations = 0;
  std::size_t growing = 0;  // bytes being allocated from the driver now (count to the maximum)
  /// Pieces marked for IPC (exported or held), by span.
  struct ipc_mark {
    std::uint64_t export_id = 0;
    std::uint16_t tag = 0;  // while held: the tag of the stream it was freed on
  };
  std::unordered_map<std::uint32_t, ipc_mark> ipc_marks;
  std::size_t held_count = 0;

  // --- spans ---
  std::uint32_t new_span() {
    if (!unused_spans.empty()) {
      const std::uint32_t i = unused_spans.back();
      unused_spans.pop_back();
      return i;
    }
    const std::uint32_t i = spans.push();
    // drop_span never allocates: room for every span is kept in unused_spans.
    try {
      unused_spans.reserve(spans.size());
    } catch (...) {
      spans.pop();
      throw;
    }
    return i;
  }
  void drop_span(std::uint32_t i) {
    span& s = spans[i];
    s.set(unused);
    s.start = 0;
    s.size = 0;
    unused_spans.push_back(i);  // capacity reserved by new_span: never reallocates
  }

  std::uint16_t tag_for(native_stream st) {
    if (host_pool) return 0;  // pageable memory: no stream uses it, the CPU does
    // Most calls name the stream of the call before: one compare, not a hash lookup.
    if (tag_memo.valid && tag_memo.stream == st) return tag_memo.tag;
    auto it = tag_of_stream.find(st);
    if (it != tag_of_stream.end()) {
      tag_memo = {st, it->second, true};
      return it->second;
    }
    tag_of_stream.reserve(tag_of_stream.size() + 1);  // what may throw, first
    std::uint16_t t;
    if (!retired_tags.empty()) {
      t = retired_tags.back();
      retired_tags.pop_back();
    } else {
      if (tags.size() >= tag_limit)
        throw error(errc::out_of_memory,
                    fmt::format("pool: too many streams ({} at once in one pool)", tag_limit - 1));
      tags.emplace_back();
      t = static_cast<std::uint16_t>(tags.size() - 1);
    }
    tags[t].stream = st;
    tag_of_stream.emplace(st, t);
    tag_memo = {st, t, true};
    return t;
  }

  void list_insert(std::uint32_t i, std::uint16_t tag) {
    span& s = spans[i];
    free_lists& f = tags[tag];
    const int c = insert_class(s.size);
    std::uint32_t& head = f.head[s.on * kLists + c];
    s.tag = tag;
    s.list_class = static_cast<std::uint16_t>(c);
    s.free_prev = kNone;
    s.free_next = head;
    if (head != kNone) spans[head].free_prev = i;
    head = i;
    f.fl_map[s.on] |= std::uint64_t{1} << (c >> kSub);
    f.sl_map[s.on][c >> kSub] |= static_cast<std::uint8_t>(1u << (c & ((1 << kSub) - 1)));
    f.bytes += s.size;
    ++f.spans;
    s.set(free_span);
  }
  void list_remove(std::uint32_t i) {
    span& s = spans[i];
    free_lists& f = tags[s.tag];
    const int c = s.list_class;  // as list_insert found it: not computed again
    std::uint32_t& head = f.head[s.on * kLists + c];
    if (s.free_prev != kNone) spans[s.free_prev].free_next = s.free_next;
    else head = s.free_next;
    if (s.free_next != kNone) spans[s.free_next].free_prev = s.free_prev;
    if (head == kNone) {
      std::uint8_t& sl = f.sl_map[s.on][c >> kSub];
      sl &= static_cast<std::uint8_t>(~(1u << (c & ((1 << kSub) - 1))));
      if (sl == 0) f.fl_map[s.on] &= ~(std::uint64_t{1} << (c >> kSub));
    }
    f.bytes -= s.size;
    --f.spans;
    s.free_prev = s.free_next = kNone;
  }
  /// Calls f(i) for every span on tag's lists, walking only the classes whose bits are set.
  template <class F>
  void for_each_free(const free_lists& f, F&& fn) const {
    for (int on = 0; on < kShelves; ++on)
      for (std::uint64_t fls = f.fl_map[on]; fls; fls &= fls - 1) {
        const int fl = std::countr_zero(fls);
        for (unsigned sls = f.sl_map[on][fl]; sls; sls &= sls - 1)
          for (std::uint32_t i = f.head[on * kLists + (fl << kSub) + std::countr_zero(sls)];
               i != kNone; i = spans[i].free_next)
            fn(i);
      }
  }

  /// A free span of tag on shelf `on` with size >= n, or kNone. First a few spans of n's own
  /// class ic (those fit more tightly: less of the larger spans is cut away), then the first
  /// class from sc, the class whose every span holds n (both computed once by the caller).
  std::uint32_t find_fit(std::uint16_t tag, shelf on, std::size_t n, int ic, int sc) const {
    const free_lists& f = tags[tag];
    // Most (tag, shelf) pairs hold nothing (one stream: tag 0 is empty; no initial block: the
    // shared shelf is): one word answers them.
    if (!f.fl_map[on]) return kNone;
    const std::uint32_t* head = f.head + on * kLists;
    int steps = 0;
    for (std::uint32_t i = head[ic]; i != kNone && steps < 8; ++steps) {
      const span& s = spans[i];
      if (s.size >= n) return i;
      i = s.free_next;
    }
    int fl = sc >> kSub;
    unsigned sl_map = f.sl_map[on][fl] & (~0u << (sc & ((1 << kSub) - 1)));
    if (!sl_map) {
      if (fl >= 63) return kNone;
      const std::uint64_t fl_map = f.fl_map[on] & (~std::uint64_t{0} << (fl + 1));
      if (!fl_map) return kNone;
      fl = std::countr_zero(fl_map);
      sl_map = f.sl_map[on][fl];
    }
    return head[(fl << kSub) | std::countr_zero(sl_map)];
  }

  /// Takes n bytes from a free span of tag (or tag 0): on the shared shelf, then on n's own;
  /// with any_shelf (a pool that may not grow), then on the other one too. kNone when none
  /// fits.
  std::uint32_t take_locked(std::size_t n, std::uint16_t tag, bool any_shelf = false) {
    const shelf own = shelf_for(n);
    const shelf order[3] = {shared_shelf, own, own == small_shelf ? large_shelf : small_shelf};
    const int ic = insert_class(n), sc = search_class(n);
    std::uint32_t i = kNone;
    for (int k = 0; k < (any_shelf ? 3 : 2) && i == kNone; ++k) {
      i = find_fit(tag, order[k], n, ic, sc);
      if (i == kNone && tag != 0) i = find_fit(0, order[k], n, ic, sc);
    }
    if (i == kNone) return kNone;
    // What may throw comes first, while nothing has changed.
    handed_out.prepare_insert();
    const bool split = spans[i].size - n >= alignment;
    const std::uint32_t r = split ? new_span() : kNone;
    list_remove(i);
    if (split) {
      span& rest = spans[r];
      span& s2 = spans[i];
      rest.start = s2.start + n;
      rest.size = s2.size - n;
      rest.phys_prev = i;
      rest.phys_next = s2.phys_next;
      if (s2.phys_next != kNone) spans[s2.phys_next].phys_prev = r;
      s2.phys_next = r;
      s2.size = n;
      rest.freed_seq = s2.freed_seq;
      rest.on = s2.on;
      list_insert(r, s2.tag);
    }
    spans[i].state.store(word(spans[i].incarnation() + 1, live), std::memory_order_relaxed);
    handed_out.insert(spans[i].start, i);
    handed_bytes += spans[i].size;
    peak_handed = std::max(peak_handed, handed_bytes);
    return i;
  }

  /// Gives span i (live or cached, already out of handed_out's count) back to tag's lists.
  void give_back_locked(std::uint32_t i, std::uint16_t tag) {
    span& s = spans[i];
    s.freed_seq = ++free_seq;
    auto mergeable = [&](std::uint32_t j) {
      return j != kNone && spans[j].st() == free_span && spans[j].tag == tag;
    };
    if (mergeable(s.phys_next)) {
      const std::uint32_t n = s.phys_next;
      list_remove(n);
      s.size += spans[n].size;
      s.phys_next = spans[n].phys_next;
      if (s.phys_next != kNone) spans[s.phys_next].phys_prev = i;
      drop_span(n);
    }
    if (mergeable(s.phys_prev)) {
      const std::uint32_t p = s.phys_prev;
      list_remove(p);
      span& ps = spans[p];
      ps.size += s.size;
      ps.phys_next = s.phys_next;
      if (ps.phys_next != kNone) spans[ps.phys_next].phys_prev = p;
      ps.freed_seq = s.freed_seq;
      drop_span(i);
      i = p;
    }
    list_insert(i, tag);
  }

  /// Frees span i, handed out: the caller checked and set its state.
  void release_handed_locked(std::uint32_t i, std::uint16_t tag) {
    handed_out.erase(spans[i].start);
    handed_bytes -= spans[i].size;
    give_back_locked(i, tag);
  }

  /// Frees live span i under tag (its stream's); returns the empty blocks to give back past
  /// the release threshold (release_blocks, once the lock is dropped).
  std::vector<record> release_locked(std::uint32_t i, std::uint16_t tag) {
    release_handed_locked(i, tag);
    return past_threshold_locked();
  }
  /// The empty blocks to give back after a free, past the release threshold.
  std::vector<record> past_threshold_locked();
  /// The piece of this pool's live or exported span that holds a, or kNone.
  std::uint32_t piece_at_locked(std::uintptr_t a) const;
  /// piece_at_locked's walk inside block b, which holds a.
  std::uint32_t walk_to_locked(const block& b, std::uintptr_t a) const;
  pool_piece piece_locked(std::uint32_t i) const {
    pool_piece piece;
    piece.pool = this;
    piece.serial = serial;
    piece.span = i;
    piece.incarnation = spans[i].incarnation();
    piece.export_id = ipc_marks.at(i).export_id;
    piece.base = reinterpret_cast<void*>(spans[i].start);
    piece.size = spans[i].size;
    return piece;
  }
  /// Moves spans of other tags whose stream has passed their free to tag 0. Records an event
  /// on a stream whose frees no event covers yet. Returns whether anything moved.
  bool reclaim_locked(std::uint16_t except, bool wait = false);
  /// Bytes of a new block that fits n, or 0 when the maximum forbids one.
  std::size_t plan_block_locked(std::size_t n, shelf on) const;
  /// A new block from the driver, registered as the pool's (no lock of the pool held: the
  /// driver's call is slow, and may make memarea's lazily made objects).
  record allocate_block(std::size_t want);
  /// Makes r's memory the pool's.
  void add_block_locked(const record& r, shelf on);
  /// Takes empty blocks that every stream may use out of the pool until reserved <= keep.
  std::vector<record> take_empty_blocks_locked(std::size_t keep);
  /// Gives blocks taken out back to the driver (no lock of the pool held).
  static void release_blocks(const std::vector<record>& rs);
  std::string describe_locked() const {
    return fmt::format("reserved {} of maximum {}, in use {}, {} block(s)", reserved,
                       maximum ? fmt::format("{}", maximum) : std::string("none"),
                       handed_bytes, blocks.size());
  }
  std::size_t largest_free_locked() const {
    std::size_t best = 0;
    const free_lists& f = tags[0];
    for (int on = 0; on < kShelves; ++on) {
      if (!f.fl_map[on]) continue;
      const int fl = 63 - std::countl_zero(f.fl_map[on]);
      const int sl = 7 - std::countl_zero(static_cast<std::uint8_t>(f.sl_map[on][fl]));
      for (std::uint32_t i = f.head[on * kLists + ((fl << kSub) | sl)]; i != kNone;
           i = spans[i].free_next)
        best = std::max(best, spans[i].size);
    }
    return best;
  }

  /// not_supported in a child of fork() for a pool of the parent (but pageable host pools).
  void check_process(const char* what) const;
  void* alloc(std::size_t size, memarea_stream_t s);
  /// Frees p on s; size, when not 0, must be at most the piece's size (a pooled area's munmap).
  void free(void* p, memarea_stream_t s, std::size_t size = 0);
  /// free()'s arena part: p is not (or no longer) in the calling thread's cache.
  std::vector<record> free_locked(void* p, native_stream ns, std::size_t size);
  /// free()'s end for a piece it moved from live to cached (span i, incarnation inc, sz bytes,
  /// at start): into thread cache c (whose flag the caller holds; released here), or, where c
  /// has no room for it, to the arena.
  void cache_freed(thread_cache* c, std::uintptr_t start, std::uint32_t i, std::uint64_t inc,
                   std::size_t sz, native_stream ns);
  void trim(std::size_t keep);
  memarea_pool_stats stats();
  /// Gives what threads' caches hold back to the arena: everything, or what was freed on only.
  void flush_caches(bool all = true, native_stream only = nullptr);
};

namespace pool_internal {

/// Counts the fork()s this process descends from: a pool made before one belongs to the parent.
extern std::atomic<std::uint64_t> g_fork_generation;  // pool_alloc.cpp

/// One thread's cache for one pool: freed pieces kept per size class for this thread's next
/// allocations, and the pieces it was handed lately (so that their free finds its span without
/// the arena). Everything is under `busy`, which only the owning thread takes on its fast
/// paths; others take it to drain (trim, flush, destroy, fork) in short sections.
struct alignas(64) thread_cache {  // a line of its own: no false sharing between threads
  std::atomic<bool> busy{false};
  std::atomic<pool_state*> pool{nullptr};  // null once the pool is gone (read by its thread)
  std::uint64_t serial = 0;
  /// Trivial (no member initializers): a free's batch of evicted entries is a plain array on
  /// its stack, filled before it is read, not 640 bytes zeroed on every free.
  struct entry {
    std::uintptr_t start;
    std::size_t size;
    std::uint32_t span;
    std::uint64_t incarnation;  // the span's, when this thread cached it
    native_stream stream;
  };
  /// Cached pieces at most, in all classes: enough for a loop of 1,024 like allocations that
  /// are all freed before the next loop (AML's allocator benchmarks, a layer's activations).
  static constexpr std::uint32_t kEntries = 1024;
  static constexpr std::uint16_t kEnd = 0xffff;
  static_assert(kEntries < kEnd, "entry indices are 16 bits");
  /// What a thread may keep cached: 4 MiB, or one piece of any size (so that a loop of
  /// large round trips stays in the cache too). Kept small: cached pieces are reserved memory
  /// that no other size and no other thread can use until a short pool flushes the caches.
  static constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
  /// Larger pieces are cached only alone (see kMaxBytes): many large pieces held out of the
  /// arena's coalescing fragment it (the mixed trace on sim: peak reserved 1.222x the peak of
  /// live bytes when pieces of up to 4 MiB were cached, 1.183x with this limit).
  static constexpr std::size_t kMaxPiece = std::size_t{1} << 20;
  /// A class's stack is searched this deep for a piece of the caller's stream and size.
  static constexpr int kSearchDepth = 8;
  /// Entries of other classes given back when a free finds the cache full: the cache follows
  /// the sizes in use.
  static constexpr int kEvictBatch = 16;

  std::size_t cached_bytes = 0;
  std::size_t cached_count = 0;

  struct recent {
    std::uintptr_t start = 0;
    std::uint32_t span = kNone;
    std::uint64_t incarnation = 0;  // the span's when this thread was handed it
  };
  /// Direct-mapped by address over the pool's alignment (pieces start at least that far
  /// apart): 4,096 slots, so that 1,024 live pieces at a regular stride of one to 256 alignment
  /// units each keep a slot of their own (Fibonacci hashing spreads an arithmetic sequence).
  static constexpr int kRecentBits = 12, kRecent = 1 << kRecentBits;
  static int recent_slot(std::uintptr_t p, int alignment_shift) {
    return static_cast<int>((p >> alignment_shift) * 0x9e3779b97f4a7c15ull >> (64 - kRecentBits));
  }
  int recent_slot(std::uintptr_t p) const { return recent_slot(p, recent_shift); }
  int recent_shift = 8;  ///< log2 of the pool's alignment (set when the cache is made)
  recent recents[kRecent];

  void lock() noexcept {
    // Only a flush, trim, destroy, fork or a thread's exit contend, for one batch at most.
    for (int spins = 0; busy.exchange(true, std::memory_order_acquire); ++spins) {
      if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();  // the holder may be descheduled (one core)
      }
    }
  }
  void unlock() noexcept { busy.store(false, std::memory_order_release); }

  /// Takes a cached piece of at least n bytes freed on stream ns, from class cls; false if
  /// none within kSearchDepth.
  bool take(int cls, std::size_t n, native_stream ns, entry* out) noexcept {
    std::uint16_t prev = kEnd;
    int depth = 0;
    for (std::uint16_t i = head_[cls]; i != kEnd && depth < kSearchDepth;
         prev = i, i = nodes_[i].next, ++depth) {
      const entry& e = nodes_[i].e;
      if (e.stream != ns || e.size < n) continue;
      *out = e;
      unlink(cls, prev, i);
      return true;
    }
    return false;
  }
  /// Whether a piece of sz bytes fits (bytes and entries) under the byte limit.
  bool has_room(std::size_t sz, std::size_t limit, bool one_of_any_size) const noexcept {
    if (cached_count == kEntries) return false;
    if (cached_count == 0 && one_of_any_size) return true;
    return sz <= kMaxPiece && cached_bytes + sz <= limit;
  }
  /// Caches e in class cls (has_room said yes).
  void put(int cls, const entry& e) noexcept {
    std::uint16_t i;
    if (free_head_ != kEnd) {
      i = free_head_;
      free_head_ = nodes_[i].next;
    } else {
      i = static_cast<std::uint16_t>(never_used_++);
    }
    nodes_[i].e = e;
    nodes_[i].next = head_[cls];
    head_[cls] = i;
    nonempty_[cls / 64] |= std::uint64_t{1} << (cls % 64);
    cached_bytes += e.size;
    ++cached_count;
  }
  /// Takes entries of classes other than keep (round robin over the classes) until a piece of
  /// sz bytes would fit, at most kEvictBatch of them; returns how many.
  int evict_for(int keep, std::size_t sz, std::size_t limit, entry* out) noexcept {
    int n = 0;
    while (n < kEvictBatch && cached_count > 0 && !has_room(sz, limit, false)) {
      const int cls = next_nonempty(victim_, keep);
      if (cls < 0) break;
      victim_ = cls;
      out[n++] = nodes_[head_[cls]].e;
      unlink(cls, kEnd, head_[cls]);
    }
    return n;
  }

  /// Takes out up to max entries (caller holds busy): of every stream, or only those freed on
  /// `only`. Callers loop until it returns fewer than max; nothing here allocates, so a
  /// cache's flag is never held across a throw.
  std::size_t drain(entry* out, std::size_t max, bool all = true,
                    native_stream only = nullptr) noexcept {
    std::size_t n = 0;
    for (int cls = 0; cls < kLists && n < max; ++cls) {
      std::uint16_t prev = kEnd;
      for (std::uint16_t i = head_[cls]; i != kEnd && n < max;) {
        const std::uint16_t next = nodes_[i].next;
        if (all || nodes_[i].e.stream == only) {
          out[n++] = nodes_[i].e;
          unlink(cls, prev, i);
        } else {
          prev = i;
        }
        i = next;
      }
    }
    // The recents stay: each is checked against its span's incarnation when used, and those
    // of pieces still live keep their frees off the arena.
    return n;
  }
  /// Forgets every entry (the pool is going, and its pieces with its blocks).
  void clear() noexcept {
    std::fill(std::begin(head_), std::end(head_), kEnd);
    nonempty_ = {};
    free_head_ = kEnd;
    never_used_ = 0;
    cached_bytes = 0;
    cached_count = 0;
    for (recent& r : recents) r = {};
  }

 private:
  struct node {
    entry e;
    std::uint16_t next = kEnd;
  };
  void unlink(int cls, std::uint16_t prev, std::uint16_t i) noexcept {
    (prev == kEnd ? head_[cls] : nodes_[prev].next) = nodes_[i].next;
    if (head_[cls] == kEnd) nonempty_[cls / 64] &= ~(std::uint64_t{1} << (cls % 64));
    nodes_[i].next = free_head_;
    free_head_ = i;
    cached_bytes -= nodes_[i].e.size;
    --cached_count;
  }
  /// The first class at or after from (cyclically) with cached entries, other than skip; -1
  /// if none.
  int next_nonempty(int from, int skip) const noexcept {
    constexpr int kWords = kLists / 64;
    // kWords + 1 rounds: the last one reads from's word again, whole (the classes below from).
    for (int k = 0; k <= kWords; ++k) {
      const int w = (from / 64 + k) % kWords;
      std::uint64_t bits = nonempty_[w];
      if (k == 0) bits &= ~std::uint64_t{0} << (from % 64);
      if (skip / 64 == w) bits &= ~(std::uint64_t{1} << (skip % 64));
      if (bits) return w * 64 + std::countr_zero(bits);
    }
    return -1;
  }
  /// Per class: the index of its most recently cached entry (a stack linked through next).
  std::array<std::uint16_t, kLists> head_ = make_heads();
  std::array<std::uint64_t, kLists / 64> nonempty_{};  // classes whose stack is not empty
  std::uint16_t free_head_ = kEnd;  // entries given back; then those never used yet
  std::uint32_t never_used_ = 0;
  int victim_ = 0;
  node nodes_[kEntries];
  static constexpr std::array<std::uint16_t, kLists> make_heads() {
    std::array<std::uint16_t, kLists> h{};
    for (auto& x : h) x = kEnd;
    return h;
  }
};

/// Every live pool, and a serial per pool (a cache or a lookup finds out whether its pool still
/// lives, even if a new pool reuses the address).
struct pool_list {
  ranked_mutex m{lock_rank::pool_list};
  std::unordered_map<const pool_state*, std::uint64_t> live;
  std::uint64_t next_serial = 1;
};
extern std::atomic<pool_list*> g_pools;  // for fork's handlers, which must make nothing (pool.cpp)
/// The live pools (made on first use).
pool_list& pools();

inline std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) & ~(a - 1); }

}  // namespace pool_internal

}  // namespace memarea::detail
