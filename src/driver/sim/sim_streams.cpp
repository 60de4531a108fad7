// The sim driver's streams and events (each stream a worker thread: sim_stream.hpp), and the
// copies and sets queued on them.
//
// Streams follow the legacy default-stream rules: work on a device's default stream (nullptr)
// orders against the device's other streams (order_with_default).
#include "driver/sim/sim_internal.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace memarea::detail::sim {

namespace {

/// CU_STREAM_LEGACY names the legacy default stream, as nullptr does.
native_stream legacy_as_null(native_stream s) {
  return reinterpret_cast<std::uintptr_t>(s) == legacy_stream_value ? nullptr : s;
}

/// The sim drivers (by instance) that made the calling thread a per-thread default stream; its
/// destructor, at the thread's exit, ends those streams.
struct per_thread_owner {
  std::vector<std::uint64_t> drivers;
  ~per_thread_owner() {
    const std::thread::id self = std::this_thread::get_id();
    for (std::uint64_t instance : drivers) {
      sim_driver* d = nullptr;
      {
        std::lock_guard lk(g_live_mutex);
        for (sim_driver* live : live_drivers())
          if (live->instance() == instance) d = live;
      }
      if (d) d->end_per_thread_streams(self);
    }
  }
};
thread_local per_thread_owner t_per_thread;

}  // namespace

/// Finds the stream a (device, native_stream) pair names; nullptr (or CU_STREAM_LEGACY) is the
/// device's default stream and the per-thread handle the calling thread's own, each created on
/// first use.
dstatus sim_driver::resolve_stream(int device, native_stream s, std::shared_ptr<stream>* out) {
  if (auto st = check_device(device); !st.ok()) return st;
  s = legacy_as_null(s);
  if (is_per_thread(s)) {
    auto& mine = t_per_thread.drivers;  // made (its destructor registered) before m_ is taken
    if (std::find(mine.begin(), mine.end(), instance_) == mine.end()) mine.push_back(instance_);
    std::lock_guard lk(m_);
    auto& slot = per_thread_[{std::this_thread::get_id(), device}];
    if (!slot) {
      try {
        auto fresh = std::make_shared<stream>(device);
        streams_.emplace(fresh.get(), fresh);
        slot = std::move(fresh);
      } catch (const std::exception& e) {
        per_thread_.erase({std::this_thread::get_id(), device});
        return fail(errc::out_of_memory,
                    "cannot start the per-thread default stream of device {}: {}", device,
                    e.what());
      }
    }
    *out = slot;
    return dstatus::success();
  }
  std::lock_guard lk(m_);
  if (s == nullptr) {
    auto& def = default_streams_[static_cast<size_t>(device)];
    if (!def) {
      try {
        def = std::make_shared<stream>(device);
      } catch (const std::exception& e) {
        return fail(errc::out_of_memory, "cannot start the default stream of device {}: {}", device,
                    e.what());
      }
    }
    *out = def;
    return dstatus::success();
  }
  auto it = streams_.find(s);
  if (it == streams_.end()) {
    return fail(errc::invalid_value, "stream {} is not a live sim stream", fmt::ptr(s));
  }
  *out = it->second;
  return dstatus::success();
}

/// Wraps fn with the legacy default stream's implicit ordering (CUDA and HIP without per-thread
/// default streams): work on a device's default stream first waits for all work already queued
/// on that device's other streams, and work on another stream first waits for the default
/// stream's queued work. Every wait targets a ticket queued before fn, so no cycle can form.
std::function<void()> sim_driver::order_with_default(const std::shared_ptr<stream>& st,
                                                     std::function<void()> fn) {
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> waits;
  {
    std::lock_guard lk(m_);
    const auto& def = default_streams_[static_cast<size_t>(st->device())];
    if (st == def) {
      for (auto& [k, other] : streams_) {
        if (other->device() != st->device()) continue;
        if (std::uint64_t t = other->last_ticket()) waits.emplace_back(other, t);
      }
    } else if (def) {
      if (std::uint64_t t = def->last_ticket()) waits.emplace_back(def, t);
    }
  }
  if (waits.empty()) return fn;
  return [waits = std::move(waits), fn = std::move(fn)] {
    for (auto& [other, t] : waits) other->wait(t);
    fn();
  };
}

