// memarea-bench: memarea against what a user could do instead, side by side in one run (the
// cases in bench_*.cpp, their methods in docs/bench.md).
#include "bench/src/bench.hpp"
#include "tools/device_required.hpp"

#include <memarea/error.hpp>

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  // A child a case started (an IPC exporter, a fresh process timing its first call) runs its
  // role before any parsing: it is this program again, with its role in the environment.
  if (const int rc = memarea::cli::bench::run_child_role(); rc >= 0) return rc;
  CLI::App app{"memarea-bench: memarea vs the raw driver calls, side by side"};
  // The project's version (CMake's project(VERSION)), as MEMAREA_VERSION_STRING is built in.
  app.set_version_flag("--version", std::string("memarea-bench ") + MEMAREA_VERSION_STRING,
                       "print memarea's version and exit");
  std::string filter, json_out;
  int reps = 20;
  bool quick = false, strict = false, list = false;
  app.add_option("--filter", filter, "run the cases whose name contains this");
  app.add_option("--json", json_out, "write the results as JSON to this file");
  app.add_option("--reps", reps, "timed repetitions per measurement (median)")
      ->check(CLI::Range(1, 100000));
  app.add_flag("--quick", quick, "small sizes (for sim and smoke runs)");
  app.add_flag("--strict", strict, "exit 1 when a target is missed");
  app.add_flag("--list", list, "list the cases and their rows, measuring nothing");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (list) return memarea::cli::bench::list(filter);
    memarea::cli::require_a_device("bench", "memarea-bench");
    return memarea::cli::bench::run(filter, reps, quick, json_out, strict);
  } catch (const memarea::error& e) {
    // message() names the driver's error already (what() would add the status a second time).
    std::cerr << "memarea-bench: " << e.message() << " [" << memarea::to_string(e.status())
              << "]\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "memarea-bench: " << e.what() << "\n";
    return 1;
  }
}
