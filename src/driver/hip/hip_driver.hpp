// The HIP backend's internal entry points (the public factory is make_hip_driver in driver.hpp).
#pragma once

#include "driver/backends.hpp"

#include <memory>
#include <string>
#include <vector>

namespace memarea::detail {

/// The libraries make_hip_driver tries, in order.
std::vector<std::string> hip_library_candidates();

/// make_hip_driver with another list of libraries to dlopen (names or paths), so tests can load
/// a stand-in runtime. Never throws; a failure is device_count() == 0 with a reason.
std::unique_ptr<driver> make_hip_driver_from(const std::vector<std::string>& libraries);

}  // namespace memarea::detail
