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

/// memarea_snapshot_json: device -1 every device and the host, else that device
/// (docs/usage.md "Snapshots"). @throws error invalid_device for another value.
nlohmann::json snapshot_json(int device);

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
  /// GB/s per direction that all of a device's peer copies share: its direct NVLinks summed,
  /// its NVSwitch links once, its host link once for peers over PCIe; NaN: not known.
  std::vector<double> peer_capacity;
  std::vector<std::vector<std::string>> path;     ///< "peer" or "staged"
  std::map<std::string, std::string> legend;      ///< each link label used: what it means
  figures memarea;                                ///< memarea's copies
  figures raw;                                    ///< the bare driver calls (with baseline)
  bool has_raw = false;
  /// Every ordered pair copying at once (each on a stream of its source), in one window the
  /// gate opens for all (src/topo/topo_all_pairs.cpp): each pair's bytes over the window.
  std::vector<std::vector<double>> concurrent;  // GB/s; NaN on the diagonal
  double concurrent_total = std::numeric_limits<double>::quiet_NaN();  // GB/s, all pairs (NaN: < 2)
  std::vector<std::vector<double>> all_pairs_lane_ms;  ///< each pair's own time in the window
  double all_pairs_window_ms = std::numeric_limits<double>::quiet_NaN();  ///< the longest lane
  std::vector<double> egress, ingress;  ///< GB/s per device: its pairs' sums over the window
  /// Each device's egress and ingress set against peer_capacity, in words.
  std::vector<std::string> egress_verdict, ingress_verdict;
  /// The gate of the all-pairs window: its copy's size, whether it held until every copy was
  /// queued, the tries it took, and what happened when it did not hold.
  struct {
    std::size_t bytes = 0;
    bool held = false;
    int attempts = 0;
    std::string note;
  } all_pairs_gate;
  /// Trials whose timing gate (docs/topo.md) ran out before all copies were queued, so that
  /// their figure includes some of the host's queueing time (0 on a quiet machine).
  int gate_misses = 0;
};

/// Replaces size 0 and reps <= 0 by the backend's defaults (sim: small, since its devices live
/// in host memory).
void topology_defaults(std::size_t& size, int& reps);

/// Fills the link labels of a topology whose n, names and pci are set: `link`,
/// `link_nominal`, `host_link`, `host_link_nominal`, `peer_capacity` and `legend`
/// (src/topo/topo_links.cpp).
void label_links(topology& r);

/// Every ordered pair copies `size` bytes `reps` times at once: fills concurrent, the window,
/// egress, ingress and their verdicts (src/topo/topo_all_pairs.cpp; label_links first).
void measure_all_pairs(std::size_t size, int reps, topology& r);

/// The all-pairs window's JSON: window_ms, lane_ms, per-device egress/ingress against capacity
/// with a verdict, and the gate.
nlohmann::json all_pairs_json(const topology& r);

/// Measures with `o` (defaults already applied); `progress` (may be empty) hears what is being
/// measured. not_supported in a library built without the measurement.
topology measure_topology(const topology_options& o,
                          const std::function<void(const std::string&)>& progress = {});

/// `memarea topo --json` of a measurement: the matrices, each one's method ("methods"), the
/// baseline's matrices ("raw") when measured, and a legend of the link labels used.
nlohmann::json topology_json(const topology& t, const topology_options& o);

}  // namespace memarea::report
