// The memarea command-line tool: info, topo, ps, ipc gc. The benchmarks are a program of their own,
// memarea-bench (bench/).
#include "tools/commands.hpp"
#include "tools/device_required.hpp"

#include <memarea/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <exception>
#include <iostream>
#include <string>

namespace memarea::cli {
/// `memarea topo` (tools/topo.cpp).
int run_topo(bool json, const std::string& svg, const std::string& size, int reps,
             bool baseline);
}

namespace {

/// The first word of args (from `first` on) that is not an option, where `app` takes only flags:
/// the command it must name. Empty when there is none.
std::string command_word(int argc, char** argv, int first, int* at) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return "";
    if (!a.empty() && a[0] != '-') {
      *at = i;
      return a;
    }
  }
  return "";
}

/// Refuses a command `app` does not have, naming it and the commands there are, rather than
/// CLI11's "A subcommand is required" or "arguments were not expected". Follows the known
/// commands down while they have commands of their own (`memarea ipc gc`). `memarea bench`, a
/// command no more, is refused the same way, naming the program that took it over. Returns the
/// exit status (2), or -1 when every command word is known.
int refuse_unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path;
  int from = 1;
  const auto all = [](CLI::App*) { return true; };
  while (!at->get_subcommands(all).empty()) {
    int i = 0;
    const std::string word = command_word(argc, argv, from, &i);
    if (word.empty()) return -1;
    CLI::App* next = nullptr;
    std::string names;
    for (CLI::App* sub : at->get_subcommands(all)) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      if (sub->get_name() == word) next = sub;
    }
    path += (path.empty() ? "" : " ") + word;
    if (!next && at == &app && word == "bench") {
      std::cerr << "memarea: unknown command 'bench': the benchmarks are a program of their own, "
                   "memarea-bench, installed beside memarea, with the options `memarea bench` "
                   "took (see memarea-bench --help)\n";
      return 2;
    }
    if (!next) {
      std::cerr << fmt::format("memarea: unknown command '{}' (commands: {}; see {} --help)\n",
                               path, names,
                               at == &app ? std::string("memarea") : "memarea " + at->get_name());
      return 2;
    }
    at = next;
    from = i + 1;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memarea: places, shares and moves memory across GPUs, the host and processes"};
  app.require_subcommand(1);
  app.footer("The benchmarks are a program of their own: memarea-bench (memarea-bench --help).");
  // The project's version (CMake's project(VERSION)), as MEMAREA_VERSION_STRING is built in.
  app.set_version_flag("--version", std::string("memarea ") + MEMAREA_VERSION_STRING,
                       "print memarea's version and exit");
  bool json = false;
  auto* info = app.add_subcommand("info", "backends, devices and host NUMA nodes");
  info->add_flag("--json", json, "print JSON for scripts");
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
  auto* ps = app.add_subcommand("ps", "processes using memarea: memory per device, what they share");
  int ps_device = -2;
  ps->add_flag("--json", json, "print JSON for scripts");
  ps->add_option("--device", ps_device, "this device only (-1: the host)")
      ->check(CLI::Range(-1, 1 << 20));
  auto* snapshot = app.add_subcommand("snapshot", "the blocks and pieces memarea holds, per device");
  std::string snap_svg, snap_colour = "kind", snap_from;
  int snap_device = -1;
  snapshot->add_flag("--json", json, "print JSON for scripts");
  snapshot->add_option("--svg", snap_svg, "write a picture of the snapshot to this SVG file");
  snapshot->add_option("--color", snap_colour, "colour allocations by kind or age");
  snapshot->add_option("--from", snap_from, "a snapshot a program saved (memarea_snapshot_json)");
  snapshot->add_option("--device", snap_device, "this device only (-1: all and the host)");
  auto* ipc = app.add_subcommand("ipc", "inter-process sharing");
  ipc->require_subcommand(1);
  auto* gc = ipc->add_subcommand(
      "gc", "remove the shared-memory objects that dead processes left in /dev/shm");
  bool dry_run = false;
  gc->add_flag("--dry-run", dry_run, "list what would be removed, remove nothing");
  gc->add_flag("--json", json, "print JSON for scripts");
  if (const int rc = refuse_unknown_command(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*info) return memarea::cli::run_info(json);
    if (*gc) return memarea::cli::run_ipc_gc(dry_run, json);
    if (*snapshot)
      return memarea::cli::run_snapshot(json, snap_svg, snap_colour, snap_from, snap_device);
    if (*ps) return memarea::cli::run_ps(json, ps_device >= -1 ? &ps_device : nullptr);
    if (*topo) {
      memarea::cli::require_a_device("topo", "memarea topo");
      return memarea::cli::run_topo(json, topo_svg, topo_size, topo_reps, topo_baseline);
    }
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
