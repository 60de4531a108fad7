#include "driver/driver.hpp"

#include <fmt/format.h>

namespace memarea::detail {

void throw_status(const dstatus& s, const std::string& what) {
  std::string msg = what;
  if (s.native_name && *s.native_name) {
    msg += fmt::format(": {} ({})", s.native_name, s.native);
  }
  if (!s.detail.empty()) msg += ": " + s.detail;
  throw error(s.code == errc::success ? errc::unknown : s.code, msg,
              s.native_name ? s.native_name : "");
}

}  // namespace memarea::detail
