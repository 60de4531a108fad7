// The reports of `memarea info` and `memarea topo` (their JSON, and the topology's
// measurements), served by the C API (include/memarea/report.h), which the CLI (tools/) and the
// Python package print, so that all of them give the same document. The info report is core's
// (report_info.cpp); the topology's measurement is an optional component above core, src/topo/,
// which defines the declarations below from "Topology" on (MEMAREA_WITH_TOPO; without it,
// src/topo/topo_unavailable.cpp defines them to throw not_supported).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace memarea::report {

/// `memarea info --json`.
nlohmann::json info_json();

/// `memarea ps --json`: the live processes of this user (of every user for root) that publish
/// their usage, each one's figures per device, its exports and who has them open, and what it
/// imported from whom; device (null: every device) keeps that device's only (report_ps.cpp).
nlohmann::json ps_json(const int* device);

// --- Topology (src/topo/) ----------------------------------------------------------------

/// How `memarea topo` measures (docs/topo.md says what each figure means).
struct topology_options {
  std::size_t size = 0;  ///< bytes per bandwidth copy; 0: the backend's default
  int reps = 0;          ///< copies per timed trial (nvbandwidth's loopCount); <= 0: default
  int trials = 3;        ///< timed trials per figure, of which the median is kept
  bool baseline = false; ///< also measure the bare driver calls by the same method ("raw")
};

/// Bytes of a latency copy, and copies per latency trial (p2pBandwidthLatencyTest's repeat).
inline constexpr std::size_t latency_size = 4096;
inline constexpr int latency_copies = 100;

/// One set of figures: memarea's copies, or the bare driver's (the baseline).
struct figures {
  using matrix = std::vector<std::vector<double>>;  // [src][dst]; NaN on the diagonal
  matrix uni, bidi;       ///< GB/s: one direction; both directions at once (bytes of both)
  matrix latency;         ///< us per 4 KiB copy, event to event over back-to-back copies
  matrix latency_sync;    ///< us of one 4 KiB copy plus stream synchronize, host clock
  std::vector<double> h2d, d2h;                  ///< GB/s, pinned host memory, per device
  std::vector<double> h2d_latency, d2h_latency;  ///< us per 4 KiB copy, event to event
};

/// What `memarea topo` measured between every ordered pair of devices and between the host and
/// each device.
struct topology {
  int n = 0;
  std::vector<std::string> names, pci;
  std::vector<std::vector<int>> access;
  std::vector<std::vector<std::string>> link;  ///< as `nvidia-smi topo -m`: NV18, PIX, SYS, ...
  std::vector<std::vector<double>> link_nominal;  ///< GB/s per direction; NaN: not known
  std::vector<std::string> host_link;             ///< e.g. "PCIe Gen5 x16", "sim"
  std::vector<double> host_link_nominal;          ///< GB/s per direction; NaN: not known
  std::vector<std::vector<std::string>> path;     ///< "peer" or "staged"
  std::map<std::string, std::string> legend;      ///< each link label used: what it means
  figures memarea;                                ///< memarea's copies
  figures raw;                                    ///< the bare driver calls (with baseline)
  bool has_raw = false;
  /// Every ordered pair copying at once (each on a stream of its source): per pair and total.
  std::vector<std::vector<double>> concurrent;  // GB/s; NaN on the diagonal
  double concurrent_total = std::numeric_limits<double>::quiet_NaN();  // GB/s, all pairs (NaN: < 2)
  /// Trials whose timing gate (docs/topo.md) ran out before all copies were queued, so that
  /// their figure includes some of the host's queueing time (0 on a quiet machine).
  int gate_misses = 0;
};

/// Replaces size 0 and reps <= 0 by the backend's defaults (sim: small, since its devices live
/// in host memory).
void topology_defaults(std::size_t& size, int& reps);

/// Fills the link labels of a topology whose n, names and pci are set: `link`,
/// `link_nominal`, `host_link`, `host_link_nominal` and `legend` (src/topo/topo_links.cpp).
void label_links(topology& r);

/// Measures with `o` (defaults already applied); `progress` (may be empty) hears what is being
/// measured. not_supported in a library built without the measurement.
topology measure_topology(const topology_options& o,
                          const std::function<void(const std::string&)>& progress = {});

/// `memarea topo --json` of a measurement: the matrices, each one's method ("methods"), the
/// baseline's matrices ("raw") when measured, and a legend of the link labels used.
nlohmann::json topology_json(const topology& t, const topology_options& o);

}  // namespace memarea::report
