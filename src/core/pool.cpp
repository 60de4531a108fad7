// Pools: stream-ordered sub-allocation from blocks of an area's memory (docs/pools.md).
//
// Layout of the work:
// - The arena (one per pool, one lock) keeps the blocks and their spans. Free spans sit in
//   two-level segregated-fit lists (TLSF: a power-of-two class split in 8), one set of lists per
//   stream tag. A span freed on stream A goes to A's lists and is reused by allocations on A
//   at once; tag 0 holds memory any stream may take. Spans of A move to tag 0 once an event
//   recorded on A after their free has completed (queried when another stream is short of
//   memory; never waited for). Neighbours of one tag coalesce on free.
// - Per-thread caches (one per thread and pool) keep a few freed spans per size class and
//   stream, and the thread's recent allocations: a free and re-allocation of a like size on
//   one thread touch no shared line. A span in a cache stays known to the arena (its state
//   says cached), so a free from another thread, or a double free, is refused exactly.
// - Every block is one registry record (origin::pool, owner = the pool): copies and managed
//   calls see the block; lookup() asks the pool for the live piece that holds a pointer.
// - A piece shared through IPC is marked (state exported, an entry in ipc_marks): its free
//   bypasses the threads' caches and asks IPC, which may hold it back (state held) until
//   every importer closed it; then IPC gives it back (pool_release_held).
#include "core/release.hpp"
#include "core/pool_impl.hpp"

#include "base/fork_safety.hpp"
#include "core/area_impl.hpp"
#include "core/host_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/pool.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <thread>
#include <utility>
#include <vector>

struct memarea_pool;

namespace memarea::detail {

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr int kSub = 3;  // 8 second-level classes per power of two
constexpr int kLists = 64 << kSub;
constexpr std::size_t kMinBlock = std::size_t{2} << 20;
constexpr std::size_t kMaxGrowth = std::size_t{1} << 30;

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
  std::atomic<std::uint64_t> state{unused};

  span_state st() const { return static_cast<span_state>(state.load(std::memory_order_relaxed) & 0xff); }
  std::uint64_t incarnation() const { return state.load(std::memory_order_relaxed) >> 8; }
  /// Under the arena's lock, or by the cache that holds the span: a new state, same incarnation.
  void set(span_state v) { state.store(word(incarnation(), v), std::memory_order_relaxed); }
};

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
  span& operator[](std::uint32_t i) const {
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
  std::unique_ptr<std::atomic<span*>[]> chunks_{new std::atomic<span*>[kChunks]()};
  std::uint32_t size_ = 0;
};

int floor_log2(std::size_t x) { return 63 - std::countl_zero(static_cast<std::uint64_t>(x)); }

/// The class whose every span is >= s (search) or that holds a span of size s (insert).
int insert_class(std::size_t s) {
  const int fl = floor_log2(s);
  const int sl = static_cast<int>((s >> (fl - kSub)) & ((1 << kSub) - 1));
  return (fl << kSub) | sl;
}
int search_class(std::size_t s) {
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

/// One stream tag's free lists.
struct free_lists {
  std::uint64_t fl_map = 0;
  std::uint8_t sl_map[64] = {};
  std::uint32_t head[kLists];
  std::size_t bytes = 0;
  std::size_t spans = 0;
  native_stream stream = nullptr;
  native_event event = nullptr;    // recorded on stream to learn when its frees are safe
  std::uint64_t event_seq = 0;     // frees up to this sequence number are covered by event
  bool event_pending = false;
  free_lists() { std::fill(std::begin(head), std::end(head), kNone); }
};

struct thread_cache;

}  // namespace

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
  start_index handed_out;        // live and cached spans by start
  struct block {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    std::uint32_t first = kNone;
    record rec;
  };
  std::vector<block> blocks;
  std::uint64_t free_seq = 0;
  std::size_t reserved = 0, peak_reserved = 0;
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
    auto it = tag_of_stream.find(st);
    if (it != tag_of_stream.end()) return it->second;
    tag_of_stream.reserve(tag_of_stream.size() + 1);  // what may throw, first
    std::uint16_t t;
    if (!retired_tags.empty()) {
      t = retired_tags.back();
      retired_tags.pop_back();
    } else {
      if (tags.size() >= std::numeric_limits<std::uint16_t>::max())
        throw error(errc::out_of_memory, "pool: too many streams");
      tags.emplace_back();
      t = static_cast<std::uint16_t>(tags.size() - 1);
    }
    tags[t].stream = st;
    tag_of_stream.emplace(st, t);
    return t;
  }

  void list_insert(std::uint32_t i, std::uint16_t tag) {
    span& s = spans[i];
    free_lists& f = tags[tag];
    const int c = insert_class(s.size);
    s.tag = tag;
    s.free_prev = kNone;
    s.free_next = f.head[c];
    if (f.head[c] != kNone) spans[f.head[c]].free_prev = i;
    f.head[c] = i;
    f.fl_map |= std::uint64_t{1} << (c >> kSub);
    f.sl_map[c >> kSub] |= static_cast<std::uint8_t>(1u << (c & ((1 << kSub) - 1)));
    f.bytes += s.size;
    ++f.spans;
    s.set(free_span);
  }
  void list_remove(std::uint32_t i) {
    span& s = spans[i];
    free_lists& f = tags[s.tag];
    const int c = insert_class(s.size);
    if (s.free_prev != kNone) spans[s.free_prev].free_next = s.free_next;
    else f.head[c] = s.free_next;
    if (s.free_next != kNone) spans[s.free_next].free_prev = s.free_prev;
    if (f.head[c] == kNone) {
      f.sl_map[c >> kSub] &= static_cast<std::uint8_t>(~(1u << (c & ((1 << kSub) - 1))));
      if (f.sl_map[c >> kSub] == 0) f.fl_map &= ~(std::uint64_t{1} << (c >> kSub));
    }
    f.bytes -= s.size;
    --f.spans;
    s.free_prev = s.free_next = kNone;
  }
  /// A free span of tag with size >= n, or kNone. First a few spans of n's own class (those
  /// fit more tightly: less of the larger spans is cut away), then the first class above.
  std::uint32_t find_fit(std::uint16_t tag, std::size_t n) const {
    const free_lists& f = tags[tag];
    int steps = 0;
    for (std::uint32_t i = f.head[insert_class(n)]; i != kNone && steps < 8;
         i = spans[i].free_next, ++steps)
      if (spans[i].size >= n) return i;
    const int c = search_class(n);
    int fl = c >> kSub;
    unsigned sl_map = f.sl_map[fl] & (~0u << (c & ((1 << kSub) - 1)));
    if (!sl_map) {
      if (fl >= 63) return kNone;
      const std::uint64_t fl_map = f.fl_map & (~std::uint64_t{0} << (fl + 1));
      if (!fl_map) return kNone;
      fl = std::countr_zero(fl_map);
      sl_map = f.sl_map[fl];
    }
    return f.head[(fl << kSub) | std::countr_zero(sl_map)];
  }

  /// Takes n bytes from a free span of tag (or tag 0); kNone when none fits.
  std::uint32_t take_locked(std::size_t n, std::uint16_t tag) {
    std::uint32_t i = find_fit(tag, n);
    if (i == kNone && tag != 0) i = find_fit(0, n);
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

  /// Frees live span i on stream ns; returns the empty blocks to give back past the release
  /// threshold (release_blocks, once the lock is dropped).
  std::vector<record> release_locked(std::uint32_t i, native_stream ns) {
    release_handed_locked(i, tag_for(ns));
    return past_threshold_locked();
  }
  /// The empty blocks to give back after a free, past the release threshold.
  std::vector<record> past_threshold_locked();
  /// The piece of this pool's live or exported span that holds a, or kNone.
  std::uint32_t piece_at_locked(std::uintptr_t a) const;
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
  std::size_t plan_block_locked(std::size_t n) const;
  /// A new block from the driver, registered as the pool's (no lock of the pool held: the
  /// driver's call is slow, and may make memarea's lazily made objects).
  record allocate_block(std::size_t want);
  /// Makes r's memory the pool's.
  void add_block_locked(const record& r);
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
    if (!f.fl_map) return 0;
    const int fl = 63 - std::countl_zero(f.fl_map);
    const int sl = 7 - std::countl_zero(static_cast<std::uint8_t>(f.sl_map[fl]));
    for (std::uint32_t i = f.head[(fl << kSub) | sl]; i != kNone; i = spans[i].free_next)
      best = std::max(best, spans[i].size);
    return best;
  }

  /// not_supported in a child of fork() for a pool of the parent (but pageable host pools).
  void check_process(const char* what) const;
  void* alloc(std::size_t size, memarea_stream_t s);
  /// Frees p on s; size, when not 0, must be at most the piece's size (a pooled area's munmap).
  void free(void* p, memarea_stream_t s, std::size_t size = 0);
  /// free()'s arena part: p is not (or no longer) in the calling thread's cache.
  std::vector<record> free_locked(void* p, native_stream ns, std::size_t size);
  void trim(std::size_t keep);
  memarea_pool_stats stats();
  /// Gives what threads' caches hold back to the arena: everything, or what was freed on only.
  void flush_caches(bool all = true, native_stream only = nullptr);
};

