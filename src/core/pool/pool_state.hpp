// The pool's private state, shared by the files of pools (src/core/pool_*.cpp and pool.cpp):
// what the rest of core asks of pools is in pool_impl.hpp.
//
// A pool is one pool_state; its parts are defined in one file per concern:
//   pool_spans.hpp  the arena's building blocks: spans, size classes, free lists
//   pool_cache.hpp  the per-thread caches and the list of live pools
//   pool_alloc.cpp  alloc and free: the per-thread caches (the fast path) and the arena's
//                   free lists (the slow path), flushing the caches, fork()'s hold on them,
//                   giving empty blocks back to the driver
//   pool_arena.cpp  new blocks from the driver, stream-ordered reclaim of freed spans, trim,
//                   statistics, retiring a stream
//   pool_pieces.cpp lookup of a block's live piece (and the public lookup()), and pieces
//                   shared with other processes
//   pool_streams.cpp pieces used on other streams than their own (record_stream) and frees on
//                   the per-thread default stream: freed pieces that wait for events
//   pool.cpp        making and destroying pools, the list of live pools, the C API's calls
//                   and the C++ classes (and area's allocation calls)
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
// - A piece shared with other processes (through IPC) is marked (state exported, an entry in
//   ipc_marks): its free bypasses the threads' caches and asks the registry's observer (IPC,
//   core/memory/memory_observer.hpp), which may hold it back (state held) until every
//   importer closed it; then the observer gives it back (pool_release_held).
#pragma once

#include "base/fork_safety.hpp"
#include "core/memory/registry.hpp"
#include "core/memory/usage_counters.hpp"
#include "core/pool/pool_cache.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/pool/pool_spans.hpp"

#include <memarea/pool.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace memarea::detail {

using namespace pool_internal;  // the pool's files only: see pool_spans.hpp

/// A pool's state (memarea_pool_t points at it).
struct pool_state {
  // What it draws from.
  int device = 0;
  unsigned area_flags = 0;
  bool host_pool = false;  // pageable host memory (host_malloc)
  int host_node = -1;
  memarea_memory_kind kind = MEMAREA_MEMORY_DEVICE;
  /// Where its blocks count in the usage counters: their records' device (the host's row for
  /// pinned, mapped and pageable memory).
  int usage_device = MEMAREA_CPU_DEVICE_ID;
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
  /// Streams besides its own that a live piece is used on (record_stream), by span: its free
  /// records an event on each, and the piece is reused only once they have all completed.
  struct stream_use {
    std::uint64_t incarnation = 0;  // the piece's, when recorded
    std::vector<native_stream> streams;
  };
  std::unordered_map<std::uint32_t, stream_use> used_on;
  /// used_on.size(), read with no lock by every free: 0 keeps frees on their fast path.
  std::atomic<std::size_t> stream_uses{0};
  /// A freed piece (state pending) that waits for events recorded at its free; then it goes to
  /// tag's lists (settle_pending_locked).
  struct pending_free {
    std::uint32_t span = kNone;
    std::uint16_t tag = 0;
    std::vector<native_event> events;
  };
  std::vector<pending_free> pending_frees;
  std::vector<native_event> spare_events;  // of settled pieces, recorded again by later frees

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
    // One handle, a stream per thread: no tag could tell them apart. Its allocations take
    // memory any stream may use; its frees wait for an event (free_after_streams).
    if (is_per_thread(st)) return 0;
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
    f.bytes[s.on] += s.size;
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
    f.bytes[s.on] -= s.size;
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
  /// with any_shelf (a pool that may not grow, or whose shelf is cut up), then on the other one
  /// too. kNone when none fits.
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
    usage::add(usage_device, usage::pool_handed, static_cast<std::int64_t>(spans[i].size));
    return i;
  }

  /// Gives span i (live or cached, already out of handed_out's count) back to tag's lists.
  /// It coalesces with free neighbours of tag and with those any stream may take (tag 0),
  /// which become tag's: memory every stream may use may also be reused in tag's stream order,
  /// and a block's never-used rest merges with the pieces freed around it, so that a pool whose
  /// pieces are all freed holds whole free blocks again rather than blocks cut up by the rests
  /// of earlier rounds.
  void give_back_locked(std::uint32_t i, std::uint16_t tag) {
    span& s = spans[i];
    s.freed_seq = ++free_seq;
    auto mergeable = [&](std::uint32_t j) {
      return j != kNone && spans[j].st() == free_span &&
             (spans[j].tag == tag || spans[j].tag == 0);
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
    usage::add(usage_device, usage::pool_handed, -static_cast<std::int64_t>(spans[i].size));
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
  /// Bytes of a new block that fits n, or 0 when the maximum forbids one; with cut_up, of half
  /// the shelf's growth.
  std::size_t plan_block_locked(std::size_t n, shelf on, bool cut_up = false) const;
  /// What shelf `on` grows by: 1/16 of what it holds, at most kMaxGrowth.
  std::size_t growth_locked(shelf on) const;
  /// Whether shelf `on` is cut up for a request of n bytes by tag's stream that none of its
  /// free spans fits: it holds free for tag (tag's memory and tag 0's) at least n, 2 MiB and
  /// what it would grow by.
  bool cut_up_locked(shelf on, std::size_t n, std::uint16_t tag) const;
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

  // --- pieces used on other streams (pool_streams.cpp) ---
  /// Records that the live piece holding p is used on stream s too: its free waits for s.
  void record_stream(void* p, memarea_stream_t s);
  /// free()'s path for a piece used on other streams, or freed on the per-thread default
  /// stream: events recorded on them, the piece pending until they complete. False when the
  /// usual path is to take the free (nothing to wait for, or a refusal, which it words).
  bool free_after_streams(void* p, native_stream ns, std::size_t size);
  /// Moves pending pieces whose events have completed (with wait: waits for them) to their
  /// tags' lists; whether any moved.
  bool settle_pending_locked(bool wait);
  /// An event recorded on stream s of this pool's device now (a spare one, or a new one).
  native_event record_on_locked(native_stream s);
  /// What destroy gives back: every pending piece's and spare event, once pending pieces'
  /// events have completed (waited for).
  std::vector<native_event> take_events_locked();
};

}  // namespace memarea::detail
