// The links of `memarea topo` (core/report/report.hpp, topo.cpp): each pair's link as
// `nvidia-smi topo -m` names it and each device's host link, read through NVML (dlopen'ed:
// memarea does not link it), with their nominal peaks and what each label means. docs/topo.md
// lists the labels.
#include "core/report/report.hpp"

#include <memarea/device.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace memarea::report {
namespace {

// --- links through NVML (loaded at run time; the few types it needs are declared here) ------

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
struct nvml_field_value {  // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;  // nvmlValueType_t
  nvml_return result;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};
constexpr unsigned nvml_max_links = 18;               // NVML_NVLINK_MAX_LINKS
constexpr unsigned nvml_fi_nvlink_speed_common = 90;  // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON
constexpr int nvml_p2p_caps_index_nvlink = 2;         // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int nvml_p2p_status_ok = 0;                 // NVML_P2P_STATUS_OK

/// Where a device's NVLinks lead, seen from one peer.
struct nvlinks {
  int to_peer = 0;    ///< links whose far end is the peer
  int to_switch = 0;  ///< links whose far end is no GPU of this process (an NVSwitch)
  int unnamed = 0;    ///< links whose far end NVML cannot name (a VM hides the switch's address)
  int active = 0;
};

using pci_address = std::tuple<unsigned, unsigned, unsigned>;  // domain, bus, device

/// NVML's link and PCIe queries, or nothing when the library is not there.
class nvml {
 public:
  nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    load(init_, "nvmlInit_v2");
    load(shutdown_, "nvmlShutdown");
    load(by_pci_, "nvmlDeviceGetHandleByPciBusId_v2");
    load(state_, "nvmlDeviceGetNvLinkState");
    load(remote_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    load(pci_info_, "nvmlDeviceGetPciInfo_v3");
    load(ancestor_, "nvmlDeviceGetTopologyCommonAncestor");
    load(fields_, "nvmlDeviceGetFieldValues");
    load(max_gen_, "nvmlDeviceGetMaxPcieLinkGeneration");
    load(max_width_, "nvmlDeviceGetMaxPcieLinkWidth");
    load(p2p_, "nvmlDeviceGetP2PStatus");
    ok_ = init_ && by_pci_ && init_() == 0;
  }
  ~nvml() {
    if (ok_ && shutdown_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  nvml(const nvml&) = delete;
  nvml& operator=(const nvml&) = delete;
  bool ok() const noexcept { return ok_; }

  /// The PCI address of the device CUDA names `pci`, as NVML names it (in a VM CUDA's bus id
  /// may differ from the one the links report), else as the string says.
  std::optional<pci_address> address(const std::string& pci) {
    nvml_device d = nullptr;
    nvml_pci_info info{};
    if (ok_ && pci_info_ && by_pci_(pci.c_str(), &d) == 0 && pci_info_(d, &info) == 0)
      return pci_address{info.domain, info.bus, info.device};
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (std::sscanf(pci.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
      return pci_address{dom, bus, dev};
    return std::nullopt;
  }

  /// The NVLinks of the device at `pci` as seen from `peer`; `gpus` are every GPU's addresses.
  /// nullopt when NVML cannot say.
  std::optional<nvlinks> links(const std::string& pci, const pci_address& peer,
                               const std::vector<std::optional<pci_address>>& gpus) {
    nvml_device dev = nullptr;
    if (!ok_ || !state_ || !remote_ || by_pci_(pci.c_str(), &dev) != 0) return std::nullopt;
    nvlinks r;
    for (unsigned l = 0; l < nvml_max_links; ++l) {
      int on = 0;
      if (state_(dev, l, &on) != 0 || on != 1) continue;
      ++r.active;
      nvml_pci_info info{};
      const bool named = remote_(dev, l, &info) == 0 && info.domain != 0xffffffffu;
      const pci_address far{info.domain, info.bus, info.device};
      if (!named) ++r.unnamed;
      else if (far == peer) ++r.to_peer;
      else if (std::none_of(gpus.begin(), gpus.end(), [&](auto& g) { return g && *g == far; }))
        ++r.to_switch;
      if (std::getenv("MEMAREA_TOPO_DEBUG"))
        std::cerr << fmt::format("topo: {} link {} -> {}\n", pci, l,
                                 named ? fmt::format("{:x}:{:x}:{:x} ({})", info.domain,
                                                     info.bus, info.device, info.bus_id)
                                       : std::string("far end not named by NVML"));
    }
    return r;
  }

  /// NVML's answer to "do a and b talk over NVLink" (nvmlDeviceGetP2PStatus with the NVLink
  /// index): true, false, or nullopt when NVML cannot say. Asked where the links' far ends
  /// cannot be named (an NVSwitch behind a VM's hidden PCI addresses), as nvidia-smi does.
  std::optional<bool> nvlink_p2p(const std::string& a, const std::string& b) {
    nvml_device da = nullptr, db = nullptr;
    int status = -1;
    if (!ok_ || !p2p_ || by_pci_(a.c_str(), &da) != 0 || by_pci_(b.c_str(), &db) != 0 ||
        p2p_(da, db, nvml_p2p_caps_index_nvlink, &status) != 0)
      return std::nullopt;
    if (std::getenv("MEMAREA_TOPO_DEBUG"))
      std::cerr << fmt::format("topo: {} -> {} NVML P2P NVLink status {} ({})\n", a, b, status,
                               status == nvml_p2p_status_ok ? "ok" : "not over NVLink");
    return status == nvml_p2p_status_ok;
  }

  /// `nvidia-smi topo -m`'s name of the PCIe path between two devices: PIX, PXB, PHB, NODE,
  /// SYS; "" when NVML cannot say.
  std::string pcie_path(const std::string& a, const std::string& b) {
    nvml_device da = nullptr, db = nullptr;
    int level = -1;
    if (!ok_ || !ancestor_ || by_pci_(a.c_str(), &da) != 0 || by_pci_(b.c_str(), &db) != 0 ||
        ancestor_(da, db, &level) != 0)
      return "";
    // nvmlGpuTopologyLevel_t: INTERNAL 0 (one board), SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30,
    // NODE 40, SYSTEM 50.
    if (level <= 10) return "PIX";
    if (level <= 20) return "PXB";
    if (level <= 30) return "PHB";
    if (level <= 40) return "NODE";
    return "SYS";
  }

  /// GB/s of one NVLink in one direction (NVML's common link speed); NaN when unknown.
  double nvlink_gbps(const std::string& pci) {
    nvml_device d = nullptr;
    nvml_field_value v{};
    v.field_id = nvml_fi_nvlink_speed_common;
    if (!ok_ || !fields_ || by_pci_(pci.c_str(), &d) != 0 || fields_(d, 1, &v) != 0 ||
        v.result != 0)
      return std::nan("");
    double mbps = 0;  // MB/s; nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ull, 4 sll, 5 int
    switch (v.value_type) {
      case 0: mbps = v.value.d; break;
      case 1: mbps = v.value.ui; break;
      case 2: mbps = static_cast<double>(v.value.ul); break;
      case 3: mbps = static_cast<double>(v.value.ull); break;
      case 4: mbps = static_cast<double>(v.value.sll); break;
      case 5: mbps = v.value.si; break;
      default: return std::nan("");
    }
    return mbps > 0 ? mbps / 1000.0 : std::nan("");
  }

  /// The device's PCIe link at its best (the current one idles at lower generations):
  /// generation and width, or nullopt.
  std::optional<std::pair<unsigned, unsigned>> pcie(const std::string& pci) {
    nvml_device d = nullptr;
    unsigned gen = 0, width = 0;
    if (!ok_ || !max_gen_ || !max_width_ || by_pci_(pci.c_str(), &d) != 0 ||
        max_gen_(d, &gen) != 0 || max_width_(d, &width) != 0 || gen == 0 || width == 0)
      return std::nullopt;
    return std::pair{gen, width};
  }

 private:
  template <class F>
  void load(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib_, name));
  }
  void* lib_ = nullptr;
  bool ok_ = false;
  nvml_return (*init_)() = nullptr;
  nvml_return (*shutdown_)() = nullptr;
  nvml_return (*by_pci_)(const char*, nvml_device*) = nullptr;
  nvml_return (*state_)(nvml_device, unsigned, int*) = nullptr;
  nvml_return (*remote_)(nvml_device, unsigned, nvml_pci_info*) = nullptr;
  nvml_return (*pci_info_)(nvml_device, nvml_pci_info*) = nullptr;
  nvml_return (*ancestor_)(nvml_device, nvml_device, int*) = nullptr;
  nvml_return (*fields_)(nvml_device, int, nvml_field_value*) = nullptr;
  nvml_return (*max_gen_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*max_width_)(nvml_device, unsigned*) = nullptr;
  nvml_return (*p2p_)(nvml_device, nvml_device, int, int*) = nullptr;
};

/// GB/s per lane and direction of PCIe generation `gen` after line coding (8b/10b to Gen2,
/// 128b/130b from Gen3, FLIT from Gen6); NaN for one not known.
double pcie_lane_gbps(unsigned gen) {
  static constexpr std::array<double, 7> rate{0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  return gen < rate.size() && gen > 0 ? rate[gen] : std::nan("");
}

}  // namespace

void label_links(topology& r) {
  auto& legend = r.legend;
  const std::string backend = backend_name();
  const double nan = std::nan("");
  if (backend == "sim") {
    for (int a = 0; a < r.n; ++a) {
      r.host_link.push_back("sim");
      for (int b = 0; b < r.n; ++b)
        if (a != b) r.link[a][b] = "sim";
    }
    r.host_link_nominal.assign(static_cast<std::size_t>(r.n), nan);
    r.peer_capacity = r.host_link_nominal;
    if (r.n > 0)
      legend["sim"] = "emulated devices in host memory: copies are the host's memcpy, "
                      "no real link";
    return;
  }
  std::optional<nvml> ml;
  if (backend == "cuda") ml.emplace();
  if (!ml || !ml->ok()) {
    // Without NVML nothing names the links; guessing "PCIe" would be wrong on NVLink machines.
    const std::string label = ml ? "unknown (no NVML)" : "unknown (not read on " + backend + ")";
    for (int a = 0; a < r.n; ++a) {
      r.host_link.push_back(label);
      for (int b = 0; b < r.n; ++b)
        if (a != b) r.link[a][b] = label;
    }
    r.host_link_nominal.assign(static_cast<std::size_t>(r.n), nan);
    r.peer_capacity = r.host_link_nominal;
    if (r.n > 0)
      legend[label] = ml ? "libnvidia-ml.so.1 (NVML) could not be loaded or initialised, so "
                           "the link type was not read"
                         : "memarea reads link types through NVML, on the CUDA backend only";
    return;
  }
  std::vector<std::optional<pci_address>> gpus;
  for (int d = 0; d < r.n; ++d) gpus.push_back(ml->address(r.pci[d]));
  for (int d = 0; d < r.n; ++d) {
    const auto p = ml->pcie(r.pci[d]);
    if (!p) {
      r.host_link.push_back("PCIe (width not read)");
      r.host_link_nominal.push_back(nan);
      legend["PCIe (width not read)"] = "host link whose generation and width NVML did not give";
      continue;
    }
    const auto label = fmt::format("PCIe Gen{} x{}", p->first, p->second);
    r.host_link.push_back(label);
    r.host_link_nominal.push_back(pcie_lane_gbps(p->first) * p->second);
    legend[label] = fmt::format("host link: PCIe generation {}, {} lanes ({:.1f} GB/s per "
                                "direction nominal)",
                                p->first, p->second, r.host_link_nominal.back());
  }
  // What all of a device's peer copies can share, per direction: its direct NVLinks, its
  // NVSwitch links once, its host link once for the peers it reaches over PCIe.
  r.peer_capacity.assign(static_cast<std::size_t>(r.n), 0.0);
  for (int a = 0; a < r.n; ++a) {
    const double per_link = ml->nvlink_gbps(r.pci[a]);
    double direct = 0, shared = 0;
    bool over_pcie = false, unknown = false;
    for (int b = 0; b < r.n; ++b) {
      if (a == b) continue;
      std::optional<nvlinks> l;
      if (gpus[b]) l = ml->links(r.pci[a], *gpus[b], gpus);
      // As `nvidia-smi topo -m`: NV# counts the bonded links that lead to the peer, directly
      // or through NVSwitches. Links to no GPU of this process (a switch) or to a far end NVML
      // cannot name (a VM hides the switch's PCI address) reach the peer only when NVML's P2P
      // status says the pair talks over NVLink; with two GPUs and no answer, they can only lead
      // to the other one or to a switch that does.
      int count = 0;
      bool through_switch = false;
      std::string how, fallback;
      const int far = l ? l->to_switch + l->unnamed : 0;
      if (l && l->to_peer > 0) {
        count = l->to_peer;
        how = "NVLinks between the two GPUs (NVML's remote PCI address names the peer)";
      } else if (far > 0) {
        const auto p2p = ml->nvlink_p2p(r.pci[a], r.pci[b]);
        through_switch = true;
        if (p2p && *p2p) {
          count = far;
          how = "active NVLinks of the source GPU that lead to no named GPU (NVSwitches, or "
                "far ends NVML cannot name), the pair's NVML P2P status being NVLink: as "
                "nvidia-smi counts on NVSwitch systems";
        } else if (!p2p && l->to_switch > 0) {
          count = l->to_switch;
          how = "NVLinks of the source GPU to NVSwitches (NVML's P2P status gave no answer)";
        } else if (!p2p && r.n == 2) {
          count = far;
          how = "NVLinks of the source GPU whose far end NVML cannot name, NVML's P2P status "
                "giving no answer; with two GPUs they lead to the peer or to a switch that does";
        } else {
          fallback = p2p ? fmt::format("GPU {} has {} active NVLinks to no named GPU, but "
                                       "NVML's P2P status says {} is not reached over NVLink",
                                       a, far, b)
                         : fmt::format("GPU {} has {} active NVLinks whose far end NVML cannot "
                                       "name and NVML's P2P status gave no answer for {} -> {}",
                                       a, far, a, b);
        }
      }
      if (count > 0) {
        r.link[a][b] = fmt::format("NV{}", count);
        r.link_nominal[a][b] = per_link * count;
        // NVML may name the links but not their speed (seen in VMs): the pair's nominal rate,
        // and so the device's capacity, are unknown then, not zero.
        if (std::isnan(per_link)) {
          unknown = true;
          legend["NVLink speed"] = "NVML named the NVLinks but gave no speed for them "
                                   "(NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON), so their nominal "
                                   "rate and each device's peer capacity are unknown";
        }
        else if (through_switch) shared = std::max(shared, r.link_nominal[a][b]);
        else direct += r.link_nominal[a][b];
        auto& text = legend[r.link[a][b]];
        if (text.empty()) text = fmt::format("a bonded set of {} NVLinks; named from: {}", count, how);
        else if (text.find(how) == std::string::npos) text += "; or from: " + how;
        continue;
      }
      over_pcie = true;
      if (!fallback.empty()) legend["PCIe fallback " + std::to_string(a) + "->" +
                                    std::to_string(b)] = fallback + ": the PCIe path is shown";
      const std::string path = ml->pcie_path(r.pci[a], r.pci[b]);
      static const std::map<std::string, std::string> meaning{
          {"PIX", "PCIe through at most one PCIe bridge"},
          {"PXB", "PCIe through several PCIe bridges, not the host bridge"},
          {"PHB", "PCIe through a PCIe host bridge (the CPU)"},
          {"NODE", "PCIe through the host bridges of one NUMA node"},
          {"SYS", "PCIe and the interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)"}};
      if (path.empty()) {
        r.link[a][b] = "unknown (NVML: no answer)";
        legend[r.link[a][b]] = "NVML gave neither NVLinks nor a PCIe path for the pair";
        unknown = true;
        continue;
      }
      r.link[a][b] = path;
      r.link_nominal[a][b] =
          std::min(r.host_link_nominal[static_cast<std::size_t>(a)],
                   r.host_link_nominal[static_cast<std::size_t>(b)]);
      legend[path] = meaning.at(path) + " (as nvidia-smi topo -m names it)";
    }
    r.peer_capacity[static_cast<std::size_t>(a)] =
        unknown ? nan : direct + shared + (over_pcie ? r.host_link_nominal[static_cast<std::size_t>(a)] : 0.0);
  }
}

}  // namespace memarea::report
