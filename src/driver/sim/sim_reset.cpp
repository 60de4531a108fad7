// The sim's device reset: what cuDevicePrimaryCtxReset does to a context, on an emulated device.
#include "driver/sim/sim_internal.hpp"

#include <algorithm>
#include <memory>
#include <vector>

namespace memarea::detail::sim {

dstatus sim_driver::device_reset(int device) {
  if (auto r = check_device(device); !r.ok()) return r;
  const auto d = static_cast<size_t>(device);
  std::vector<std::shared_ptr<stream>> dropped;
  {
    std::lock_guard lk(m_);
    if (take_injected_locked(injectable::device_reset))
      return fail(errc::unknown, "device {} not reset: a failure injected by a test", device);
    // A context's peer mappings go with it: the device's access to others, and theirs to it.
    for (size_t p = 0; p < peer_enabled_.size(); ++p) {
      peer_enabled_[d][p] = false;
      peer_enabled_[p][d] = false;
    }
    if (default_streams_[d]) dropped.push_back(std::move(default_streams_[d]));  // made anew
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->second->device() == device) {
        dropped.push_back(std::move(it->second));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
    // Every thread's per-thread default stream of the device was among them: made anew too.
    std::erase_if(per_thread_, [&](const auto& e) { return e.first.second == device; });
    retiring_.insert(retiring_.end(), dropped.begin(), dropped.end());
    if (resets_.size() < static_cast<size_t>(devices_)) resets_.resize(static_cast<size_t>(devices_));
    ++resets_[d];
  }
  // Outside the lock, as stream_destroy: tasks already queued run to their end (they may copy
  // into memory the caller still holds), then the workers are joined.
  for (auto& st : dropped) st->shutdown();
  std::lock_guard lk(m_);
  for (auto& st : dropped)
    if (auto it = std::find(retiring_.begin(), retiring_.end(), st); it != retiring_.end())
      retiring_.erase(it);
  return dstatus::success();
}

}  // namespace memarea::detail::sim
