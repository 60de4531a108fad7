#include "tools/device_required.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>

#include <fmt/format.h>

namespace memarea::cli {

void require_a_device(const std::string& what, const std::string& command) {
  if (memarea::device_count() > 0) return;
  std::string why = "the active backend has none";
  try {
    (void)memarea::get_device_properties(0);
  } catch (const memarea::error& e) {
    why = e.message();
    // "get_device_properties: no devices (...)": the call's name says nothing here.
    if (const auto colon = why.find(": "); colon != std::string::npos) why.erase(0, colon + 2);
  }
  throw memarea::error(
      memarea::errc::no_device,
      fmt::format("{}: no device to measure: {}. To measure simulated devices: "
                  "MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=4 {}",
                  what, why, command));
}

}  // namespace memarea::cli
