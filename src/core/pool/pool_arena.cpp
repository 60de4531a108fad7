// Pools' arena: blocks from the driver (their size, their registry records, giving them
// back), stream-ordered reclaim (spans freed on a stream become every stream's once an event
// recorded after their free has completed), trim, statistics, and retiring a stream. See
// pool_state.hpp for the files of pools.
#include "core/pool/pool_state.hpp"

#include "core/memory/area_impl.hpp"
#include "core/memory/host_impl.hpp"
#include "core/system.hpp"

#include <algorithm>
#include <mutex>

namespace memarea::detail {

bool pool_state::reclaim_locked(std::uint16_t except, bool wait) {
  auto& gpu = system::get().gpu();
  bool moved = !pending_frees.empty() && settle_pending_locked(wait);
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
    for_each_free(f, [&](std::uint32_t i) {
      if (spans[i].freed_seq <= safe_up_to) ready.push_back(i);
    });
    for (std::uint32_t i : ready) {
      list_remove(i);
      give_back_locked(i, 0);
      moved = true;
    }
  }
  return moved;
}

std::size_t pool_state::growth_locked(shelf on) const {
  return std::min(shelf_reserved[on] / 16, kMaxGrowth);
}

bool pool_state::cut_up_locked(shelf on, std::size_t n, std::uint16_t tag) const {
  const std::size_t free_bytes = tags[0].bytes[on] + (tag != 0 ? tags[tag].bytes[on] : 0);
  return free_bytes >= std::max({n, kMinBlock, growth_locked(on)});
}

std::size_t pool_state::plan_block_locked(std::size_t n, shelf on, bool cut_up) const {
  // Every driver's allocation is at least 256-byte aligned (sim and host: page-aligned): only
  // a larger alignment may need room to move the first piece up.
  const std::size_t pad = alignment > 256 ? alignment : 0;
  // Geometric: each block at least 1/16 of what its shelf has reserved (at most 1 GiB), so
  // the number of blocks grows with the logarithm of the pool's size, and the slack stays
  // small. 1/16, not 1/32: over eight seeds of the mixed trace the peak reserved spread alike
  // (1.14-1.22x the peak live either way), with 28% fewer driver allocations (docs/pools.md).
  // A shelf that is cut up grows by half that: it lacks a fit more than room, and a full step
  // would mostly add slack, replay after replay of a program's same steps (the bench's "12
  // replays on one pool"). Half, not the request alone: on the mixed trace the request alone
  // took a quarter more driver allocations, which a pool's first round pays in driver calls.
  const std::size_t step = cut_up ? growth_locked(on) / 2 : growth_locked(on);
  std::size_t want = round_up(std::max({n + pad, kMinBlock, step}), kMinBlock);
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
  auto changed = allocations().change(base, [&](record& r) {
    r.made_by = origin::pool;
    r.owner = this;
  });
  if (!changed) throw error(errc::unknown, "pool: a new block has no record");
  return *changed;
}

void pool_state::add_block_locked(const record& r, shelf on) {
  block b;
  b.base = reinterpret_cast<std::uintptr_t>(r.base);
  b.size = r.size;
  b.on = on;
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
  s.on = on;
  b.first = i;
  blocks.push_back(b);
  list_insert(i, 0);
  reserved += b.size;
  shelf_reserved[on] += b.size;
  peak_reserved = std::max(peak_reserved, reserved);
  ++driver_allocations;
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
    shelf_reserved[b.on] -= b.size;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return out;
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

std::size_t pool_thread_cached_bytes(int device) {
  pool_list* list = g_pools.load(std::memory_order_acquire);
  if (!list) return 0;
  std::size_t n = 0;
  std::lock_guard g(list->m);
  for (auto& [cp, serial] : list->live) {
    (void)serial;
    if (cp->usage_device != device) continue;
    auto* p = const_cast<pool_state*>(cp);
    std::lock_guard cl(p->caches_m);
    for (thread_cache* c : p->caches) {
      c->lock();
      n += c->cached_bytes;
      c->unlock();
    }
  }
  return n;
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
  s.live_allocations = handed_out.size() -
                       std::min(handed_out.size(), cached_count + held_count + pending_frees.size());
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
      for (auto& [i, use] : p->used_on) {
        (void)i;
        used = used || std::find(use.streams.begin(), use.streams.end(), s) != use.streams.end();
      }
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
    // Pieces that recorded s (record_stream) forget it: their frees need not wait for a stream
    // that has passed everything queued on it (waited for above), and may not be asked later.
    for (auto& [i, use] : p->used_on) {
      (void)i;
      std::erase(use.streams, s);
    }
    auto it = p->tag_of_stream.find(s);
    if (it == p->tag_of_stream.end()) continue;
    const std::uint16_t t = it->second;
    free_lists& f = p->tags[t];
    std::vector<std::uint32_t> pieces;
    p->for_each_free(f, [&](std::uint32_t i) { pieces.push_back(i); });
    for (std::uint32_t i : pieces) {
      p->list_remove(i);
      p->give_back_locked(i, 0);
    }
    // Pieces held for importers that were freed on s: any stream may take them once given
    // back (s has finished its work, waited for above).
    for (auto& [i, mark] : p->ipc_marks)
      if (p->spans[i].st() == held && mark.tag == t) mark.tag = 0;
    // Pieces freed on s that wait for other streams: to every stream's memory once they are
    // done (s has passed their frees), for t may go to another stream now.
    for (auto& pf : p->pending_frees)
      if (pf.tag == t) pf.tag = 0;
    if (f.event) (void)gpu.event_destroy(p->device, f.event);
    f = free_lists{};
    p->tag_of_stream.erase(it);
    p->tag_memo.valid = false;
    try {
      p->retired_tags.push_back(t);
    } catch (...) {
      // The tag stays unused: a few KiB, never wrong.
    }
  }
}

}  // namespace memarea::detail
