// `memarea topo`'s measurements and JSON (core/report.hpp): which devices can reach which, over
// what link, and how fast memarea copies between them (unidirectional and bidirectional
// bandwidth, small-copy latency), as nvbandwidth measures it. In the library so that the CLI
// and the C API's memarea_topo_json (the Python package's memarea.topo()) give one document;
// the CLI's text and SVG output stay in tools/topo.cpp.
#include "core/report.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace memarea::report {
namespace {

// --- NVLink through NVML (loaded at run time; the few types it needs are declared here) ----

using nvml_return = int;  // nvmlReturn_t; NVML_SUCCESS is 0
using nvml_device = void*;
struct nvml_pci_info {    // nvmlPciInfo_t (v2 and later layout)
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};
constexpr unsigned nvml_max_links = 18;  // NVML_NVLINK_MAX_LINKS

/// NVML's NVLink queries, or nothing when the library is not there.
class nvml {
 public:
  nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = reinterpret_cast<nvml_return (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<nvml_return (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_pci_ = reinterpret_cast<nvml_return (*)(const char*, nvml_device*)>(
        dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    state_ = reinterpret_cast<nvml_return (*)(nvml_device, unsigned, int*)>(
        dlsym(lib_, "nvmlDeviceGetNvLinkState"));
    remote_ = reinterpret_cast<nvml_return (*)(nvml_device, unsigned, nvml_pci_info*)>(
        dlsym(lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    pci_info_ = reinterpret_cast<nvml_return (*)(nvml_device, nvml_pci_info*)>(
        dlsym(lib_, "nvmlDeviceGetPciInfo_v3"));
    ok_ = init_ && by_pci_ && state_ && remote_ && init_() == 0;
  }
  ~nvml() {
    if (ok_ && shutdown_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  nvml(const nvml&) = delete;
  nvml& operator=(const nvml&) = delete;
  bool ok() const noexcept { return ok_; }

  /// Active links of the device at `pci` to the device at `peer_pci`, and to anything at all
  /// (a switch, when there are links but none lead to the peer); the first is -k when none
  /// matched and k links lead somewhere NVML cannot name. nullopt when NVML cannot say.
  std::optional<std::pair<int, int>> links(const std::string& pci, const std::string& peer_pci) {
    if (!ok_) return std::nullopt;
    nvml_device dev = nullptr;
    if (by_pci_(pci.c_str(), &dev) != 0) return std::nullopt;
    // The peer as NVML itself names it (in a VM CUDA's bus id may differ from the one the
    // links report), else as CUDA's bus id string says.
    unsigned pd = 0, pb = 0, pdev = 0, pf = 0;
    nvml_device peer = nullptr;
    nvml_pci_info peer_info{};
    if (pci_info_ && by_pci_(peer_pci.c_str(), &peer) == 0 && pci_info_(peer, &peer_info) == 0) {
      pd = peer_info.domain;
      pb = peer_info.bus;
      pdev = peer_info.device;
    } else if (std::sscanf(peer_pci.c_str(), "%x:%x:%x.%x", &pd, &pb, &pdev, &pf) != 4) {
      return std::nullopt;
    }
    int to_peer = 0, active = 0, unnamed = 0;
    for (unsigned l = 0; l < nvml_max_links; ++l) {
      int on = 0;
      if (state_(dev, l, &on) != 0 || on != 1) continue;
      ++active;
      nvml_pci_info info{};
      if (remote_(dev, l, &info) != 0) continue;
      if (info.domain == pd && info.bus == pb && info.device == pdev) ++to_peer;
      if (info.domain == 0xffffffffu) ++unnamed;  // e.g. in a VM: NVML cannot name the far end
      if (std::getenv("MEMAREA_TOPO_DEBUG"))
        std::cerr << fmt::format("topo: {} link {} -> {:x}:{:x}:{:x} ({}), peer {:x}:{:x}:{:x}\n",
                                 pci, l, info.domain, info.bus, info.device, info.bus_id, pd, pb,
                                 pdev);
    }
    if (to_peer == 0 && unnamed > 0) return std::pair{-unnamed, active};
    return std::pair{to_peer, active};
  }

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
  nvml_return (*init_)() = nullptr;
  nvml_return (*shutdown_)() = nullptr;
  nvml_return (*by_pci_)(const char*, nvml_device*) = nullptr;
  nvml_return (*state_)(nvml_device, unsigned, int*) = nullptr;
  nvml_return (*remote_)(nvml_device, unsigned, nvml_pci_info*) = nullptr;
  nvml_return (*pci_info_)(nvml_device, nvml_pci_info*) = nullptr;
};

// --- measurements --------------------------------------------------------------------------

using results = topology;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Measures one ordered pair with memarea's copies, peer access on where it can be.
void measure(int a, int b, std::size_t size, int reps, results& r) {
  std::optional<peer::scoped_access> ab, ba;
  if (peer::can_access(a, b)) ab.emplace(a, b);
  if (peer::can_access(b, a)) ba.emplace(b, a);
  r.path[a][b] = (ab || ba) ? "peer" : "staged";
  buffer xa = area(a).allocate(size), xb = area(b).allocate(size);
  buffer ya = area(a).allocate(size), yb = area(b).allocate(size);
  stream sa(a), sb(b);
  // Unidirectional a -> b (warm-up first: the staging pool and peer mappings are made once).
  copy_peer_async(xb.data(), b, xa.data(), a, size, sa);
  sa.synchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) copy_peer_async(xb.data(), b, xa.data(), a, size, sa);
  sa.synchronize();
  r.uni[a][b] = static_cast<double>(size) * reps / seconds_since(t0) / 1e9;
  // Bidirectional: a -> b and b -> a at once, on a stream of each side; total bytes moved.
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    copy_peer_async(xb.data(), b, xa.data(), a, size, sa);
    copy_peer_async(ya.data(), a, yb.data(), b, size, sb);
  }
  sa.synchronize();
  sb.synchronize();
  r.bidi[a][b] = 2.0 * static_cast<double>(size) * reps / seconds_since(t0) / 1e9;
  // Latency of a 4 KiB copy, issue to completion (median).
  std::vector<double> us;
  for (int i = 0; i < std::max(reps, 5) * 4; ++i) {
    auto t = std::chrono::steady_clock::now();
    copy_peer_async(xb.data(), b, xa.data(), a, 4096, sa);
    sa.synchronize();
    us.push_back(seconds_since(t) * 1e6);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<long>(us.size() / 2), us.end());
  r.latency[a][b] = us[us.size() / 2];
}

/// Every ordered pair copies `size` bytes `reps` times at once, each on its own stream of the
/// source device, with peer access on wherever it can be (as a collective's all-to-all would).
/// Per-pair figures count the time until that pair's stream drained; the total counts all bytes
/// over the time until the last one did.
void measure_all_pairs(std::size_t size, int reps, results& r) {
  const int n = r.n;
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
    double seconds = 0;
  };
  std::vector<lane> lanes;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) lanes.push_back({a, b, area(a).allocate(size), area(b).allocate(size), stream(a)});
  for (auto& l : lanes) copy_peer_async(l.dst.data(), l.b, l.src.data(), l.a, size, l.s);  // warm
  for (auto& l : lanes) l.s.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    for (auto& l : lanes) copy_peer_async(l.dst.data(), l.b, l.src.data(), l.a, size, l.s);
  // Streams drain in any order: one waiter each, so no pair is charged for another's wait.
  std::vector<std::thread> waiters;
  for (auto& l : lanes)
    waiters.emplace_back([&l, t0] {
      l.s.synchronize();
      l.seconds = seconds_since(t0);
    });
  for (auto& w : waiters) w.join();
  double last = 0;
  for (auto& l : lanes) {
    r.concurrent[l.a][l.b] = static_cast<double>(size) * reps / l.seconds / 1e9;
    last = std::max(last, l.seconds);
  }
  r.concurrent_total = static_cast<double>(size) * reps * static_cast<double>(lanes.size()) /
                       last / 1e9;
}

nlohmann::json matrix_json(const std::vector<std::vector<double>>& m) {
  auto j = nlohmann::json::array();
  for (auto& row : m) {
    auto jr = nlohmann::json::array();
    for (double v : row) jr.push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
    j.push_back(jr);
  }
  return j;
}

}  // namespace

void topology_defaults(std::size_t& size, int& reps) {
  const bool on_sim = backend_name() == "sim";
  if (size == 0) size = on_sim ? (std::size_t{4} << 20) : (std::size_t{256} << 20);
  if (reps <= 0) reps = on_sim ? 3 : 10;
}

topology measure_topology(std::size_t size, int reps,
                          const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  results r;
  r.n = device_count();
  const auto n = static_cast<std::size_t>(r.n);
  const double nan = std::nan("");
  r.access.assign(n, std::vector<int>(n, 0));
  r.link.assign(n, std::vector<std::string>(n, "-"));
  r.uni.assign(n, std::vector<double>(n, nan));
  r.bidi = r.latency = r.concurrent = r.uni;
  r.path.assign(n, std::vector<std::string>(n, "-"));
  const std::string backend = backend_name();
  std::optional<nvml> ml;
  if (backend == "cuda") ml.emplace();
  for (int d = 0; d < r.n; ++d) {
    auto p = get_device_properties(d);
    r.names.push_back(p.name);
    r.pci.push_back(p.pci_bus_id);
  }
  for (int a = 0; a < r.n; ++a) {
    for (int b = 0; b < r.n; ++b) {
      if (a == b) continue;
      r.access[a][b] = peer::can_access(a, b) ? 1 : 0;
      if (backend == "sim") {
        r.link[a][b] = "sim";
      } else if (ml && ml->ok()) {
        auto l = ml->links(r.pci[a], r.pci[b]);
        if (!l) r.link[a][b] = "unknown";
        else if (l->first > 0) r.link[a][b] = fmt::format("NV{}", l->first);
        else if (l->first < 0) r.link[a][b] = fmt::format("NV{}?", -l->first);
        else if (l->second > 0) r.link[a][b] = "NVSwitch";
        else r.link[a][b] = "PCIe";
      } else {
        r.link[a][b] = backend == "cuda" ? "PCIe" : "unknown";
      }
    }
  }
  for (int a = 0; a < r.n; ++a) {
    for (int b = 0; b < r.n; ++b) {
      if (a == b) continue;
      say(fmt::format("measuring {} -> {}", a, b));
      measure(a, b, size, reps, r);
    }
  }
  if (r.n >= 2) {
    say("measuring all pairs at once");
    measure_all_pairs(size, reps, r);
  }
  return r;
}

nlohmann::json topology_json(const topology& r, std::size_t size, int reps) {
  nlohmann::json j;
  j["backend"] = backend_name();
  j["size"] = size;
  j["reps"] = reps;
  auto& ds = j["devices"] = nlohmann::json::array();
  for (int d = 0; d < r.n; ++d)
    ds.push_back({{"ordinal", d}, {"name", r.names[d]}, {"pci_bus_id", r.pci[d]}});
  j["access"] = r.access;
  j["link"] = r.link;
  j["path"] = r.path;
  j["unidirectional_gbps"] = matrix_json(r.uni);
  j["bidirectional_gbps"] = matrix_json(r.bidi);
  j["latency_4k_us"] = matrix_json(r.latency);
  j["all_pairs_at_once_gbps"] = matrix_json(r.concurrent);
  j["all_pairs_at_once_total_gbps"] =
      std::isnan(r.concurrent_total) ? nlohmann::json() : nlohmann::json(r.concurrent_total);
  return j;
}

}  // namespace memarea::report