namespace {

/// Counts the fork()s this process descends from: a pool made before one belongs to the parent.
std::atomic<std::uint64_t> g_fork_generation{0};

/// One thread's cache for one pool.
struct alignas(64) thread_cache {  // a line of its own: no false sharing between threads
  std::atomic<bool> busy{false};
  std::atomic<pool_state*> pool{nullptr};  // null once the pool is gone (read by its thread)
  std::uint64_t serial = 0;
  struct entry {
    std::uintptr_t start = 0;
    std::size_t size = 0;
    std::uint32_t span = kNone;
    std::uint64_t incarnation = 0;  // the span's, when this thread cached it
    native_stream stream = nullptr;
  };
  static constexpr int kSlots = 32, kPerSlot = 4;
  struct slot {
    int cls = -1;
    int count = 0;
    entry e[kPerSlot];
  };
  slot slots[kSlots];
  std::size_t cached_bytes = 0;
  std::size_t cached_count = 0;
  /// What a thread may keep cached: 4 MiB, or one piece of any size (so that a loop of
  /// large round trips stays in the cache too). Kept small: cached pieces are reserved memory
  /// that no other size and no other thread can use.
  static constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
  struct recent {
    std::uintptr_t start = 0;
    std::uint32_t span = kNone;
    std::uint64_t incarnation = 0;  // the span's when this thread was handed it
  };
  static constexpr int kRecent = 64;
  recent recents[kRecent];

  void lock() noexcept {
    while (busy.exchange(true, std::memory_order_acquire)) {
      // Only trim, destroy or a thread's exit contend: short sections.
    }
  }
  void unlock() noexcept { busy.store(false, std::memory_order_release); }
  static int recent_slot(std::uintptr_t p) {
    return static_cast<int>((p >> 8) * 0x9e3779b97f4a7c15ull >> 58);
  }
  slot& slot_of(int cls) {
    // Classes of powers of two differ only in their high bits: hash them over the slots.
    return slots[(static_cast<unsigned>(cls) * 0x9E3779B1u) >> (32 - 5)];
  }
  static_assert(kSlots == 32, "slot_of takes the top 5 bits");

