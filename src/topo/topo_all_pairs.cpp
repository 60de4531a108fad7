// `memarea topo`'s "all pairs at once" (core/report/report.hpp): every ordered pair of devices
// copies at the same time, in one window that a gate opens for all of them, and each device's
// egress and ingress is set against what its links can carry. Through the public API only
// (areas, streams, events, copies), as any user's program would measure it. docs/topo.md.
#include "core/report/report.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/event.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace memarea::report {
namespace {

/// Measured egress or ingress against the links' nominal capacity (5% over it is noise: the
/// nominal figures are rounded, the window's events are not exact).
std::string verdict(double measured, double capacity) {
  if (std::isnan(capacity))
    return "no nominal capacity (the links' speeds are not known)";
  if (measured > capacity * 1.05)
    return fmt::format("ABOVE the links' capacity ({:.0f}% of {:.1f} GB/s): the copies did not "
                       "run at once, or the links are not what they were named",
                       100 * measured / capacity, capacity);
  return fmt::format("within the links' capacity ({:.0f}% of {:.1f} GB/s)",
                     100 * measured / capacity, capacity);
}

}  // namespace

void measure_all_pairs(std::size_t size, int reps, topology& r) {
  const int n = r.n;
  const auto un = static_cast<std::size_t>(n);
  std::vector<peer::scoped_access> access;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || !peer::can_access(a, b)) continue;
      try {
        access.emplace_back(a, b);
      } catch (const error& e) {
        // A device at its peer limit (8 on many GPUs): that pair copies without access, as a
        // collective's all-to-all on such a machine would.
        if (e.status() != errc::too_many_peers) throw;
      }
    }
  struct lane {
    int a, b;
    buffer src, dst;
    stream s;
    event end;
  };
  std::vector<lane> lanes;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b)
        lanes.push_back({a, b, area(a).allocate(size), area(b).allocate(size), stream(a),
                         event(a)});
  for (auto& l : lanes) copy_peer_async(l.dst.data(), l.b, l.src.data(), l.a, size, l.s);  // warm
  for (auto& l : lanes) l.s.synchronize();

  // The gate: a pinned host -> device copy on a stream of device 0, then an event `opened`.
  // Each device marks the opening with an event on a stream of its own (`opens`), which waits
  // for `opened`; each lane waits for its device's mark. So every copy is queued before any
  // runs, all lanes start when the gate opens, and each lane is timed on its own device's
  // events from that mark (a lane's own first event could wait behind other lanes that share a
  // hardware queue or, on sim, a core). Sized from device 0's measured host -> device bandwidth
  // to last 20 ms (at least 5 ms must remain once all is queued); doubled when it opened early.
  const bool sim = backend_name() == "sim";
  const double h2d = r.memarea.h2d.empty() ? std::nan("") : r.memarea.h2d[0];
  const std::size_t mib = std::size_t{1} << 20;
  const std::size_t max_gate = sim ? 64 * mib : 2048 * mib;
  std::size_t gate_bytes = std::isnan(h2d) || h2d <= 0
                               ? 64 * mib
                               : static_cast<std::size_t>(h2d * 1e9 * 0.020) / mib * mib;
  gate_bytes = std::clamp(gate_bytes, 8 * mib, max_gate);
  stream gs(0);
  event opened(0);
  std::vector<stream> markers;
  std::vector<event> opens;
  for (int d = 0; d < n; ++d) {
    markers.emplace_back(d);
    opens.emplace_back(d);
  }
  auto& g = r.all_pairs_gate;
  for (int attempt = 1;; ++attempt) {
    std::optional<buffer> host, dev;
    try {
      host.emplace(area(0, area_flags::host).allocate(gate_bytes));
      dev.emplace(area(0).allocate(gate_bytes));
    } catch (const error& e) {
      if (e.status() != errc::out_of_memory || gate_bytes <= 8 * mib) throw;
      gate_bytes /= 2;
      g.note += fmt::format("no memory for a gate of {} MiB; ", gate_bytes * 2 / mib);
      --attempt;
      continue;
    }
    copy_async(dev->data(), host->data(), gate_bytes, gs);
    opened.record(gs);
    for (int d = 0; d < n; ++d) {
      markers[static_cast<std::size_t>(d)].wait(opened);
      opens[static_cast<std::size_t>(d)].record(markers[static_cast<std::size_t>(d)]);
    }
    for (auto& l : lanes) {
      l.s.wait(opens[static_cast<std::size_t>(l.a)]);
      for (int i = 0; i < reps; ++i)
        copy_peer_async(l.dst.data(), l.b, l.src.data(), l.a, size, l.s);
      l.end.record(l.s);
    }
    // Still closed once everything is queued: no copy ran before the last was queued.
    const bool held = !opened.query();
    for (auto& l : lanes) l.end.synchronize();
    g.bytes = gate_bytes;
    g.attempts = attempt;
    g.held = held;
    if (held) break;
    if (attempt >= 4 || gate_bytes * 2 > max_gate) {
      g.note += fmt::format("the gate ({} MiB) opened before all copies were queued, {} times: "
                            "the window includes some queueing time",
                            gate_bytes / mib, attempt);
      break;
    }
    g.note += fmt::format("a gate of {} MiB opened before all copies were queued: retried with "
                          "{} MiB; ",
                          gate_bytes / mib, gate_bytes * 2 / mib);
    gate_bytes *= 2;
  }

  // One window for all: the longest lane, each lane timed on its own device's events from the
  // gate's opening (that device's mark) to its last copy.
  double window = 0;
  r.all_pairs_lane_ms.assign(un, std::vector<double>(un, std::nan("")));
  for (auto& l : lanes) {
    const double ms = elapsed_ms(opens[static_cast<std::size_t>(l.a)], l.end);
    r.all_pairs_lane_ms[l.a][l.b] = ms;
    window = std::max(window, ms / 1e3);
  }
  r.all_pairs_window_ms = window * 1e3;
  const double pair_bytes = static_cast<double>(size) * reps;
  r.egress.assign(un, 0.0);
  r.ingress.assign(un, 0.0);
  for (auto& l : lanes) {
    const double gbps = pair_bytes / window / 1e9;
    r.concurrent[l.a][l.b] = gbps;
    r.egress[l.a] += gbps;
    r.ingress[l.b] += gbps;
  }
  r.concurrent_total = pair_bytes * static_cast<double>(lanes.size()) / window / 1e9;
  r.egress_verdict.clear();
  r.ingress_verdict.clear();
  for (std::size_t d = 0; d < un; ++d) {
    const double cap = d < r.peer_capacity.size() ? r.peer_capacity[d] : std::nan("");
    r.egress_verdict.push_back(verdict(r.egress[d], cap));
    r.ingress_verdict.push_back(verdict(r.ingress[d], cap));
  }
}

nlohmann::json all_pairs_json(const topology& r) {
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json j;
  j["window_ms"] = num(r.all_pairs_window_ms);
  auto lanes = nlohmann::json::array();
  for (auto& row : r.all_pairs_lane_ms) {
    auto jr = nlohmann::json::array();
    for (double v : row) jr.push_back(num(v));
    lanes.push_back(jr);
  }
  j["lane_ms"] = lanes;
  auto per = nlohmann::json::array();
  for (std::size_t d = 0; d < r.egress.size(); ++d)
    per.push_back({{"device", d},
                   {"egress_gbps", num(r.egress[d])},
                   {"ingress_gbps", num(r.ingress[d])},
                   {"capacity_gbps",
                    num(d < r.peer_capacity.size() ? r.peer_capacity[d] : std::nan(""))},
                   {"egress_verdict", r.egress_verdict[d]},
                   {"ingress_verdict", r.ingress_verdict[d]}});
  j["devices"] = per;
  j["gate"] = {{"bytes", r.all_pairs_gate.bytes},
               {"held", r.all_pairs_gate.held},
               {"attempts", r.all_pairs_gate.attempts},
               {"note", r.all_pairs_gate.note}};
  return j;
}

}  // namespace memarea::report
