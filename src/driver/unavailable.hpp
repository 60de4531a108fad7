// A driver with no devices: every device operation fails with one status and says why.
// Stands in for a backend that is not compiled in, or for "no GPU backend at all".
#pragma once

#include "driver/driver.hpp"

#include <memory>
#include <string>

namespace memarea::detail {

/// A backend that has no devices; `reason` is reported by unavailable_reason() and in every
/// failing status's detail.
std::unique_ptr<driver> make_unavailable_driver(const char* name, std::string reason,
                                                errc code = errc::no_device);

}  // namespace memarea::detail
