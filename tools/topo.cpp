// `memarea topo`: which devices can reach which, over what link, and how fast memarea copies
// between them and the host, by nvbandwidth's and p2pBandwidthLatencyTest's methods
// (docs/topo.md). Text, JSON, or an SVG picture (tools/topo_svg.cpp). The measurement and the
// JSON are the library's, through its public C API (memarea/report.h), so the CLI prints what
// memarea_topo_json_ex and the Python package's memarea.topo() return.
#include "tools/output_file.hpp"
#include "tools/topo_svg.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/report.h>
#include <memarea/sim.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <string>

namespace memarea::cli {
namespace {

/// Progress on stderr, only for a person watching.
void progress(const char* what, void*) {
  if (isatty(STDERR_FILENO)) std::cerr << "\rtopo: " << what << "\x1b[K" << std::flush;
}

/// The library's measurement as JSON; its failure as a memarea::error named "topo".
nlohmann::json measure(std::size_t size, int reps, bool baseline) {
  char* text = nullptr;
  const memarea_status st = memarea_topo_json_ex(
      &text, size, reps, baseline ? MEMAREA_TOPO_BASELINE : 0u, progress, nullptr);
  if (isatty(STDERR_FILENO)) std::cerr << "\r\x1b[K";
  if (st != MEMAREA_SUCCESS) {
    std::string message = memarea_last_error_message();
    const std::string prefix = "memarea_topo_json_ex: ";
    if (message.rfind(prefix, 0) == 0) message = "topo: " + message.substr(prefix.size());
    throw error(static_cast<errc>(st), message);
  }
  nlohmann::json j = nlohmann::json::parse(text);
  memarea_string_free(text);
  return j;
}

// --- text ----------------------------------------------------------------------------------

void print_matrix(const std::string& title, int n,
                  const std::function<std::string(int, int)>& cell) {
  std::cout << "\n" << title << "\n" << fmt::format("{:>8}", "src\\dst");
  for (int b = 0; b < n; ++b) std::cout << fmt::format("{:>10}", b);
  std::cout << "\n";
  for (int a = 0; a < n; ++a) {
    std::cout << fmt::format("{:>8}", a);
    for (int b = 0; b < n; ++b) std::cout << fmt::format("{:>10}", a == b ? "-" : cell(a, b));
    std::cout << "\n";
  }
}

std::string fixed2(const nlohmann::json& v) {
  return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : std::string("-");
}

void print_figures(const nlohmann::json& f, const std::string& who, int n) {
  std::cout << fmt::format("\nhost <-> device ({}; pinned host memory)\n", who)
            << fmt::format("{:>8}{:>12}{:>12}{:>16}{:>16}\n", "device", "H2D GB/s", "D2H GB/s",
                           "H2D 4 KiB us", "D2H 4 KiB us");
  for (int d = 0; d < n; ++d)
    std::cout << fmt::format("{:>8}{:>12}{:>12}{:>16}{:>16}\n", d,
                             fixed2(f.at("host_to_device_gbps")[d]),
                             fixed2(f.at("device_to_host_gbps")[d]),
                             fixed2(f.at("host_to_device_latency_4k_us")[d]),
                             fixed2(f.at("device_to_host_latency_4k_us")[d]));
  if (n < 2) return;
  const auto matrix = [&](const char* key) {
    return [&f, key](int a, int b) { return fixed2(f.at(key)[a][b]); };
  };
  print_matrix(fmt::format("unidirectional bandwidth (GB/s; {})", who), n,
               matrix("unidirectional_gbps"));
  print_matrix(fmt::format("bidirectional bandwidth (GB/s, both directions together; {})", who),
               n, matrix("bidirectional_gbps"));
  print_matrix(fmt::format("4 KiB copy latency (us, event to event; {})", who), n,
               matrix("latency_4k_us"));
  print_matrix(fmt::format("4 KiB copy + synchronize (us, host clock; {})", who), n,
               matrix("latency_4k_sync_us"));
}

}  // namespace

/// `memarea topo [--json] [--svg FILE] [--size BYTES] [--reps N] [--baseline]`; no size and
/// reps 0 pick defaults for the backend (sim: small, since its devices live in host memory).
int run_topo(bool json, const std::string& svg_path, const std::string& size_text, int reps,
             bool baseline) {
  std::size_t size = size_text.empty() ? 0 : memarea::sim::parse_size(size_text);
  if (!size_text.empty() && size == 0) throw error(errc::invalid_value, "topo: --size is 0");
  // A path that cannot be written fails now, not after a minute of measuring; nothing is
  // created or truncated until the measurement is done.
  if (!svg_path.empty()) require_writable(svg_path, "topo --svg");
  if (device_count() < 2 && !json)
    std::cerr << "topo: fewer than 2 devices: no device pairs; measuring host <-> device only\n";
  const nlohmann::json j = measure(size, reps, baseline);
  if (!svg_path.empty()) write_file(svg_path, svg::topo_picture(j).svg, "topo --svg");
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const int n = static_cast<int>(j.at("devices").size());
  std::cout << fmt::format("backend {}, {} device(s); copies of {} bytes, {} per trial, median "
                           "of {} trials (methods: docs/topo.md)\n",
                           j.at("backend").get<std::string>(), n, j.at("size").get<std::size_t>(),
                           j.at("reps").get<int>(), j.at("trials").get<int>());
  for (int d = 0; d < n; ++d)
    std::cout << fmt::format("  GPU {}: {} {}  host link: {}\n", d,
                             j["devices"][d].at("name").get<std::string>(),
                             j["devices"][d].at("pci_bus_id").get<std::string>(),
                             j.at("host_link")[d].get<std::string>());
  if (n >= 2) {
    print_matrix("peer access (1: can access)", n,
                 [&](int a, int b) { return std::to_string(j["access"][a][b].get<int>()); });
    print_matrix("link (as nvidia-smi topo -m names it; legend below)", n,
                 [&](int a, int b) { return j["link"][a][b].get<std::string>(); });
    print_matrix("copy path (peer access enabled where possible)", n,
                 [&](int a, int b) { return j["path"][a][b].get<std::string>(); });
  }
  print_figures(j, "memarea", n);
  if (j.contains("raw")) print_figures(j["raw"], "raw driver", n);
  if (n >= 2) {
    print_matrix("all pairs at once (GB/s per pair, every ordered pair copying together)", n,
                 [&](int a, int b) { return fixed2(j["all_pairs_at_once_gbps"][a][b]); });
    std::cout << fmt::format("all pairs at once, total: {} GB/s\n",
                             fixed2(j["all_pairs_at_once_total_gbps"]));
    if (j.contains("all_pairs")) {
      const auto& ap = j["all_pairs"];
      std::cout << fmt::format("  one window of {} ms for every pair (gate {}held)\n",
                               fixed2(ap.at("window_ms")),
                               ap.at("gate").at("held").get<bool>() ? "" : "NOT ");
      for (const auto& d : ap.at("devices"))
        std::cout << fmt::format("  GPU {}: egress {} GB/s, {}; ingress {} GB/s, {}\n",
                                 d.at("device").get<int>(), fixed2(d.at("egress_gbps")),
                                 d.at("egress_verdict").get<std::string>(),
                                 fixed2(d.at("ingress_gbps")),
                                 d.at("ingress_verdict").get<std::string>());
      if (!ap.at("gate").at("note").get<std::string>().empty())
        std::cout << "  gate: " << ap["gate"]["note"].get<std::string>() << "\n";
    }
  }
  if (!j.at("link_legend").empty()) {
    std::cout << "\nlinks:\n";
    for (auto& [label, meaning] : j["link_legend"].items())
      std::cout << fmt::format("  {}: {}\n", label, meaning.get<std::string>());
  }
  if (j.value("gate_misses", 0) > 0)
    std::cout << fmt::format("\nnote: {} trial(s) ran past their timing gate (docs/topo.md): "
                             "their figures include some queueing time\n",
                             j["gate_misses"].get<int>());
  return 0;
}

}  // namespace memarea::cli
