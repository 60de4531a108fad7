// Pools: stream-ordered sub-allocation from blocks of an area's memory (docs/pools.md).
//
// This file: making and destroying pools, the list of live pools, the calls behind the C API
// and the C++ classes, and an area's allocation calls (an area made by pool::as_area draws
// from its pool). The pool's state, how the work is laid out, and the other files of pools:
// pool_state.hpp.
#include "core/pool/pool_state.hpp"
#include "core/memory/tracking.hpp"

#include "core/memory/area_impl.hpp"
#include "core/memory/host_impl.hpp"
#include "core/memory/memory_limit.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "testing/memarea_testing.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/owner.hpp>

#include <mutex>
#include <utility>

namespace memarea::detail {

std::atomic<pool_list*> pool_internal::g_pools{nullptr};
pool_list& pool_internal::pools() {
  return made_once([] {
    auto* l = new pool_list();
    g_pools.store(l, std::memory_order_release);
    // From now on a stream's destruction goes by the pools (those that used it wait for it).
    stream_events::before_destroy.store(&pool_retire_stream, std::memory_order_release);
    // And the out-of-memory path gives back what the device's pools cache, naming the largest.
    static constexpr limits::pool_hooks hooks{&pool_trim_device, &pool_largest_users};
    limits::g_pool_hooks.store(&hooks, std::memory_order_release);
    return l;
  });
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
    if (p->kind == MEMAREA_MEMORY_DEVICE || p->kind == MEMAREA_MEMORY_MANAGED)
      p->usage_device = p->device;
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
        want = p->plan_block_locked(o.initial_size, shared_shelf);
      }
      if (!want)
        throw error(errc::out_of_memory, "pool create: the initial size exceeds the maximum");
      const record r = p->allocate_block(want);
      std::lock_guard lock(p->m);
      try {
        p->add_block_locked(r, shared_shelf);
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
            p->handed_out.size() -
            std::min(p->handed_out.size(), cached + p->held_count + p->pending_frees.size());
        if (live)
          throw error(errc::busy,
                      fmt::format("pool destroy: {} allocation(s) are still live; free them "
                                  "first",
                                  live));
      } else if (!p->ipc_marks.empty() && p->fork_generation == g_fork_generation.load()) {
        // Forced: live pieces shared with other processes are freed as if by the user,
        // deferred (never refused) while other processes have them open. Marks exist only
        // once the observer (which marks them) is set.
        memory_observer* watcher = allocations().observer();
        std::lock_guard lock(p->m);
        std::vector<std::uint32_t> released;
        for (auto& [i, mark] : p->ipc_marks) {
          if (p->spans[i].st() != exported) continue;
          if (watcher &&
              watcher->before_piece_free(p->piece_locked(i), true) == free_outcome::deferred) {
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
        c->clear();  // its pieces go with their blocks below
        c->pool = nullptr;
        c->unlock();
      }
      p->caches.clear();
    }
    list.live.erase(p);
  }
  // A forced destroy frees live pieces with no free of each: their records go now, while p's
  // address still names this pool.
  tracking::forget_pieces_of(p);
  // No other thread may use the pool now (its owner destroys it), and none can find it.
  std::vector<record> blocks;
  std::vector<std::pair<record, std::vector<std::uint64_t>>> held_blocks;
  std::vector<native_event> events;
  {
    std::lock_guard lock(p->m);
    for (auto& f : p->tags)
      if (f.event) events.push_back(f.event);
    if (p->fork_generation == g_fork_generation.load(std::memory_order_relaxed)) {
      const std::vector<native_event> more = p->take_events_locked();
      events.insert(events.end(), more.begin(), more.end());
    }
    for (auto& b : p->blocks) {
      // A block with pieces held for other processes is the observer's to free once they
      // close them.
      std::vector<std::uint64_t> held_ids;
      for (std::uint32_t i = b.first; p->held_count && i != kNone; i = p->spans[i].phys_next)
        if (p->spans[i].st() == held) held_ids.push_back(p->ipc_marks.at(i).export_id);
      if (held_ids.empty()) blocks.push_back(b.rec);
      else held_blocks.emplace_back(b.rec, std::move(held_ids));
    }
    p->blocks.clear();
    // Pieces still out (a forced destroy, held ones) go with their blocks.
    usage::add(p->usage_device, usage::pool_handed, -static_cast<std::int64_t>(p->handed_bytes));
    p->handed_bytes = 0;
  }
  for (auto& held_block : held_blocks) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const record& r = held_block.first;
    const std::vector<std::uint64_t>& ids = held_block.second;
    // Out of the registry before the observer may free it (IPC's tick can, as soon as it
    // adopts it).
    allocations().erase_if(r.base, [&](const record& x) { return x.id == r.id; });
    bool adopted = false;
    try {
      memory_observer* watcher = allocations().observer();
      adopted = p->fork_generation == g_fork_generation.load(std::memory_order_relaxed) &&
                watcher && watcher->adopt_block(r, ids);
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
  auto* h = new memarea_pool{};
  try {
    h->state = area_device ? make_pool(*area_device, *area_flags, false, opts)
                           : make_pool(-1, 0, true, opts);
  } catch (...) {
    delete h;
    throw;
  }
  return h;
}
pool_state& testing::pool_state_of(memarea_pool_t h) { return state_of(h, "pool"); }
void pool_destroy_c(memarea_pool_t h, bool force) {
  auto& s = state_of(h, "pool destroy");
  destroy_pool(&s, force);
  delete h;
}
void* pool_alloc_c(memarea_pool_t h, std::size_t size, memarea_stream_t s) {
  pool_state& st = state_of(h, "pool alloc");
  void* p = st.alloc(size, s);
  tracking::on_alloc(p, size, st.kind, st.usage_device, &st, s, true);
  return p;
}
void pool_free_c(memarea_pool_t h, void* p, memarea_stream_t s) {
  state_of(h, "pool free").free(p, s);
  tracking::on_free(p);
}
void pool_record_stream_c(memarea_pool_t h, void* p, memarea_stream_t s) {
  state_of(h, "pool record_stream").record_stream(p, s);
}
void pool_free_sized_c(memarea_pool_t h, void* p, std::size_t size, memarea_stream_t s,
                       const char* what) {
  if (size == 0) throw error(errc::invalid_value, fmt::format("{}: size is 0", what));
  state_of(h, what).free(p, s, size);
  tracking::on_free(p);
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
  // A forced destroy throws only for a handle that is not a live pool (a pool object never
  // holds one) or when the host is out of memory: recorded under the handle, never dropped,
  // though the pool may be half gone by then and nothing more can be given back.
  if (handle_)
    detail::release_or_report(handle_, 0,
                              [&] { detail::pool_destroy_c(detail::handle_of(handle_), true); });
}

pool::pool(pool&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
pool& pool::operator=(pool&& other) noexcept {
  if (this != &other) {
    pool old(std::exchange(handle_, std::exchange(other.handle_, nullptr)));
  }  // old's destructor gives the pool this object held back
  return *this;
}

void* pool::allocate(std::size_t size, stream_view s) {
  return detail::pool_alloc_c(detail::handle_of(handle_), size, to_c(s));
}
void pool::deallocate(void* ptr, stream_view s) {
  detail::pool_free_c(detail::handle_of(handle_), ptr, to_c(s));
}
void pool::record_stream(void* ptr, stream_view s) {
  detail::pool_record_stream_c(detail::handle_of(handle_), ptr, to_c(s));
}
void pool::trim(std::size_t keep_bytes) { detail::pool_trim_c(detail::handle_of(handle_), keep_bytes); }
area pool::as_area() const {
  int device = -1;
  unsigned flags = 0;
  detail::pool_area_of_c(detail::handle_of(handle_), &device, &flags);
  return area(device, flags, handle_);
}

pool_stats pool::stats() const { return from_c(detail::pool_stats_c(detail::handle_of(handle_))); }
void pool::destroy() {
  detail::pool_destroy_c(detail::handle_of(handle_), false);
  handle_ = nullptr;
}

void pool_release::free(void* ptr, std::size_t) const {
  detail::pool_free_c(detail::handle_of(pool), ptr, to_c(stream));
}

// An area's allocation calls sit here, above areas and pools: an area made by as_area draws from
// its pool, any other through area_mmap.
void* area::mmap(std::size_t size, const mmap_options& options) const {
  if (pool_) {
    if (options.device < -1) detail::system::get().check_device(options.device, "area mmap");
    if (options.device >= 0 || options.ptr || options.tag)
      throw error(errc::invalid_value,
                  "area mmap: a pooled area takes no per-call device, pointer or tag");
    return detail::pool_alloc_c(detail::handle_of(pool_), size, nullptr);
  }
  return detail::area_mmap(device_, flags_, size, options.device, options.ptr, options.tag);
}

void area::munmap(void* ptr, std::size_t size) const {
  if (pool_) return detail::pool_free_sized_c(detail::handle_of(pool_), ptr, size);
  detail::area_munmap(device_, flags_, ptr, size);
}

buffer area::allocate(std::size_t size, const mmap_options& options) const {
  return buffer(*this, mmap(size, options), size);
}

}  // namespace memarea
