// The backends' factories: where a driver comes from. Apart from the interface (driver.hpp), so
// that code holding a driver needs none of the backends' settings.
#pragma once

#include "driver/driver.hpp"
#include "driver/sim/sim_config.hpp"

#include <memory>

namespace memarea::detail {

/// Factories. Each returns a driver even when its library or devices are missing: then
/// device_count() is 0 and unavailable_reason() says why. Never throws for a missing library.
std::unique_ptr<driver> make_cuda_driver();
std::unique_ptr<driver> make_hip_driver();
// make_sim_driver(const sim_config&): driver/sim/sim_config.hpp, beside the settings it takes.

}  // namespace memarea::detail