  /// What drain() takes out: at most every slot's entries. No allocation, so a cache's flag
  /// is never held across a throw.
  struct drained {
    std::array<entry, kSlots * kPerSlot> e;
    std::size_t n = 0;
  };
  /// Takes the entries out (caller holds busy): all of them, or only those freed on `only`.
  drained drain(bool all = true, native_stream only = nullptr) {
    drained out;
    for (slot& s : slots) {
      int keep = 0;
      for (int k = 0; k < s.count; ++k) {
        if (all || s.e[k].stream == only) {
          out.e[out.n++] = s.e[k];
          cached_bytes -= s.e[k].size;
          --cached_count;
        } else {
          s.e[keep++] = s.e[k];
        }
      }
      s.count = keep;
      if (keep == 0) s.cls = -1;
    }
    if (all)
      for (recent& r : recents) r = {};
    return out;
  }
};

/// Every live pool, and a serial per pool (a cache or a lookup finds out whether its pool still
/// lives, even if a new pool reuses the address).
struct pool_list {
  ranked_mutex m{lock_rank::pool_list};
  std::unordered_map<const pool_state*, std::uint64_t> live;
  std::uint64_t next_serial = 1;
};
std::atomic<pool_list*> g_pools{nullptr};  // for fork's handlers, which must make nothing
pool_list& pools() {
  return made_once([] {
    auto* l = new pool_list();
    g_pools.store(l, std::memory_order_release);
    return l;
  });
}

/// The calling thread's caches (one per pool it used); given back at thread exit.
struct thread_caches {
  std::vector<thread_cache*> v;
  thread_cache* last = nullptr;
  ~thread_caches();
};
thread_local thread_caches t_caches;

thread_cache* cache_for(pool_state& p) {
  thread_cache* c = t_caches.last;
  if (c && c->pool.load(std::memory_order_relaxed) == &p && c->serial == p.serial) [[likely]]
    return c;
  for (thread_cache* x : t_caches.v)
    if (x->pool.load(std::memory_order_relaxed) == &p && x->serial == p.serial)
      return t_caches.last = x;
  // Caches of destroyed pools go now. destroy_pool cleared pool under the cache's flag and
  // touches the cache no more once it let go of the flag: taking the flag waits for that.
  std::erase_if(t_caches.v, [](thread_cache* x) {
    x->lock();
    const bool dead = x->pool.load(std::memory_order_relaxed) == nullptr;
    x->unlock();
    if (dead) delete x;
    return dead;
  });
  t_caches.last = nullptr;
  auto fresh = std::make_unique<thread_cache>();
  fresh->pool = &p;
  fresh->serial = p.serial;
  {
    std::lock_guard lock(p.caches_m);
    p.caches.push_back(fresh.get());
  }
  t_caches.v.push_back(fresh.get());
  return t_caches.last = fresh.release();
}

/// Returns entries taken out of a cache to its pool's arena.
void give_back_entries(pool_state& p, const thread_cache::entry* es, std::size_t n) {
  if (n == 0) return;
  std::lock_guard lock(p.m);
  for (std::size_t k = 0; k < n; ++k) {
    const thread_cache::entry& e = es[k];
    // Straight from cached to free (never through live, which a stale entry of this
    // incarnation elsewhere could match): only the cache that held it moves it.
    const std::uint16_t tag = p.tag_for(e.stream);
    std::uint64_t want = word(e.incarnation, cached);
    if (!p.spans[e.span].state.compare_exchange_strong(want, word(e.incarnation, free_span)))
      continue;  // never
    p.release_handed_locked(e.span, tag);
  }
}
void give_back_entries(pool_state& p, const thread_cache::drained& d) {
  give_back_entries(p, d.e.data(), d.n);
}

thread_caches::~thread_caches() {
  if (v.empty()) return;
  auto& list = pools();
  std::lock_guard g(list.m);
  for (thread_cache* c : v) {
    pool_state* p = c->pool;
    auto it = p ? list.live.find(p) : list.live.end();
    if (p && it != list.live.end() && it->second == c->serial) {
      thread_cache::drained es;
      {
        std::lock_guard cl(p->caches_m);
        std::erase(p->caches, c);
        c->lock();
        es = c->drain();
        c->pool = nullptr;
        c->unlock();
      }
      try {
        give_back_entries(*p, es);
      } catch (...) {
        // At thread exit nothing can report it; the spans stay cached until the pool goes.
      }
    }
    delete c;
  }
  v.clear();
  last = nullptr;
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) & ~(a - 1); }

/// fork() holds every thread's cache of every pool, as it holds memarea's locks, so that a
/// child never finds a cache half-changed by a thread it does not have. Runs after the pool
/// list's and the cache lists' locks are taken (lower ranks): the lists stand still.
struct pool_caches_fork final : fork_participant {
  pool_caches_fork() noexcept : fork_participant(lock_rank::pool_thread_caches) {}
  template <class F>
  static void each_cache(F f) noexcept {
    pool_list* list = g_pools.load(std::memory_order_acquire);
    if (!list) return;
    for (auto& [p, serial] : list->live) {
      (void)serial;
      for (thread_cache* c : const_cast<pool_state*>(p)->caches) f(*c);
    }
  }
  void fork_prepare() noexcept override {
    each_cache([](thread_cache& c) { c.lock(); });  // holders never block: short waits
  }
  void fork_parent() noexcept override {
    each_cache([](thread_cache& c) { c.unlock(); });
  }
  void fork_child() noexcept override {
    each_cache([](thread_cache& c) { c.unlock(); });
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  }
};
pool_caches_fork g_pool_caches_fork;

}  // namespace

bool pool_state::reclaim_locked(std::uint16_t except, bool wait) {
  auto& gpu = system::get().gpu();
  bool moved = false;
  for (std::size_t t = 1; t < tags.size(); ++t) {
    if (t == except) continue;
    free_lists& f = tags[t];
    if (f.spans == 0) continue;
    std::uint64_t safe_up_to = 0;  // spans of t freed up to this sequence number may move
    if (gpu.stream_query(device, f.stream).ok()) {
      // The stream has run everything queued so far, so it has passed every free of t.
      safe_up_to = free_seq;
      f.event_pending = false;
    } else {
      if (!f.event) {
        native_event e = nullptr;
        if (!gpu.event_create(device, &e, event_timing::off).ok()) continue;
        f.event = e;
      }
      if (!f.event_pending) {
        if (!gpu.event_record(f.event, device, f.stream).ok()) continue;
        f.event_pending = true;
        f.event_seq = free_seq;
      }
      // Waiting for one stream's event (trim asks for it) is not a device-wide synchronize.
      const dstatus q = wait ? gpu.event_synchronize(f.event) : gpu.event_query(f.event);
      if (!q.ok()) continue;  // busy: not yet
      f.event_pending = false;
      safe_up_to = f.event_seq;
    }
    std::vector<std::uint32_t> ready;
    for (int c = 0; c < kLists; ++c)
      for (std::uint32_t i = f.head[c]; i != kNone; i = spans[i].free_next)
        if (spans[i].freed_seq <= safe_up_to) ready.push_back(i);
    for (std::uint32_t i : ready) {
      list_remove(i);
      give_back_locked(i, 0);
      moved = true;
    }
  }
  return moved;
}

std::size_t pool_state::plan_block_locked(std::size_t n) const {
  // Every driver's allocation is at least 256-byte aligned (sim and host: page-aligned): only
  // a larger alignment may need room to move the first piece up.
  const std::size_t pad = alignment > 256 ? alignment : 0;
  // Geometric: each block at least 1/32 of what is reserved (at most 1 GiB), so the
  // number of blocks grows with the logarithm of the pool's size, and the slack stays small.
  std::size_t want = round_up(std::max({n + pad, kMinBlock, std::min(reserved / 32, kMaxGrowth)}),
                              kMinBlock);
  if (maximum) {
    // Clipped to whole pages: the driver rounds host and managed memory up to one.
    const std::size_t committed = reserved + growing;
    const std::size_t room = committed > maximum ? 0 : (maximum - committed) & ~std::size_t{4095};
    if (room < n + pad) return 0;
    want = std::min(want, room);
  }
  return want;
}

record pool_state::allocate_block(std::size_t want) {
  void* base = host_pool ? host_malloc(want, host_node)
                         : area_mmap(device, area_flags, want, -1, nullptr);
  // The block's record becomes the pool's: freed by the pool only, looked up through it.
  auto taken = allocations().erase_if(base, [](const record&) { return true; });
  if (!taken) throw error(errc::unknown, "pool: a new block has no record");
  record r = *taken;
  r.made_by = origin::pool;
  r.owner = this;
  try {
    allocations().insert(r);
  } catch (...) {
    (void)release(r);
    throw;
  }
  return r;
}

