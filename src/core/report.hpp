// The reports of `memarea info` and `memarea topo` (their JSON, and the topology's
// measurements), shared by the CLI (tools/) and the C API (include/memarea/report.h), so that
// both print the same document.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace memarea::report {

/// `memarea info --json`.
nlohmann::json info_json();

/// What `memarea topo` measured between every ordered pair of devices.
struct topology {
  int n = 0;
  std::vector<std::string> names, pci;
  std::vector<std::vector<int>> access;
  std::vector<std::vector<std::string>> link;
  std::vector<std::vector<double>> uni, bidi, latency;  // GB/s, GB/s, us; NaN on the diagonal
  std::vector<std::vector<std::string>> path;           // "peer" or "staged"
  /// Every ordered pair copying at once (each on a stream of its source): per pair and total.
  std::vector<std::vector<double>> concurrent;  // GB/s; NaN on the diagonal
  double concurrent_total = std::numeric_limits<double>::quiet_NaN();  // GB/s, all pairs (NaN: < 2)
};

/// Replaces size 0 and reps <= 0 by the backend's defaults (sim: small, since its devices live
/// in host memory).
void topology_defaults(std::size_t& size, int& reps);

/// Measures copies of `size` bytes, `reps` times per figure; `progress` (may be empty) hears
/// what is being measured.
topology measure_topology(std::size_t size, int reps,
                          const std::function<void(const std::string&)>& progress = {});

/// `memarea topo --json` of a measurement.
nlohmann::json topology_json(const topology& t, std::size_t size, int reps);

}  // namespace memarea::report
