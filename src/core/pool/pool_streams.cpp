// Pools' pieces used on more than one stream (see pool_state.hpp for the files of pools).
//
// A piece belongs to the stream it is freed on: that stream reuses it at once, others once an
// event says the stream passed the free. A piece that other streams use too (record_stream, as
// PyTorch's Tensor.record_stream) must also wait for them: its free records an event on each
// other stream and leaves the piece pending (out of every list and cache, counted as in use
// but not live) until all have completed; then it goes to the lists of the stream it was freed
// on. A free on the per-thread default stream takes the same path: that handle names another
// stream on each thread, so no tag can hold what is freed on it; an event recorded by the
// freeing thread (on its own stream) decides, and the piece then goes to the memory every
// stream may take. A piece shared with other processes waits for the other streams at its
// free, then goes the way of IPC (free_locked).
#include "core/pool/pool_state.hpp"

#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <mutex>

namespace memarea::detail {

native_event pool_state::record_on_locked(native_stream s) {
  auto& gpu = system::get().gpu();
  native_event e = nullptr;
  if (!spare_events.empty()) {
    e = spare_events.back();
    spare_events.pop_back();
  } else {
    check(gpu.event_create(device, &e, event_timing::off), "pool free: an event for its streams");
  }
  const dstatus st = gpu.event_record(e, device, s);
  if (!st.ok()) {
    spare_events.push_back(e);  // never reallocates: the caller reserved room for it
    check(st, [&] {
      return fmt::format("pool free: recording an event on stream {}, which uses the piece",
                         fmt::ptr(s));
    });
  }
  return e;
}

void pool_state::record_stream(void* p, memarea_stream_t st) {
  check_process("pool record_stream");
  if (!p) throw error(errc::invalid_value, "pool record_stream: pointer is NULL");
  if (host_pool)
    throw error(errc::not_supported,
                "pool record_stream: a pool of pageable host memory is used by the CPU, not by "
                "streams");
  if (st && st->device != device)
    throw error(errc::invalid_value,
                fmt::format("pool record_stream: the stream is on device {}, the pool on device {}",
                            st->device, device));
  const native_stream ns = st ? st->native : nullptr;
  if (is_per_thread(ns))
    throw error(errc::invalid_value,
                "pool record_stream: the per-thread default stream is another stream on each "
                "thread; name one that every thread can (wrap its native handle)");
  std::lock_guard lock(m);
  const std::uint32_t i = piece_at_locked(reinterpret_cast<std::uintptr_t>(p));
  if (i == kNone)
    throw error(errc::invalid_value,
                fmt::format("pool record_stream: {} is not inside a live allocation of this pool",
                            p));
  stream_use& use = used_on[i];
  const std::uint64_t inc = spans[i].incarnation();
  if (use.incarnation != inc) {
    use.incarnation = inc;
    use.streams.clear();
  }
  if (std::find(use.streams.begin(), use.streams.end(), ns) == use.streams.end())
    use.streams.push_back(ns);
  stream_uses.store(used_on.size(), std::memory_order_relaxed);
}

bool pool_state::free_after_streams(void* p, native_stream ns, std::size_t size) {
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  std::vector<native_stream> waits;
  {
    std::lock_guard lock(m);
    const std::uint32_t k = handed_out.find(start);
    if (k == kNone) return false;
    std::uint64_t seen = spans[k].state.load(std::memory_order_relaxed);
    const auto st = static_cast<span_state>(seen & 0xff);
    if ((st != live && st != exported) || size > spans[k].size) return false;
    auto it = used_on.find(k);
    if (it != used_on.end() && it->second.incarnation == seen >> 8) {
      for (native_stream s : it->second.streams)
        if (s != ns) waits.push_back(s);
    }
    if (is_per_thread(ns)) waits.push_back(ns);  // the freeing thread's own, recorded here
    auto forget_use = [&] {
      if (it == used_on.end()) return;
      used_on.erase(it);
      stream_uses.store(used_on.size(), std::memory_order_relaxed);
    };
    if (waits.empty()) {
      forget_use();
      return false;
    }
    if (st == live) {
      // What may throw, first: the tag, room in the lists, the events.
      pending_free pf;
      pf.span = k;
      pf.tag = tag_for(ns);
      pending_frees.reserve(pending_frees.size() + 1);
      spare_events.reserve(spare_events.size() + waits.size());
      pf.events.reserve(waits.size());
      try {
        for (native_stream s : waits) pf.events.push_back(record_on_locked(s));
      } catch (...) {
        spare_events.insert(spare_events.end(), pf.events.begin(), pf.events.end());
        throw;  // the piece is live, as before
      }
      // A thread's cache frees only by exchanging the word it saw (live): from here on none can.
      if (!spans[k].state.compare_exchange_strong(seen, word(seen >> 8, pending),
                                                  std::memory_order_acq_rel)) {
        spare_events.insert(spare_events.end(), pf.events.begin(), pf.events.end());
        return false;  // freed meanwhile: the usual path refuses the second free
      }
      forget_use();
      pending_frees.push_back(std::move(pf));
      return true;
    }
    forget_use();  // exported: waited for below, then freed as IPC says
  }
  auto& gpu = system::get().gpu();
  for (native_stream s : waits) {
    native_event e = nullptr;
    check(gpu.event_create(device, &e, event_timing::off), "pool free: an event for its streams");
    dstatus st = gpu.event_record(e, device, s);
    if (st.ok()) st = gpu.event_synchronize(e);
    (void)gpu.event_destroy(device, e);
    check(st, "pool free: waiting for a stream that uses the piece");
  }
  return false;
}

bool pool_state::settle_pending_locked(bool wait) {
  auto& gpu = system::get().gpu();
  bool moved = false;
  for (std::size_t k = 0; k < pending_frees.size();) {
    pending_free& pf = pending_frees[k];
    bool done = true;
    for (native_event e : pf.events) {
      // Busy, or a failure: asked again at the next settle (the piece stays out of reach).
      if (!(wait ? gpu.event_synchronize(e) : gpu.event_query(e)).ok()) {
        done = false;
        break;
      }
    }
    if (!done) {
      ++k;
      continue;
    }
    try {
      spare_events.insert(spare_events.end(), pf.events.begin(), pf.events.end());
    } catch (...) {
      for (native_event e : pf.events) (void)gpu.event_destroy(device, e);
    }
    release_handed_locked(pf.span, pf.tag);
    if (k + 1 != pending_frees.size()) pending_frees[k] = std::move(pending_frees.back());
    pending_frees.pop_back();
    moved = true;
  }
  return moved;
}

std::vector<native_event> pool_state::take_events_locked() {
  (void)settle_pending_locked(true);  // the blocks go back to the driver next
  std::vector<native_event> out = std::move(spare_events);
  spare_events.clear();
  for (auto& pf : pending_frees) out.insert(out.end(), pf.events.begin(), pf.events.end());
  pending_frees.clear();
  return out;
}

}  // namespace memarea::detail
