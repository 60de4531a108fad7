// Pools' pieces as others see them: lookup() of the live piece that holds a pointer, and
// pieces shared with other processes (marked exported, by the registry's observer: IPC; a free
// while another process has one open holds it back until the observer gives it back). See
// pool_state.hpp for the files of pools.
//
// Also the public lookup() of any pointer, which sits here, above areas and pools: a pool's
// block answers with its live piece, a record the registry's observer owns (another process's
// memory it mapped) with what the observer says, any other record with itself.
#include "core/pool/pool_state.hpp"

#include "core/memory/memory_observer.hpp"
#include "core/system.hpp"

#include <memarea/pointer.hpp>

#include <algorithm>
#include <mutex>

namespace memarea::detail {

std::uint32_t pool_state::piece_at_locked(std::uintptr_t a) const {
  // The start of a piece (what allocate returned: the usual argument of lookup and export) is
  // one hash lookup; only a pointer inside a piece walks its block's spans in address order.
  if (const std::uint32_t i = handed_out.find(a); i != kNone)
    return spans[i].st() == live || spans[i].st() == exported ? i : kNone;
  for (const auto& b : blocks)
    if (a >= b.base && a < b.base + b.size) return walk_to_locked(b, a);
  return kNone;
}

std::uint32_t pool_state::walk_to_locked(const block& b, std::uintptr_t a) const {
  // The walk starts from an anchor: a span that started in a's region, or in one of the few
  // before it, when a walk last passed, so that it crosses a region's pieces, not the block's.
  // Anchors are never updated by allocations and frees (their hot paths stay as they are): a
  // span merged away since is unused (drop_span), and one made again elsewhere starts outside
  // this block or after a; any other span still in the block's chain is a valid start.
  const int shift = std::max(12, floor_log2(b.size - 1) + 1 - 10);  // at most 1,024 regions
  const std::size_t regions = ((b.size - 1) >> shift) + 1;
  if (b.anchors.size() != regions) b.anchors.assign(regions, kNone);
  const std::size_t k = (a - b.base) >> shift;
  std::uint32_t from = b.first;
  for (std::size_t j = k + 1, tries = 0; j-- > 0 && tries < 8; ++tries) {
    const std::uint32_t h = b.anchors[j];
    if (h == kNone || h >= spans.size()) continue;
    const span& s = spans[h];
    if (s.st() != unused && s.start >= b.base && s.start <= a) {
      from = h;
      break;
    }
  }
  std::size_t marked = regions;  // the region whose anchor this walk set last
  for (std::uint32_t i = from; i != kNone; i = spans[i].phys_next) {
    const span& s = spans[i];
    if (a < s.start) break;
    if (const std::size_t r = (s.start - b.base) >> shift; r != marked) {
      b.anchors[r] = i;  // the first span of region r this walk met
      marked = r;
    }
    if (a < s.start + s.size) return s.st() == live || s.st() == exported ? i : kNone;
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

std::optional<pool_sub_range> pool_sub_allocation(const record& r, const void* p) {
  std::optional<pool_sub_range> out;
  (void)with_pool(r.owner, 0, [&](pool_state& pool) {
    const std::uint32_t i = pool.piece_at_locked(reinterpret_cast<std::uintptr_t>(p));
    if (i == kNone) return;
    const span& s = pool.spans[i];
    const std::size_t asked = s.requested.load(std::memory_order_relaxed);
    // 0 (never: a live piece was asked for at least one byte): the whole piece.
    out = pool_sub_range{reinterpret_cast<void*>(s.start),
                         asked != 0 && asked <= s.size ? asked : s.size, s.size};
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
    const std::size_t asked = pool.spans[i].requested.load(std::memory_order_relaxed);
    piece.requested = asked != 0 && asked <= piece.size ? asked : piece.size;
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

}  // namespace memarea::detail

namespace memarea {
using detail::system;

std::optional<allocation_info> find(const void* ptr) {
  if (auto r = detail::allocations().find(ptr)) {
    const auto kind = static_cast<memory_kind>(r->kind);
    if (r->made_by == detail::origin::pool) {
      // A pool's block: the live piece that holds ptr, or nothing (free memory of the pool).
      auto piece = detail::pool_sub_allocation(*r, ptr);
      if (!piece) return std::nullopt;
      return allocation_info{piece->base, piece->requested, kind, r->device, piece->capacity};
    }
    if (r->owner) {
      // Another process's memory that the observer (IPC) mapped: the buffer it exported (not
      // the rest of its driver allocation), on its device. The record is the whole mapping,
      // opened on this process's device. Any other record has no owner: no call.
      detail::memory_observer* watcher = detail::allocations().observer();
      if (watcher && r->owner == watcher)
        if (auto b = watcher->describe(*r, ptr))
          return allocation_info{b->base, b->size, kind, b->device, b->size};
    }
    return allocation_info{r->base, r->size, kind, r->device, r->size};
  }
  auto& sys = system::get();
  detail::pointer_info pi;
  if (ptr && sys.gpu().pointer_query(ptr, &pi).ok())
    return allocation_info{pi.base, pi.size, static_cast<memory_kind>(pi.kind), pi.device,
                           pi.size};
  return std::nullopt;
}

allocation_info lookup(const void* ptr) {
  if (auto r = find(ptr)) return *r;
  throw error(errc::not_found,
              fmt::format("lookup: {} is in no memarea allocation and the {} driver does not "
                          "know it",
                          ptr, system::get().gpu().name()));
}

}  // namespace memarea
