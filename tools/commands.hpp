// The memarea CLI's subcommands.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace memarea::cli {

/// `memarea info` as JSON.
nlohmann::json info_json();
/// `memarea info [--json]`.
int run_info(bool json);
/// `memarea ipc gc [--dry-run] [--json]`: removes (or lists) the shared-memory objects of dead
/// processes in /dev/shm.
int run_ipc_gc(bool dry_run, bool json);
/// `memarea ps` as JSON (memarea_ps_json); device null: every device.
nlohmann::json ps_json(const int* device);
/// `memarea ps [--json] [--device N]`: the processes using memarea and what they share.
int run_ps(bool json, const int* device);

/// `memarea snapshot [--json] [--svg FILE] [--color kind|age] [--from FILE] [--device N]`: the
/// memory memarea holds (memarea_snapshot_json; --from: a snapshot a program saved).
int run_snapshot(bool json, const std::string& svg_path, const std::string& colour,
                 const std::string& from, int device);

}  // namespace memarea::cli