void sim_driver::end_per_thread_streams(std::thread::id id) {
  std::vector<std::shared_ptr<stream>> ending;
  {
    std::lock_guard lk(m_);
    for (auto it = per_thread_.begin(); it != per_thread_.end();) {
      if (it->first.first != id) {
        ++it;
        continue;
      }
      streams_.erase(it->second.get());
      retiring_.push_back(it->second);
      ending.push_back(std::move(it->second));
      it = per_thread_.erase(it);
    }
  }
  for (auto& st : ending) {
    st->shutdown();  // its queued work completes, as at a stream's destroy
    std::lock_guard lk(m_);
    if (auto it = std::find(retiring_.begin(), retiring_.end(), st); it != retiring_.end())
      retiring_.erase(it);
  }
}

dstatus sim_driver::enqueue_host_task(int device, native_stream s, std::function<void()> fn) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  return enqueue(st, std::move(fn));
}

dstatus sim_driver::enqueue(const std::shared_ptr<stream>& st, std::function<void()> fn) {
  if (st->enqueue(order_with_default(st, std::move(fn))) == 0) {
    return fail(errc::invalid_value, "the stream was destroyed");
  }
  return dstatus::success();
}

/// Waits for everything queued on every stream so far, as cudaFree does before it frees.
void sim_driver::synchronize_all() {
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> snap;
  {
    std::lock_guard lk(m_);
    for (auto& s : default_streams_) {
      if (s) snap.emplace_back(s, s->last_ticket());
    }
    for (auto& [k, s] : streams_) snap.emplace_back(s, s->last_ticket());
  }
  for (auto& [s, t] : snap) s->wait(t);
}

// --- copies ------------------------------------------------------------------------------------

dstatus sim_driver::memcpy_async(void* dst, const void* src, size_t size, int device,
                                 native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst || !src) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(dst, size, "destination"); !r.ok()) return r;
    if (auto r = check_range_locked(src, size, "source"); !r.ok()) return r;
  }
  return enqueue(st, [dst, src, size] { std::memmove(dst, src, size); });
}

dstatus sim_driver::memcpy_sync(void* dst, const void* src, size_t size, int device,
                                native_stream s) {
  if (auto r = memcpy_async(dst, src, size, device, s); !r.ok()) return r;
  if (auto r = stream_synchronize(device, s); !r.ok()) return r;
  // A shm object that another process cut short during the copy faulted, and reads as zeros
  // now (base/fault_guard.hpp): the copy did not move its bytes.
  std::lock_guard lk(m_);
  if (auto r = check_range_locked(dst, size, "destination"); !r.ok()) return r;
  return check_range_locked(src, size, "source");
}

dstatus sim_driver::memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                      size_t size, int device, native_stream s) {
  if (auto r = check_device(dst_device); !r.ok()) return r;
  if (auto r = check_device(src_device); !r.ok()) return r;
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst || !src) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    auto is_device_range = [&](const void* p, int dev, const char* what) -> dstatus {
      auto it = find_locked(p);
      if (it == allocations_.end() ||
          (it->second.from != origin::device && it->second.from != origin::shareable) ||
          it->second.device != dev) {
        return fail(errc::invalid_value, "{} {} is not device memory of device {}", what,
                    fmt::ptr(p), dev);
      }
      return check_range_locked(p, size, what);
    };
    if (auto r = is_device_range(dst, dst_device, "destination"); !r.ok()) return r;
    if (auto r = is_device_range(src, src_device, "source"); !r.ok()) return r;
  }
  // With peer access off a real driver stages through the host; the sim's memory is one.
  return enqueue(st, [dst, src, size] { std::memmove(dst, src, size); });
}

dstatus sim_driver::memset_async(void* dst, int value, size_t size, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(dst, size, "destination"); !r.ok()) return r;
  }
  return enqueue(st, [dst, value, size] { std::memset(dst, value, size); });
}