void pool_state::add_block_locked(const record& r) {
  block b;
  b.base = reinterpret_cast<std::uintptr_t>(r.base);
  b.size = r.size;
  b.rec = r;
  const std::uintptr_t start = round_up(b.base, alignment);
  const std::size_t usable = (b.size - (start - b.base)) & ~(alignment - 1);
  blocks.reserve(blocks.size() + 1);  // what may throw, first
  const std::uint32_t i = new_span();
  span& s = spans[i];
  s.start = start;
  s.size = usable;
  s.phys_prev = s.phys_next = kNone;
  s.freed_seq = 0;
  b.first = i;
  blocks.push_back(b);
  list_insert(i, 0);
  reserved += b.size;
  peak_reserved = std::max(peak_reserved, reserved);
  ++driver_allocations;
}

void pool_state::release_blocks(const std::vector<record>& rs) {
  for (const record& r : rs) {
    ipc_forget_pool_block(r.id);
    allocations().erase_if(r.base, [&](const record& x) { return x.id == r.id; });
    (void)release(r);  // a driver that refuses a free keeps the memory; the pool forgets it
  }
}

std::vector<record> pool_state::take_empty_blocks_locked(std::size_t keep) {
  std::vector<record> out;
  if (reserved <= keep) return out;
  out.reserve(blocks.size());  // what may throw, first
  for (std::size_t k = blocks.size(); k-- > 0 && reserved > keep;) {
    block& b = blocks[k];
    span& s = spans[b.first];
    if (s.st() != free_span || s.tag != 0 || s.phys_prev != kNone || s.phys_next != kNone)
      continue;
    list_remove(b.first);
    drop_span(b.first);
    out.push_back(b.rec);
    reserved -= b.size;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return out;
}

void pool_state::check_process(const char* what) const {
  // Pageable host memory is copied into the child; device and pinned blocks are shared with
  // the parent (sim) or belong to a context the child may not use (CUDA, HIP).
  if (fork_generation != g_fork_generation.load(std::memory_order_relaxed) && !host_pool)
    throw error(errc::not_supported,
                fmt::format("{}: this pool was made before fork() by the parent process, whose "
                            "memory it hands out; a child of fork() makes its own pools",
                            what));
}

void* pool_state::alloc(std::size_t size, memarea_stream_t st) {
  check_process("pool alloc");
  if (size == 0) throw error(errc::invalid_value, "pool alloc: size is 0");
  if (size > (SIZE_MAX >> 2)) throw error(errc::out_of_memory, "pool alloc: size too large");
  if (st && st->device != device)
    throw error(errc::invalid_value,
                fmt::format("pool alloc: the stream is on device {}, the pool on device {}",
                            st->device, device));
  const native_stream ns = st ? st->native : nullptr;
  const std::size_t n = round_up(size, alignment);
  thread_cache* c = cache_for(*this);
  {
    c->lock();
    const int classes[2] = {insert_class(n), search_class(n)};
    for (int k2 = 0; k2 < (classes[0] == classes[1] ? 1 : 2); ++k2) {
      const int cls = classes[k2];
      thread_cache::slot& sl = c->slot_of(cls);
      if (sl.cls != cls) continue;
      for (int k = sl.count - 1; k >= 0; --k) {
        thread_cache::entry& e = sl.e[k];
        if (e.stream != ns || e.size < n) continue;
        const thread_cache::entry got = e;
        e = sl.e[--sl.count];
        c->cached_bytes -= got.size;
        --c->cached_count;
        // A new incarnation: a stale entry for the last one can no longer free it.
        const std::uint64_t inc = got.incarnation + 1;
        spans[got.span].state.store(word(inc, live), std::memory_order_relaxed);
        c->recents[thread_cache::recent_slot(got.start)] = {got.start, got.span, inc};
        c->unlock();
        return reinterpret_cast<void*>(got.start);
      }
    }
    c->unlock();
  }
  std::uint32_t i = kNone;
  std::uintptr_t start = 0;
  std::uint64_t inc = 0;
  {
    std::lock_guard lock(m);
    const std::uint16_t tag = tag_for(ns);
    i = take_locked(n, tag);
    if (i == kNone && reclaim_locked(tag)) i = take_locked(n, tag);
    if (i != kNone) {
      start = spans[i].start;
      inc = spans[i].incarnation();
    }
  }
  if (i == kNone) {
    // Short of memory: what threads' caches hold goes back to the arena first (their lock
    // ranks below the arena's), then memory of streams that passed their frees, then a block.
    // The driver is called with no lock of the pool held: its allocation can take
    // milliseconds, and must not stall this pool's other threads.
    flush_caches();
    bool freed_for_retry = false;
    for (int round = 0;; ++round) {
      // Other threads may take each new block first; past a few rounds something else is wrong
      // (a driver whose memory is less aligned than it promises).
      if (round == 16)
        throw error(errc::unknown, fmt::format("pool alloc of {} bytes: 16 new blocks did not "
                                               "hold it",
                                               size));
      std::size_t want = 0;
      {
        std::lock_guard lock(m);
        const std::uint16_t tag = tag_for(ns);
        i = take_locked(n, tag);
        if (i == kNone && reclaim_locked(tag)) i = take_locked(n, tag);
        if (i == kNone) want = plan_block_locked(n);
        if (i == kNone && want == 0) {
          // Past the maximum. A stream that freed memory may be idle, its event only just
          // recorded: up to 100 us for that, in this failing path only.
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
          while (std::chrono::steady_clock::now() < until) {
            if (reclaim_locked(tag) && (i = take_locked(n, tag)) != kNone) break;
            std::this_thread::yield();
          }
          if (i == kNone)
            throw error(errc::out_of_memory,
                        fmt::format("pool alloc of {} bytes: past the pool's maximum ({})", size,
                                    describe_locked()));
        }
        if (i != kNone) {
          start = spans[i].start;
          inc = spans[i].incarnation();
          break;
        }
        growing += want;
      }
      record r;
      try {
        r = allocate_block(want);
      } catch (const error& e) {
        std::vector<record> empty;
        {
          std::lock_guard lock(m);
          growing -= want;
          if (e.status() != errc::out_of_memory || freed_for_retry) {
            if (e.status() != errc::out_of_memory) throw;
            throw error(errc::out_of_memory,
                        fmt::format("pool alloc of {} bytes: {} ({})", size, e.what(),
                                    describe_locked()));
          }
          // The driver is out of memory: give back what this pool holds empty (of streams that
          // have passed their frees: no waiting here), then once more.
          (void)reclaim_locked(0);
          empty = take_empty_blocks_locked(0);
        }
        release_blocks(empty);
        freed_for_retry = true;
        continue;
      } catch (...) {
        std::lock_guard lock(m);
        growing -= want;  // whatever failed (bad_alloc), the pool's maximum stays whole
        throw;
      }
      std::lock_guard lock(m);
      growing -= want;
      try {
        add_block_locked(r);
      } catch (...) {
        release_blocks({r});
        throw;
      }
      // Another thread may take the new block's memory first: then round again.
      if ((i = take_locked(n, tag_for(ns))) != kNone) {
        start = spans[i].start;
        inc = spans[i].incarnation();
        break;
      }
    }
  }
  c->lock();
  c->recents[thread_cache::recent_slot(start)] = {start, i, inc};
  c->unlock();
  return reinterpret_cast<void*>(start);
}

void pool_state::free(void* p, memarea_stream_t st, std::size_t size) {
  check_process("pool free");
  if (!p) throw error(errc::invalid_value, "pool free: pointer is NULL");
  if (st && st->device != device)
    throw error(errc::invalid_value,
                fmt::format("pool free: the stream is on device {}, the pool on device {}",
                            st->device, device));
  const native_stream ns = st ? st->native : nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  thread_cache* c = cache_for(*this);
  {
    c->lock();
    thread_cache::recent& r = c->recents[thread_cache::recent_slot(start)];
    if (r.start == start) {
      const thread_cache::recent seen = r;
      r = {};
      span& s = spans[seen.span];
      // Only the incarnation this thread was handed: if the span was freed elsewhere since
      // (and perhaps handed out again), the arena below decides.
      std::uint64_t want = word(seen.incarnation, live);
      if (s.state.compare_exchange_strong(want, word(seen.incarnation, cached),
                                          std::memory_order_acq_rel)) {
        const std::size_t sz = s.size;
        if (size > sz) {
          s.state.store(word(seen.incarnation, live), std::memory_order_relaxed);
          c->recents[thread_cache::recent_slot(start)] = seen;
          c->unlock();
          throw error(errc::invalid_value,
                      fmt::format("pool free: {} holds {} bytes, not {}", p, sz, size));
        }
        const int cls = insert_class(sz);
        thread_cache::slot& sl = c->slot_of(cls);
        // Another class in this slot: its pieces go to the arena, the newest class stays.
        thread_cache::entry evicted[thread_cache::kPerSlot];
        int n_evicted = 0;
        // A pool with a release threshold caches only what the threshold would keep anyway.
        const std::size_t limit = std::min(thread_cache::kMaxBytes, release_threshold);
        const bool fits = c->cached_bytes + sz <= limit ||
                          (c->cached_count == 0 && release_threshold == SIZE_MAX);
        if (fits && sl.cls != cls) {
          for (int k2 = 0; k2 < sl.count; ++k2) {
            evicted[n_evicted++] = sl.e[k2];
            c->cached_bytes -= sl.e[k2].size;
            --c->cached_count;
          }
          sl.count = 0;
          sl.cls = cls;
        }
        if (fits && sl.count < thread_cache::kPerSlot) {
          sl.e[sl.count++] = {start, sz, seen.span, seen.incarnation, ns};
          c->cached_bytes += sz;
          ++c->cached_count;
          c->unlock();
          if (n_evicted) give_back_entries(*this, evicted, static_cast<std::size_t>(n_evicted));
          return;
        }
        // No room in this cache: the arena takes it (it is ours: cached, no one else frees it).
        c->unlock();
        std::vector<record> empty;
        {
          std::lock_guard lock(m);
          // Cached (ours) to free, never back through live: see the arena path below.
          empty = release_locked(seen.span, ns);
        }
        release_blocks(empty);
        return;
      }
    }
    c->unlock();
  }
  std::vector<record> empty;
  {
    std::lock_guard lock(m);
    empty = free_locked(p, ns, size);
  }
  release_blocks(empty);
}

std::vector<record> pool_state::free_locked(void* p, native_stream ns, std::size_t size) {
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uint32_t i = handed_out.find(start);
  if (i == kNone) {
    auto inside = std::find_if(blocks.begin(), blocks.end(), [&](const block& b) {
      return start >= b.base && start < b.base + b.size;
    });
    if (inside != blocks.end())
      throw error(errc::invalid_value,
                  fmt::format("pool free: {} is not the start of a live allocation of this pool "
                              "(freed already, or inside one)",
                              p));
    auto r = allocations().find(p);
    if (r && r->made_by == origin::pool)
      throw error(errc::invalid_value,
                  fmt::format("pool free: {} belongs to another pool", p));
    throw error(errc::invalid_value,
                fmt::format("pool free: {} is not memory of this pool", p));
  }
  // Live, or cached by a thread (freed already). A thread's cache moves only the incarnation
  // it holds, and compares first: the exchange settles a race between two frees of one piece.
  std::uint64_t seen = spans[i].state.load(std::memory_order_relaxed);
  const auto st = static_cast<span_state>(seen & 0xff);
  if ((st == live || st == exported) && size > spans[i].size)
    throw error(errc::invalid_value,
                fmt::format("pool free: {} holds {} bytes, not {}", p, spans[i].size, size));
  if (st == exported) {
    // Shared through IPC: IPC says whether another process has it open. Asked under the
    // arena's lock, so a second free of the piece waits and then finds it freed.
    const std::uint16_t tag = tag_for(ns);  // what may throw, first
    if (ipc_on_pool_free(piece_locked(i), false) == pool_free_outcome::deferred) {
      // Out of every list, still counted as handed out: no one reuses it until IPC gives it
      // back (pool_release_held), once the last importer closed it.
      spans[i].set(held);
      ipc_marks.at(i).tag = tag;
      ++held_count;
      return {};
    }
    ipc_marks.erase(i);
    spans[i].set(free_span);
    return release_locked(i, ns);
  }
  if (st != live || !spans[i].state.compare_exchange_strong(seen, word(seen >> 8, free_span),
                                                            std::memory_order_acq_rel))
    throw error(errc::invalid_value,
                fmt::format("pool free: {} was freed already (double free)", p));
  // The state stays free from here on: going back to live, even under the lock, would let a
  // second free of the same piece through a thread's cache match it and succeed too.
  return release_locked(i, ns);
}

std::vector<record> pool_state::past_threshold_locked() {
  if (release_threshold == SIZE_MAX || reserved - handed_bytes <= release_threshold) return {};
  (void)reclaim_locked(0);
  const std::size_t keep = handed_bytes > SIZE_MAX - release_threshold
                               ? SIZE_MAX
                               : handed_bytes + release_threshold;
  return take_empty_blocks_locked(keep);
}

void pool_state::flush_caches(bool all, native_stream only) {
  std::lock_guard cl(caches_m);
  for (thread_cache* c : caches) {
    c->lock();
    const thread_cache::drained d = c->drain(all, only);
    c->unlock();
    give_back_entries(*this, d);  // caches_m (54) before the arena (56): in rank order
  }
}

void pool_state::trim(std::size_t keep) {
  check_process("pool trim");
  flush_caches();
  std::vector<record> empty;
  {
    std::lock_guard lock(m);
    (void)reclaim_locked(0, true);
    empty = take_empty_blocks_locked(keep);
  }
  release_blocks(empty);
}

memarea_pool_stats pool_state::stats() {
  std::size_t cached_bytes = 0, cached_count = 0;
  {
    std::lock_guard cl(caches_m);
    for (thread_cache* c : caches) {
      c->lock();
      cached_bytes += c->cached_bytes;
      cached_count += c->cached_count;
      c->unlock();
    }
  }
  std::lock_guard lock(m);
  memarea_pool_stats s{};
  s.bytes_reserved = reserved;
  s.bytes_in_use = handed_bytes - std::min(handed_bytes, cached_bytes);
  s.peak_bytes_reserved = peak_reserved;
  s.peak_bytes_in_use = peak_handed;
  s.driver_allocations = driver_allocations;
  s.largest_free_block = largest_free_locked();
  // Pieces held for other processes (freed while imported) are in use, not live.
  s.live_allocations =
      handed_out.size() - std::min(handed_out.size(), cached_count + held_count);
  return s;
}

void pool_retire_stream(int device, native_stream s) {
  if (!s) return;
  pool_list* list = g_pools.load(std::memory_order_acquire);
  if (!list) return;
  // Pieces freed on s that threads' caches hold go to their arena, under s's tag; then, if any
  // pool used s, one wait for s with no lock held (the driver's destroy does not wait for the
  // stream's work: CUDA's returns at once, and a new stream may get the same handle).
  bool used = false;
  {
    std::lock_guard g(list->m);
    for (auto& [cp, serial] : list->live) {
      (void)serial;
      auto* p = const_cast<pool_state*>(cp);
      p->flush_caches(false, s);
      std::lock_guard lock(p->m);
      used = used || p->tag_of_stream.count(s) != 0;
    }
  }
  if (!used) return;
  auto& gpu = system::get().gpu();
  (void)gpu.stream_synchronize(device, s);
  std::lock_guard g(list->m);
  for (auto& [cp, serial] : list->live) {
    (void)serial;
    auto* p = const_cast<pool_state*>(cp);
    p->flush_caches(false, s);
    std::lock_guard lock(p->m);
    auto it = p->tag_of_stream.find(s);
    if (it == p->tag_of_stream.end()) continue;
    const std::uint16_t t = it->second;
    free_lists& f = p->tags[t];
    std::vector<std::uint32_t> pieces;
    for (int c = 0; c < kLists; ++c)
      for (std::uint32_t i = f.head[c]; i != kNone; i = p->spans[i].free_next) pieces.push_back(i);
    for (std::uint32_t i : pieces) {
      p->list_remove(i);
      p->give_back_locked(i, 0);
    }
    // Pieces held for importers that were freed on s: any stream may take them once given
    // back (s has finished its work, waited for above).
    for (auto& [i, mark] : p->ipc_marks)
      if (p->spans[i].st() == held && mark.tag == t) mark.tag = 0;
    if (f.event) (void)gpu.event_destroy(p->device, f.event);
    f = free_lists{};
    p->tag_of_stream.erase(it);
    try {
      p->retired_tags.push_back(t);
    } catch (...) {
      // The tag stays unused: a few KiB, never wrong.
    }
  }
}

std::uint32_t pool_state::piece_at_locked(std::uintptr_t a) const {
  for (const auto& b : blocks) {
    if (a < b.base || a >= b.base + b.size) continue;
    for (std::uint32_t i = b.first; i != kNone; i = spans[i].phys_next) {
      const span& s = spans[i];
      if (a < s.start) break;
      if (a < s.start + s.size) return s.st() == live || s.st() == exported ? i : kNone;
    }
    return kNone;
  }
  return kNone;
}

namespace {

/// Runs f(pool) with the pool list's and the pool's arena lock held, if the pool (of that
/// serial, when not 0) still lives; returns whether it did.
template <class F>
bool with_pool(const void* pool, std::uint64_t serial, F&& f) {
  auto& list = pools();
  std::lock_guard g(list.m);
  auto* ps = static_cast<const pool_state*>(pool);
  auto it = list.live.find(ps);
  if (it == list.live.end() || (serial && it->second != serial)) return false;
  auto& p = *const_cast<pool_state*>(ps);
  std::lock_guard lock(p.m);
  f(p);
  return true;
}

}  // namespace

std::optional<std::pair<void*, std::size_t>> pool_sub_allocation(const record& r,
                                                                  const void* p) {
  std::optional<std::pair<void*, std::size_t>> out;
  (void)with_pool(r.owner, 0, [&](pool_state& pool) {
    const std::uint32_t i = pool.piece_at_locked(reinterpret_cast<std::uintptr_t>(p));
    if (i != kNone)
      out = std::make_pair(reinterpret_cast<void*>(pool.spans[i].start), pool.spans[i].size);
  });
  return out;
}

pool_piece pool_mark_exported(const record& r, const void* p) {
  pool_piece piece;
  const bool alive = with_pool(r.owner, 0, [&](pool_state& pool) {
    pool.check_process("ipc export");
    const std::uint32_t i = pool.piece_at_locked(reinterpret_cast<std::uintptr_t>(p));
    if (i == kNone)
      throw error(errc::invalid_value,
                  fmt::format("ipc export: {} lies in free memory of a pool (no live allocation "
                              "holds it)",
                              p));
    if (!pool.ipc_marks.count(i)) {
      // The mark first (what may throw), then the state: a span marked exported always has
      // its mark.
      auto mark = pool.ipc_marks.emplace(i, pool_state::ipc_mark{allocations().next_id(), 0}).first;
      // A thread's cache frees without the arena's lock (live -> cached): the exchange
      // settles which came first.
      const std::uint64_t inc = pool.spans[i].incarnation();
      std::uint64_t want = word(inc, live);
      if (!pool.spans[i].state.compare_exchange_strong(want, word(inc, exported),
                                                       std::memory_order_acq_rel)) {
        pool.ipc_marks.erase(mark);
        throw error(errc::invalid_value,
                    fmt::format("ipc export: {} was freed while being exported", p));
      }
    }
    piece = pool.piece_locked(i);
  });
  if (!alive)
    throw error(errc::invalid_value, fmt::format("ipc export: {} is memory of a destroyed pool", p));
  return piece;
}

std::uint64_t pool_export_id(const record& r, const void* p) {
  std::uint64_t id = 0;
  (void)with_pool(r.owner, 0, [&](pool_state& pool) {
    const std::uint32_t i = pool.piece_at_locked(reinterpret_cast<std::uintptr_t>(p));
    if (auto m = i == kNone ? pool.ipc_marks.end() : pool.ipc_marks.find(i);
        m != pool.ipc_marks.end())
      id = m->second.export_id;
  });
  return id;
}

bool pool_still_exported(const pool_piece& piece) {
  bool marked = false;
  (void)with_pool(piece.pool, piece.serial, [&](pool_state& pool) {
    auto m = pool.ipc_marks.find(piece.span);
    marked = m != pool.ipc_marks.end() && m->second.export_id == piece.export_id &&
             pool.spans[piece.span].state.load(std::memory_order_relaxed) ==
                 word(piece.incarnation, exported);
  });
  return marked;
}

void pool_release_held(const pool_piece& piece) {
  std::vector<record> empty;
  (void)with_pool(piece.pool, piece.serial, [&](pool_state& pool) {
    span& s = pool.spans[piece.span];
    auto m = pool.ipc_marks.find(piece.span);
    if (s.state.load(std::memory_order_relaxed) != word(piece.incarnation, held) ||
        m == pool.ipc_marks.end() || m->second.export_id != piece.export_id)
      return;  // never: only IPC gives a held piece back, once
    const std::uint16_t tag = m->second.tag;
    pool.ipc_marks.erase(m);
    --pool.held_count;
    s.set(free_span);
    pool.release_handed_locked(piece.span, tag);
    empty = pool.past_threshold_locked();
  });
  pool_state::release_blocks(empty);
}

namespace {

pool_state* make_pool(int device, unsigned flags, bool host_pool, const memarea_pool_options& o) {
  // The backend starts here, not at the first alloc: alloc reaches it (a host pool's reclaim
  // too) while holding the arena's lock, under which nothing may be built lazily.
  (void)system::get();
  if (o.flags != 0)
    throw error(errc::invalid_value,
                fmt::format("pool create: unknown option flags {:#x} (none are defined)", o.flags));
  std::size_t align = o.alignment ? o.alignment : 256;
  if (align < 16 || align > 4096 || (align & (align - 1)))
    throw error(errc::invalid_value,
                fmt::format("pool create: alignment {} is not a power of two from 16 to 4096",
                            o.alignment));
  if (o.maximum_size && o.initial_size > o.maximum_size)
    throw error(errc::invalid_value,
                fmt::format("pool create: initial size {} exceeds the maximum {}", o.initial_size,
                            o.maximum_size));
  auto p = std::make_unique<pool_state>();
  p->host_pool = host_pool;
  p->alignment = align;
  p->maximum = o.maximum_size;
  p->release_threshold = o.release_threshold;
  p->tags.emplace_back();
  if (host_pool) {
    if (o.host_node < -1)
      throw error(errc::invalid_device,
                  fmt::format("pool create: NUMA node {} is neither a node nor -1", o.host_node));
    p->host_node = o.host_node;
    p->device = MEMAREA_CPU_DEVICE_ID;
    p->kind = MEMAREA_MEMORY_HOST;
  } else {
    validate_area(device, flags, "pool create");
    if ((flags & MEMAREA_AREA_MAPPED) && !(flags & MEMAREA_AREA_HOST))
      throw error(errc::invalid_value,
                  "pool create: a MAPPED area without HOST registers the caller's memory; a "
                  "pool needs an area that allocates");
    p->device = device >= 0 ? device : current_device();
    p->area_flags = flags;
    p->kind = kind_of_flags(flags);
  }
  {
    auto& list = pools();
    std::lock_guard g(list.m);
    p->serial = list.next_serial++;
    p->fork_generation = g_fork_generation.load(std::memory_order_relaxed);
    list.live.emplace(p.get(), p->serial);
  }
  if (o.initial_size) {
    try {
      std::size_t want = 0;
      {
        std::lock_guard lock(p->m);
        want = p->plan_block_locked(o.initial_size);
      }
      if (!want)
        throw error(errc::out_of_memory, "pool create: the initial size exceeds the maximum");
      const record r = p->allocate_block(want);
      std::lock_guard lock(p->m);
      try {
        p->add_block_locked(r);
      } catch (...) {
        pool_state::release_blocks({r});
        throw;
      }
    } catch (...) {
      auto& list = pools();
      std::lock_guard g(list.m);
      list.live.erase(p.get());
      throw;
    }
  }
  return p.release();
}

/// Destroys p: busy (nothing changed) while allocations are live unless forced.
void destroy_pool(pool_state* p, bool force) {
  auto& list = pools();
  {
    std::lock_guard g(list.m);
    if (!list.live.count(p)) throw error(errc::invalid_value, "pool destroy: not a live pool");
    {
      std::lock_guard cl(p->caches_m);
      if (!force) {
        std::size_t cached = 0;
        for (thread_cache* c : p->caches) {
          c->lock();
          cached += c->cached_count;
          c->unlock();
        }
        std::lock_guard lock(p->m);
        const std::size_t live =
            p->handed_out.size() - std::min(p->handed_out.size(), cached + p->held_count);
        if (live)
          throw error(errc::busy,
                      fmt::format("pool destroy: {} allocation(s) are still live; free them "
                                  "first",
                                  live));
      } else if (!p->ipc_marks.empty() && p->fork_generation == g_fork_generation.load()) {
        // Forced: live pieces shared through IPC are freed as if by the user, deferred (never
        // refused) while other processes have them open.
        std::lock_guard lock(p->m);
        std::vector<std::uint32_t> released;
        for (auto& [i, mark] : p->ipc_marks) {
          if (p->spans[i].st() != exported) continue;
          if (ipc_on_pool_free(p->piece_locked(i), true) == pool_free_outcome::deferred) {
            p->spans[i].set(held);
            mark.tag = 0;
            ++p->held_count;
          } else {
            released.push_back(i);
          }
        }
        for (std::uint32_t i : released) p->ipc_marks.erase(i);
      }
      for (thread_cache* c : p->caches) {
        c->lock();
        (void)c->drain();  // its pieces go with their blocks below
        c->pool = nullptr;
        c->unlock();
      }
      p->caches.clear();
    }
    list.live.erase(p);
  }
  // No other thread may use the pool now (its owner destroys it), and none can find it.
  std::vector<record> blocks;
  std::vector<std::pair<record, std::vector<std::uint64_t>>> held_blocks;
  std::vector<native_event> events;
  {
    std::lock_guard lock(p->m);
    for (auto& f : p->tags)
      if (f.event) events.push_back(f.event);
    for (auto& b : p->blocks) {
      // A block with pieces held for other processes is IPC's to free once they close them.
      std::vector<std::uint64_t> held_ids;
      for (std::uint32_t i = b.first; p->held_count && i != kNone; i = p->spans[i].phys_next)
        if (p->spans[i].st() == held) held_ids.push_back(p->ipc_marks.at(i).export_id);
      if (held_ids.empty()) blocks.push_back(b.rec);
      else held_blocks.emplace_back(b.rec, std::move(held_ids));
    }
    p->blocks.clear();
  }
  for (auto& held_block : held_blocks) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const record& r = held_block.first;
    const std::vector<std::uint64_t>& ids = held_block.second;
    // Out of the registry before IPC may free it (its tick can, as soon as it adopts it).
    allocations().erase_if(r.base, [&](const record& x) { return x.id == r.id; });
    bool adopted = false;
    try {
      adopted = p->fork_generation == g_fork_generation.load(std::memory_order_relaxed) &&
                ipc_adopt_pool_block(r, ids);
    } catch (...) {
      // Out of memory: the block is freed now, as if its importers had closed.
    }
    if (adopted) continue;
    blocks.push_back(r);  // its importers closed meanwhile: free it now
  }
  if (p->fork_generation != g_fork_generation.load(std::memory_order_relaxed) && !p->host_pool) {
    // A child of fork() destroying its parent's pool: the blocks and events are the parent's
    // (its context, or memory shared with it). Only the child's records of them go.
    for (const record& r : blocks)
      allocations().erase_if(r.base, [&](const record& x) { return x.id == r.id; });
  } else {
    auto& gpu = system::get().gpu();
    for (native_event e : events) (void)gpu.event_destroy(p->device, e);
    pool_state::release_blocks(blocks);
  }
  delete p;
}

}  // namespace

}  // namespace memarea::detail

