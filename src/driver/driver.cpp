#include "driver/driver.hpp"

#include <fmt/format.h>

namespace memarea::detail {

// Here, in the driver layer, rather than in core: a dstatus is the driver's and so is turning it
// into the public memarea::error, whose only out-of-line part (its category) lives in src/base.
// So the driver depends on base and the public headers alone, never on core.
void throw_status(const dstatus& s, const std::string& what) {
  std::string msg = what;
  // The vendor's number only where it has one: sim's errors (and any status made without a
  // vendor code) carry 0, which would read as an error numbered 0.
  if (s.native_name && *s.native_name) {
    msg += s.native != 0 ? fmt::format(": {} ({})", s.native_name, s.native)
                         : fmt::format(": {}", s.native_name);
  }
  if (!s.detail.empty()) {
    msg += ": ";
    msg += s.detail.view();
  }
  throw error(s.code == errc::success ? errc::unknown : s.code, msg,
              s.native_name ? s.native_name : "");
}

void throw_status(const dstatus& s, const char* what) {
  throw_status(s, std::string(what ? what : ""));
}

}  // namespace memarea::detail
