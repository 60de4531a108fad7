// The memarea CLI's subcommands.
#pragma once

#include <nlohmann/json.hpp>

namespace memarea::cli {

/// `memarea info` as JSON.
nlohmann::json info_json();
/// `memarea info [--json]`.
int run_info(bool json);

}  // namespace memarea::cli
