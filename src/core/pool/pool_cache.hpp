// The per-thread caches of pools (one per thread and pool: the fast path of alloc and free)
// and the list of live pools. Included by the pool's files only, through pool_state.hpp.
#pragma once

#include "base/fork_safety.hpp"
#include "core/pool/pool_spans.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <thread>
#include <unordered_map>

namespace memarea::detail {

struct pool_state;

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
