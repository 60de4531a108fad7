#include "driver/driver.hpp"

#include <fmt/format.h>

namespace memarea::detail {

// Here, in the driver layer, rather than in core: a dstatus is the driver's and so is turning it
// into the public memarea::error, whose only out-of-line part (its category) lives in src/base.
// So the driver depends on base and the public headers alone, never on core.
void throw_status(const dstatus& s, const std::string& what) {
  std::string msg = what;
  if (s.native_name && *s.native_name) {
    msg += fmt::format(": {} ({})", s.native_name, s.native);
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