// --- streams and events ------------------------------------------------------------------------

dstatus sim_driver::stream_create(int device, native_stream* s) {
  if (!s) return fail(errc::invalid_value, "stream is null");
  if (auto r = check_device(device); !r.ok()) return r;
  std::shared_ptr<stream> st;
  std::lock_guard lk(m_);
  try {
    st = std::make_shared<stream>(device);
  } catch (const std::exception& e) {
    return fail(errc::out_of_memory, "cannot start a stream thread: {}", e.what());
  }
  streams_.emplace(st.get(), st);
  *s = st.get();
  return dstatus::success();
}

dstatus sim_driver::stream_destroy(int device, native_stream s) {
  if (auto r = check_device(device); !r.ok()) return r;
  if (!s) return fail(errc::invalid_value, "the default stream cannot be destroyed");
  std::shared_ptr<stream> st;
  {
    std::lock_guard lk(m_);
    auto it = streams_.find(s);
    if (it == streams_.end()) {
      return fail(errc::invalid_value, "stream {} is not a live sim stream", fmt::ptr(s));
    }
    if (take_injected_locked(injectable::stream_destroy))
      return fail(errc::unknown, "stream {} not destroyed: a failure injected by a test",
                  fmt::ptr(s));
    st = std::move(it->second);
    streams_.erase(it);
    retiring_.push_back(st);
  }
  st->shutdown();  // like cudaStreamDestroy, queued work still completes
  {
    std::lock_guard lk(m_);
    if (auto it = std::find(retiring_.begin(), retiring_.end(), st); it != retiring_.end())
      retiring_.erase(it);
  }
  return dstatus::success();
}

dstatus sim_driver::stream_synchronize(int device, native_stream s) {
  s = legacy_as_null(s);
  if (s == nullptr) {
    if (auto r = check_device(device); !r.ok()) return r;
    std::shared_ptr<stream> def;
    {
      std::lock_guard lk(m_);
      def = default_streams_[static_cast<size_t>(device)];
    }
    if (def) def->synchronize();  // never used: nothing to wait for, no thread to start
    return dstatus::success();
  }
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  st->synchronize();
  return dstatus::success();
}

dstatus sim_driver::stream_get_device(native_stream s, int* device) {
  if (!device) return fail(errc::invalid_value, "device is null");
  std::lock_guard lk(m_);
  auto it = streams_.find(s);
  if (it == streams_.end())
    return fail(errc::invalid_value, "stream {} is not a live sim stream", fmt::ptr(s));
  *device = it->second->device();
  return dstatus::success();
}

/// Every wait of the sim blocks on a condition variable: event_sync::block is how it always
/// waits.
dstatus sim_driver::event_create(int device, native_event* e, event_timing timing, event_sync) {
  if (!e) return fail(errc::invalid_value, "event is null");
  if (auto r = check_device(device); !r.ok()) return r;
  auto ev = std::make_shared<event>();
  ev->timing = timing == event_timing::on;
  std::lock_guard lk(m_);
  events_.emplace(ev.get(), ev);
  *e = ev.get();
  return dstatus::success();
}

dstatus sim_driver::event_destroy(int device, native_event e) {
  if (auto r = check_device(device); !r.ok()) return r;
  std::lock_guard lk(m_);
  if (events_.erase(e) == 0) {
    return fail(errc::invalid_value, "event {} is not a live sim event", fmt::ptr(e));
  }
  return dstatus::success();  // a pending record keeps the event alive until it ran
}

dstatus sim_driver::find_event(native_event e, std::shared_ptr<event>* out) {
  std::lock_guard lk(m_);
  auto it = events_.find(e);
  if (it == events_.end())
    return fail(errc::invalid_value, "event {} is not a live sim event", fmt::ptr(e));
  *out = it->second;
  return dstatus::success();
}

