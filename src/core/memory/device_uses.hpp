// What keeps a device in use, as the rooms report it to a device reset (core/device/): memarea's
// allocations and objects that live in the device's context. Each room adds its own; the reset
// refuses (busy) while any is there, and its message shows the first few.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace memarea::detail {

/// The uses of one device found so far: all of them counted, the first `limit` described.
class device_uses {
 public:
  explicit device_uses(std::size_t limit = 8) : limit_(limit) {}

  /// Counts one use; describe() (returning its text: what, where, how large) is called only
  /// while fewer than `limit` are described, so a device with a million live pieces costs
  /// a million counts, not a million messages.
  template <class Describe>
    requires std::is_invocable_r_v<std::string, Describe&>
  void add(Describe&& describe) {
    if (shown_.size() < limit_) shown_.push_back(describe());
    ++count_;
  }

  std::size_t count() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  /// The described ones, in the order they were added.
  const std::vector<std::string>& shown() const noexcept { return shown_; }

 private:
  std::size_t limit_;
  std::size_t count_ = 0;
  std::vector<std::string> shown_;
};

}  // namespace memarea::detail
