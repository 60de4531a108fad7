// The testing interface's way into the sim driver (memarea_testing.hpp): sim_access is the
// driver's friend, so that what only tests do (inject a failure, queue a task on a stream,
// read attach flags) is no member of the driver.
#include "testing/memarea_testing.hpp"

#include "core/system.hpp"
#include "driver/sim/sim_driver.hpp"

#include <mutex>
#include <utility>

namespace memarea::detail::testing {

struct sim_access {
  static void fail_next(sim::sim_driver& d, sim::sim_driver::injectable call) {
    std::lock_guard lk(d.m_);
    d.injected_.push_back(call);
    d.injected_count_.store(d.injected_.size(), std::memory_order_release);
  }
  static dstatus enqueue(sim::sim_driver& d, int device, native_stream s,
                         std::function<void()> fn) {
    std::shared_ptr<sim::stream> st;
    if (auto r = d.resolve_stream(device, s, &st); !r.ok()) return r;
    return d.enqueue(st, std::move(fn));
  }
  static unsigned attach_flags(const sim::sim_driver& d, const void* ptr) {
    std::lock_guard lk(d.m_);
    auto it = d.find_locked(ptr);
    if (it == d.allocations_.end() || it->second.from != sim::origin::managed) return 0;
    return it->second.flags;
  }
  static std::uint64_t resets(const sim::sim_driver& d, int device) {
    std::lock_guard lk(d.m_);
    const auto i = static_cast<std::size_t>(device);
    return device >= 0 && i < d.resets_.size() ? d.resets_[i] : 0;
  }
};

sim::sim_driver* active_sim() {
  return dynamic_cast<sim::sim_driver*>(&system::get().gpu().backend());
}

void sim_fail_next(sim::sim_driver& d, sim_failure call) {
  using injectable = sim::sim_driver::injectable;
  switch (call) {
    case sim_failure::stream_destroy: return sim_access::fail_next(d, injectable::stream_destroy);
    case sim_failure::disable_peer_access:
      return sim_access::fail_next(d, injectable::disable_peer_access);
    case sim_failure::set_current_device:
      return sim_access::fail_next(d, injectable::set_current_device);
    case sim_failure::device_reset: return sim_access::fail_next(d, injectable::device_reset);
  }
}

dstatus sim_enqueue_host_task(sim::sim_driver& d, int device, void* s, std::function<void()> fn) {
  return sim_access::enqueue(d, device, s, std::move(fn));
}

unsigned sim_attach_flags(const sim::sim_driver& d, const void* ptr) {
  return sim_access::attach_flags(d, ptr);
}

std::uint64_t sim_resets(const sim::sim_driver& d, int device) {
  return sim_access::resets(d, device);
}

}  // namespace memarea::detail::testing