dstatus sim_driver::event_record(native_event e, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::lock_guard el(ev->m);
  std::uint64_t g = ++ev->generation;
  std::uint64_t ticket = st->enqueue(order_with_default(st, [ev, g] {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard l(ev->m);
    // A later record (on a faster stream) wins; an older one must not overwrite its time.
    if (g > ev->done_generation) {
      ev->done_generation = g;
      ev->when = now;
    }
  }));
  if (ticket == 0) {
    --ev->generation;
    return fail(errc::invalid_value, "the stream was destroyed");
  }
  ev->where = st;
  ev->ticket = ticket;
  return dstatus::success();
}

dstatus sim_driver::stream_wait_event(int device, native_stream s, native_event e) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::shared_ptr<stream> where;
  std::uint64_t ticket = 0;
  {
    std::lock_guard el(ev->m);
    where = ev->where;
    ticket = ev->ticket;
  }
  if (!where) return dstatus::success();  // never recorded: nothing to wait for (as CUDA)
  // The ticket was queued before this task, so waits only point backwards: no cycle can form.
  return enqueue(st, [where, ticket] { where->wait(ticket); });
}

dstatus sim_driver::event_synchronize(native_event e) {
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::shared_ptr<stream> where;
  std::uint64_t ticket = 0;
  {
    std::lock_guard el(ev->m);
    where = ev->where;
    ticket = ev->ticket;
  }
  if (where) where->wait(ticket);
  return dstatus::success();
}

dstatus sim_driver::stream_query(int device, native_stream s) {
  std::shared_ptr<stream> st;
  s = legacy_as_null(s);
  if (s == nullptr) {
    if (auto r = check_device(device); !r.ok()) return r;
    std::lock_guard lk(m_);
    st = default_streams_[static_cast<size_t>(device)];
  } else if (auto r = resolve_stream(device, s, &st); !r.ok()) {
    return r;
  }
  if (!st || st->idle()) return dstatus::success();
  return dstatus::not_ready(0, "SIM_ERROR_NOT_READY");
}

dstatus sim_driver::event_query(native_event e) {
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::lock_guard el(ev->m);
  if (ev->done_generation == ev->generation) return dstatus::success();
  return dstatus::not_ready(0, "SIM_ERROR_NOT_READY");
}

dstatus sim_driver::event_elapsed_ms(float* ms, native_event start, native_event end) {
  if (!ms) return fail(errc::invalid_value, "ms is null");
  std::shared_ptr<event> a, b;
  {
    std::lock_guard lk(m_);
    auto ia = events_.find(start);
    auto ib = events_.find(end);
    if (ia == events_.end() || ib == events_.end()) {
      return fail(errc::invalid_value, "event {} is not a live sim event",
                  fmt::ptr(ia == events_.end() ? start : end));
    }
    a = ia->second;
    b = ib->second;
  }
  auto stamp = [](event& ev, std::chrono::steady_clock::time_point* t) -> dstatus {
    std::lock_guard el(ev.m);
    // As CUDA (CUDA_ERROR_INVALID_HANDLE) and HIP refuse events made without timing.
    if (!ev.timing) return fail(errc::invalid_handle, "the event was made without timing");
    // A never recorded event is an invalid handle to CUDA's cuEventElapsedTime too.
    if (ev.generation == 0) return fail(errc::invalid_handle, "the event was never recorded");
    if (ev.done_generation != ev.generation) {
      return fail(errc::busy, "the event's latest record has not completed yet");
    }
    *t = ev.when;
    return dstatus::success();
  };
  std::chrono::steady_clock::time_point ta, tb;
  if (auto r = stamp(*a, &ta); !r.ok()) return r;
  if (auto r = stamp(*b, &tb); !r.ok()) return r;
  *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
  return dstatus::success();
}

dstatus sim_driver::device_synchronize(int device) {
  if (auto r = check_device(device); !r.ok()) return r;
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> snap;
  {
    std::lock_guard lk(m_);
    if (auto& def = default_streams_[static_cast<size_t>(device)]) {
      snap.emplace_back(def, def->last_ticket());
    }
    for (auto& [k, s] : streams_) {
      if (s->device() == device) snap.emplace_back(s, s->last_ticket());
    }
  }
  for (auto& [s, t] : snap) s->wait(t);
  return dstatus::success();
}

}  // namespace memarea::detail::sim
