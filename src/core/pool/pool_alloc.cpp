// Pools' alloc and free (see pool_state.hpp for the files of pools). A free and re-allocation
// of a like size on one thread stay in that thread's cache and touch no shared line; the rest
// goes to the arena's free lists under its lock. Kept in one translation unit with the thread
// cache, so that the fast path stays as it was compiled before the split.
#include "core/pool/pool_state.hpp"

#include "core/memory/area_impl.hpp"
#include "core/stream_impl.hpp"

#include <chrono>
#include <mutex>
#include <thread>

namespace memarea::detail {

namespace {

/// The calling thread's caches (one per pool it used); given back at thread exit.
struct thread_caches {
  std::vector<thread_cache*> v;
  ~thread_caches();
};
thread_local thread_caches t_caches;
/// The cache this thread used last. A trivial thread_local of its own: the fast path reads it
/// with no guard of t_caches' first use (which registers t_caches' destructor). Set only after
/// t_caches was used, and cleared by its destructor.
thread_local thread_cache* t_last_cache = nullptr;

[[gnu::noinline]] thread_cache* cache_for_slow(pool_state& p) {
  for (thread_cache* x : t_caches.v)
    if (x->pool.load(std::memory_order_relaxed) == &p && x->serial == p.serial)
      return t_last_cache = x;
  // Caches of destroyed pools go now. destroy_pool cleared pool under the cache's flag and
  // touches the cache no more once it let go of the flag: taking the flag waits for that.
  std::erase_if(t_caches.v, [](thread_cache* x) {
    x->lock();
    const bool dead = x->pool.load(std::memory_order_relaxed) == nullptr;
    x->unlock();
    if (dead) delete x;
    return dead;
  });
  t_last_cache = nullptr;
  auto fresh = std::make_unique<thread_cache>();
  fresh->pool = &p;
  fresh->serial = p.serial;
  fresh->recent_shift = std::countr_zero(p.alignment);
  // What may throw, first: once the pool lists the cache, this thread must hold it too.
  t_caches.v.reserve(t_caches.v.size() + 1);
  {
    std::lock_guard lock(p.caches_m);
    p.caches.push_back(fresh.get());
  }
  t_caches.v.push_back(fresh.get());
  return t_last_cache = fresh.release();
}

inline thread_cache* cache_for(pool_state& p) {
  thread_cache* c = t_last_cache;
  if (c && c->pool.load(std::memory_order_relaxed) == &p && c->serial == p.serial) [[likely]]
    return c;
  return cache_for_slow(p);
}

/// Returns entries taken out of a cache to its pool's arena.
void give_back_entries(pool_state& p, const thread_cache::entry* es, std::size_t n) {
  if (n == 0) return;
  std::lock_guard lock(p.m);
  for (std::size_t k = 0; k < n; ++k) {
    const thread_cache::entry& e = es[k];
    // Straight from cached to free (never through live, which a stale entry of this
    // incarnation elsewhere could match): only the cache that held it moves it.
    std::uint16_t tag = 0;
    try {
      tag = p.tag_for(e.stream);
    } catch (...) {
      // No tag can be made for the stream it was freed on (no host memory, or too many
      // streams). Once that stream has run everything queued, any stream may take the piece
      // (tag 0). Callers hold locks, so nothing waits here. A stream still busy leaves the
      // piece stranded, never handed out unordered: in no list and no cache, counted live, so
      // only a forced destroy (C++ pool's destructor) ends the pool. Not yet fixed: a list of
      // such pieces that reclaim_locked settles once their stream is idle.
      if (!system::get().gpu().stream_query(p.device, e.stream).ok()) continue;
    }
    std::uint64_t want = word(e.incarnation, cached);
    if (!p.spans[e.span].state.compare_exchange_strong(want, word(e.incarnation, free_span)))
      continue;  // never
    p.release_handed_locked(e.span, tag);
  }
}
/// Takes every entry out of c (or those freed on only) and gives them back, in batches: the
/// cache's flag is held for one batch at a time and never across the arena's lock.
void drain_into_arena(pool_state& p, thread_cache& c, bool all, native_stream only) {
  constexpr std::size_t kBatch = 128;
  thread_cache::entry es[kBatch];
  // The owner may cache more meanwhile: at most a full cache's worth of rounds.
  for (std::uint32_t round = 0; round <= thread_cache::kEntries / kBatch; ++round) {
    c.lock();
    const std::size_t n = c.drain(es, kBatch, all, only);
    c.unlock();
    give_back_entries(p, es, n);
    if (n < kBatch) return;
  }
}

thread_caches::~thread_caches() {
  if (v.empty()) return;
  auto& list = pools();
  std::lock_guard g(list.m);
  for (thread_cache* c : v) {
    pool_state* p = c->pool;
    auto it = p ? list.live.find(p) : list.live.end();
    if (p && it != list.live.end() && it->second == c->serial) {
      // Under caches_m (and the pool list's lock) no flush, trim or destroy reaches c, and
      // this thread caches into it no more: its entries go back in batches, with nothing
      // allocated (caches_m ranks below the arena's lock).
      std::lock_guard cl(p->caches_m);
      std::erase(p->caches, c);
      constexpr std::size_t kBatch = 128;
      thread_cache::entry es[kBatch];
      std::size_t n = kBatch;
      while (n == kBatch) {
        c->lock();
        n = c->drain(es, kBatch);
        c->unlock();
        try {
          give_back_entries(*p, es, n);
        } catch (...) {
          // At thread exit nothing can report it; those spans stay cached until the pool goes.
        }
      }
      c->lock();
      c->pool = nullptr;
      c->unlock();
    }
    delete c;
  }
  v.clear();
  t_last_cache = nullptr;
}

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

/// Counts the fork()s this process descends from: a pool made before one belongs to the parent.
std::atomic<std::uint64_t> pool_internal::g_fork_generation{0};

// Blocks go back to the driver here, beside free, which calls this after every free that
// reached the arena (most often with nothing to give back): in one translation unit with it.
void pool_state::release_blocks(const std::vector<record>& rs) {
  if (rs.empty()) return;
  memory_observer* watcher = allocations().observer();
  for (const record& r : rs) {
    if (watcher) watcher->forget_block(r.id);
    allocations().erase_if(r.base, [&](const record& x) { return x.id == r.id; });
    (void)release(r);  // a driver that refuses a free keeps the memory; the pool forgets it
  }
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
    thread_cache::entry got;
    if (c->take(classes[0], n, ns, &got) ||
        (classes[1] != classes[0] && c->take(classes[1], n, ns, &got))) {
      // A new incarnation: a stale entry for the last one can no longer free it.
      const std::uint64_t inc = got.incarnation + 1;
      spans[got.span].state.store(word(inc, live), std::memory_order_relaxed);
      spans[got.span].requested.store(size, std::memory_order_relaxed);
      c->recents[c->recent_slot(got.start)] = {got.start, got.span, inc};
      c->unlock();
      return reinterpret_cast<void*>(got.start);
    }
    c->unlock();
  }
  std::uint32_t i = kNone;
  std::uintptr_t start = 0;
  std::uint64_t inc = 0;
  {
    std::lock_guard lock(m);
    const std::uint16_t tag = tag_for(ns);
    // Pieces whose other streams have completed go back first, so that their own stream finds
    // them (a query per event, only while some wait).
    if (!pending_frees.empty()) (void)settle_pending_locked(false);
    i = take_locked(n, tag);
    if (i == kNone && reclaim_locked(tag)) i = take_locked(n, tag);
    // A pool at its maximum takes from the other shelf here, without the slow path's flush.
    if (i == kNone && plan_block_locked(n, shelf_for(n)) == 0) i = take_locked(n, tag, true);
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
        // A shelf that holds as much free as a new block would add, in spans that do not fit,
        // lacks a fit more than room: the other shelf's spans first, then a smaller block.
        const bool cut_up = i == kNone && cut_up_locked(shelf_for(n), n, tag);
        if (cut_up) i = take_locked(n, tag, true);
        if (i == kNone) want = plan_block_locked(n, shelf_for(n), cut_up);
        if (i == kNone && want == 0) {
          // Past the maximum: the other shelf's room first. A stream that freed memory may be
          // idle, its event only just recorded: up to 100 us for that, in this failing path
          // only.
          i = take_locked(n, tag, true);
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
          while (i == kNone && std::chrono::steady_clock::now() < until) {
            if (reclaim_locked(tag) && (i = take_locked(n, tag, true)) != kNone) break;
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
          if (e.status() != errc::out_of_memory) throw;
          // The driver is out of memory: the other shelf's room first.
          if ((i = take_locked(n, tag_for(ns), true)) != kNone) {
            start = spans[i].start;
            inc = spans[i].incarnation();
            break;
          }
          if (freed_for_retry)
            throw error(errc::out_of_memory,
                        fmt::format("pool alloc of {} bytes: {} ({})", size, e.what(),
                                    describe_locked()));
          // Then give back what this pool holds empty (of streams that have passed their
          // frees: no waiting here), and once more.
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
        add_block_locked(r, shelf_for(n));
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
  spans[i].requested.store(size, std::memory_order_relaxed);
  c->lock();
  c->recents[c->recent_slot(start)] = {start, i, inc};
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
  // Pieces used on other streams, and frees on the per-thread default stream, wait for events
  // (pool_streams.cpp); one load of a counter when no piece is.
  if ((is_per_thread(ns) || stream_uses.load(std::memory_order_relaxed) != 0) &&
      free_after_streams(p, ns, size)) [[unlikely]]
    return;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  thread_cache* c = cache_for(*this);
  c->lock();
  thread_cache::recent& r = c->recents[c->recent_slot(start)];
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
        c->recents[c->recent_slot(start)] = seen;
        c->unlock();
        throw error(errc::invalid_value,
                    fmt::format("pool free: {} holds {} bytes, not {}", p, sz, size));
      }
      cache_freed(c, start, seen.span, seen.incarnation, sz, ns);
      return;
    }
  }
  c->unlock();
  // Not among this thread's recent pieces: another thread's, or its slot went to a later
  // piece (slots are by address). A live piece is cached all the same: what a free does must
  // not hang on where the driver put the blocks, or the pool's fit would too.
  std::uint32_t i = kNone;
  std::uint64_t inc = 0;
  std::size_t sz = 0;
  {
    std::vector<record> empty;
    {
      std::lock_guard lock(m);
      const std::uint32_t k = handed_out.find(start);
      const std::uint64_t seen = k == kNone ? 0 : spans[k].state.load(std::memory_order_relaxed);
      // A pool with a release threshold caches only what the threshold would keep anyway: a
      // larger piece goes to the arena at once, under this one lock.
      const bool cacheable =
          k != kNone && (release_threshold == SIZE_MAX ||
                         spans[k].size <= std::min(thread_cache::kMaxBytes, release_threshold));
      if (cacheable && static_cast<span_state>(seen & 0xff) == live && size <= spans[k].size) {
        // What may throw, first: the stream's tag exists before the piece moves (a refused
        // free below makes none).
        (void)tag_for(ns);
        i = k;
        inc = seen >> 8;
        sz = spans[k].size;
      } else {
        empty = free_locked(p, ns, size);  // refusals, exported pieces, double frees
      }
    }
    if (i == kNone) {
      release_blocks(empty);
      return;
    }
  }
  // Cached under this thread's cache flag, so that no flush, statistics or fork() finds it
  // cached in no cache. The exchange fails if the piece was freed since it was found (and
  // perhaps handed out again: a later incarnation); then the arena decides.
  c->lock();
  std::uint64_t want = word(inc, live);
  if (spans[i].state.compare_exchange_strong(want, word(inc, cached), std::memory_order_acq_rel)) {
    cache_freed(c, start, i, inc, sz, ns);
    return;
  }
  c->unlock();
  std::vector<record> empty;
  {
    std::lock_guard lock(m);
    empty = free_locked(p, ns, size);
  }
  release_blocks(empty);
}

void pool_state::cache_freed(thread_cache* c, std::uintptr_t start, std::uint32_t i,
                             std::uint64_t inc, std::size_t sz, native_stream ns) {
  const int cls = insert_class(sz);
  // A pool with a release threshold caches only what the threshold would keep anyway.
  const std::size_t limit = std::min(thread_cache::kMaxBytes, release_threshold);
  if (c->has_room(sz, limit, release_threshold == SIZE_MAX)) {
    c->put(cls, {start, sz, i, inc, ns});
    c->unlock();
    return;
  }
  // No room: pieces of other classes make room, a few each time (the flag is held briefly),
  // so that the cache follows the sizes in use; a larger piece than the cache takes beside
  // others fits only in an empty cache, and makes no room.
  thread_cache::entry evicted[thread_cache::kEvictBatch];
  const int n_evicted =
      sz <= std::min(limit, thread_cache::kMaxPiece) ? c->evict_for(cls, sz, limit, evicted) : 0;
  if (c->has_room(sz, limit, release_threshold == SIZE_MAX)) {
    c->put(cls, {start, sz, i, inc, ns});
    c->unlock();
    give_back_entries(*this, evicted, static_cast<std::size_t>(n_evicted));
    return;
  }
  // Still no room: the arena takes it (it is ours: cached, no one else frees it).
  c->unlock();
  give_back_entries(*this, evicted, static_cast<std::size_t>(n_evicted));
  std::vector<record> empty;
  {
    std::lock_guard lock(m);
    std::uint16_t tag = 0;
    try {
      tag = tag_for(ns);  // a stream new to this pool: its tag may not be made (out of memory)
    } catch (...) {
      // Nothing changed yet: the piece is live again, as before this free, which reports why.
      spans[i].state.store(word(inc, live), std::memory_order_relaxed);
      throw;
    }
    // Cached (ours) to free, never back through live: see free_locked.
    release_handed_locked(i, tag);
    empty = past_threshold_locked();
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
    // Shared with other processes: the registry's observer (which marked it) says whether
    // another process has it open. Asked under the arena's lock, so a second free of the
    // piece waits and then finds it freed.
    const std::uint16_t tag = tag_for(ns);  // what may throw, first
    memory_observer* watcher = allocations().observer();
    if (watcher && watcher->before_piece_free(piece_locked(i), false) == free_outcome::deferred) {
      // Out of every list, still counted as handed out: no one reuses it until the observer
      // gives it back (pool_release_held), once the last importer closed it.
      spans[i].set(held);
      ipc_marks.at(i).tag = tag;
      ++held_count;
      return {};
    }
    ipc_marks.erase(i);
    spans[i].set(free_span);
    return release_locked(i, tag);
  }
  // The stream's tag before the exchange: once the piece is free it must reach a list, and
  // making a tag may throw (no host memory, too many streams), which then changes nothing.
  const std::uint16_t tag = st == live ? tag_for(ns) : 0;
  if (st != live || !spans[i].state.compare_exchange_strong(seen, word(seen >> 8, free_span),
                                                            std::memory_order_acq_rel))
    throw error(errc::invalid_value,
                fmt::format("pool free: {} was freed already (double free)", p));
  // The state stays free from here on: going back to live, even under the lock, would let a
  // second free of the same piece through a thread's cache match it and succeed too.
  return release_locked(i, tag);
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
  // caches_m (54) before the arena (56): in rank order.
  for (thread_cache* c : caches) drain_into_arena(*this, *c, all, only);
}

}  // namespace memarea::detail
