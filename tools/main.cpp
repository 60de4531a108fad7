// The memarea command-line tool.
#include "tools/bench.hpp"
#include "tools/commands.hpp"

#include <memarea/error.hpp>

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

namespace memarea::cli {
/// `memarea topo` (tools/topo.cpp).
int run_topo(bool json, const std::string& svg, const std::string& size, int reps,
             bool baseline);
}

int main(int argc, char** argv) {
  if (const int rc = memarea::cli::bench::run_child_role(); rc >= 0) return rc;
  CLI::App app{"memarea: places, shares and moves memory across GPUs, the host and processes"};
  app.require_subcommand(1);
  bool json = false;
  auto* info = app.add_subcommand("info", "backends, devices and host NUMA nodes");
  info->add_flag("--json", json, "print JSON for scripts");
  auto* bench = app.add_subcommand("bench", "memarea vs the raw driver calls, side by side");
  std::string filter, json_out;
  int reps = 20;
  bool quick = false, strict = false;
  bench->add_option("--filter", filter, "run the cases whose name contains this");
  bench->add_option("--json", json_out, "write the results as JSON to this file");
  bench->add_option("--reps", reps, "timed repetitions per measurement (median)")
      ->check(CLI::Range(1, 100000));
  bench->add_flag("--quick", quick, "small sizes (for sim and smoke runs)");
  bench->add_flag("--strict", strict, "exit 1 when a target is missed");
  auto* topo = app.add_subcommand("topo", "peer access, links and copy bandwidth between devices");
  std::string topo_svg, topo_size;
  int topo_reps = 0;
  bool topo_baseline = false;
  topo->add_flag("--json", json, "print JSON for scripts");
  topo->add_option("--svg", topo_svg, "write a heatmap of the measurements to this SVG file");
  topo->add_option("--size", topo_size, "bytes per copy, e.g. 256M (default: 256M; sim 4M)");
  topo->add_option("--reps", topo_reps, "copies per timed trial")->check(CLI::Range(1, 100000));
  topo->add_flag("--baseline", topo_baseline,
                 "also time the bare driver calls the same way (\"raw\")");
  auto* ipc = app.add_subcommand("ipc", "inter-process sharing");
  ipc->require_subcommand(1);
  auto* gc = ipc->add_subcommand(
      "gc", "remove the shared-memory objects that dead processes left in /dev/shm");
  bool dry_run = false;
  gc->add_flag("--dry-run", dry_run, "list what would be removed, remove nothing");
  gc->add_flag("--json", json, "print JSON for scripts");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*info) return memarea::cli::run_info(json);
    if (*gc) return memarea::cli::run_ipc_gc(dry_run, json);
    if (*topo) return memarea::cli::run_topo(json, topo_svg, topo_size, topo_reps,
                                                   topo_baseline);
    if (*bench) return memarea::cli::bench::run(filter, reps, quick, json_out, strict);
  } catch (const memarea::error& e) {
    // message() names the driver's error already (what() would add the status a second time).
    std::cerr << "memarea: " << e.message() << " [" << memarea::to_string(e.status()) << "]\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "memarea: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
