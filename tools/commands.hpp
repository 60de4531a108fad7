// The memarea CLI's subcommands.
#pragma once

#include <nlohmann/json.hpp>

namespace memarea::cli {

/// `memarea info` as JSON.
nlohmann::json info_json();
/// `memarea info [--json]`.
int run_info(bool json);
/// `memarea ipc gc [--dry-run] [--json]`: removes (or lists) the shared-memory objects of dead
/// processes in /dev/shm.
int run_ipc_gc(bool dry_run, bool json);

}  // namespace memarea::cli