// --- C API -----------------------------------------------------------------------------------

struct memarea_pool {
  memarea::detail::pool_state* state;
};

namespace memarea {

namespace {
memarea_pool_options c_options(const pool_options& o) {
  memarea_pool_options c = MEMAREA_POOL_OPTIONS_INIT;
  c.initial_size = o.initial_size;
  c.maximum_size = o.maximum_size;
  c.release_threshold = o.release_threshold;
  c.alignment = o.alignment;
  c.host_node = o.host_node;
  return c;
}
detail::pool_state& state_of(memarea_pool_t h, const char* what) {
  if (!h || !h->state) throw error(errc::invalid_value, fmt::format("{}: pool is NULL", what));
  return *h->state;
}
}  // namespace

namespace detail {
memarea_pool_t pool_create_c(const int* area_device, const unsigned* area_flags,
                             const memarea_pool_options* o) {
  const memarea_pool_options opts = o ? *o : memarea_pool_options MEMAREA_POOL_OPTIONS_INIT;
  auto* h = new memarea_pool{nullptr};
  try {
    h->state = area_device ? make_pool(*area_device, *area_flags, false, opts)
                           : make_pool(-1, 0, true, opts);
  } catch (...) {
    delete h;
    throw;
  }
  return h;
}
void pool_destroy_c(memarea_pool_t h, bool force) {
  auto& s = state_of(h, "pool destroy");
  destroy_pool(&s, force);
  delete h;
}
void* pool_alloc_c(memarea_pool_t h, std::size_t size, memarea_stream_t s) {
  return state_of(h, "pool alloc").alloc(size, s);
}
void pool_free_c(memarea_pool_t h, void* p, memarea_stream_t s) {
  state_of(h, "pool free").free(p, s);
}
void pool_free_sized_c(memarea_pool_t h, void* p, std::size_t size) {
  if (size == 0) throw error(errc::invalid_value, "area munmap: size is 0");
  state_of(h, "area munmap").free(p, nullptr, size);
}
void pool_area_of_c(memarea_pool_t h, int* device, unsigned* flags) {
  auto& s = state_of(h, "area create pooled");
  if (s.host_pool)
    throw error(errc::invalid_value,
                "area create pooled: a pool of pageable host memory is not an area's (use "
                "memarea_host_malloc's pool directly)");
  *device = s.device;
  *flags = s.area_flags;
}
void pool_trim_c(memarea_pool_t h, std::size_t keep) { state_of(h, "pool trim").trim(keep); }
memarea_pool_stats pool_stats_c(memarea_pool_t h) { return state_of(h, "pool stats").stats(); }
}  // namespace detail

pool::pool(const area& a, const pool_options& o) {
  const int d = a.device();
  const unsigned f = a.flags();
  const memarea_pool_options c = c_options(o);
  handle_ = detail::pool_create_c(&d, &f, &c);
}

pool pool::host(const pool_options& o) {
  const memarea_pool_options c = c_options(o);
  return pool(detail::pool_create_c(nullptr, nullptr, &c));
}

pool::~pool() {
  if (handle_) {
    try {
      detail::pool_destroy_c(handle_, true);
    } catch (...) {
      // Only a broken pool state refuses a forced destroy: nothing more can be given back.
    }
  }
}

pool::pool(pool&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
pool& pool::operator=(pool&& other) noexcept {
  if (this != &other) {
    pool old(std::exchange(handle_, std::exchange(other.handle_, nullptr)));
  }  // old's destructor gives the pool this object held back
  return *this;
}

void* pool::allocate(std::size_t size, memarea_stream_t s) {
  return detail::pool_alloc_c(handle_, size, s);
}
void pool::deallocate(void* ptr, memarea_stream_t s) { detail::pool_free_c(handle_, ptr, s); }
void pool::trim(std::size_t keep_bytes) { detail::pool_trim_c(handle_, keep_bytes); }
area pool::as_area() const {
  int device = -1;
  unsigned flags = 0;
  detail::pool_area_of_c(handle_, &device, &flags);
  return area(device, flags, handle_);
}
pool_stats pool::stats() const { return detail::pool_stats_c(handle_); }
void pool::destroy() {
  detail::pool_destroy_c(handle_, false);
  handle_ = nullptr;
}

pool_buffer& pool_buffer::operator=(pool_buffer&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = o.pool_;
    ptr_ = o.ptr_;
    size_ = o.size_;
    stream_ = o.stream_;
    o.ptr_ = nullptr;
  }
  return *this;
}

void pool_buffer::reset() noexcept {
  if (!ptr_) return;
  detail::release_or_report(ptr_, size_, [&] { detail::pool_free_c(pool_, ptr_, stream_); });
  ptr_ = nullptr;
}

errc pool_buffer::try_reset(std::string* message) noexcept {
  if (!ptr_) return errc::success;
  const errc e = detail::try_release([&] { detail::pool_free_c(pool_, ptr_, stream_); }, message);
  if (e == errc::success) ptr_ = nullptr;
  return e;
}

}  // namespace memarea
