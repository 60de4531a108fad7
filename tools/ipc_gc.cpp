// `memarea ipc gc`: the sweep of /dev/shm that memarea's background thread runs, by hand.
#include "tools/commands.hpp"

#include <memarea/ipc.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

namespace memarea::cli {

int run_ipc_gc(bool dry_run, bool json) {
  const auto report = ipc::sweep(dry_run);
  if (json) {
    nlohmann::json j{{"dry_run", dry_run},
                     {dry_run ? "would_remove" : "removed", report.removed},
                     {"live_owners", report.live_owners},
                     {"left_alone", report.left_alone},
                     {"busy", report.busy}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const auto& name : report.removed)
    std::cout << (dry_run ? "would remove /dev/shm/" : "removed /dev/shm/") << name << "\n";
  std::cout << report.removed.size() << (dry_run ? " object(s) of dead processes to remove; "
                                                 : " object(s) of dead processes removed; ")
            << report.live_owners << " live process(es) left alone; " << report.left_alone
            << " object(s) of other users or unreadable left alone";
  if (report.busy) std::cout << "; " << report.busy << " dead process(es) another sweep still held";
  std::cout << "\n";
  return 0;
}

}  // namespace memarea::cli
