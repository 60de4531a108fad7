// The snapshot (memarea_snapshot_json, docs/usage.md "Snapshots"): per device, the driver
// allocations memarea holds (the registry's records: pool blocks, areas, host and managed
// memory), the pool pieces tracking saw inside each block, each allocation's tracking record,
// the largest users, and the usage counters.
#include "core/memory/registry.hpp"
#include "core/memory/tracking.hpp"
#include "core/report/report.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/usage.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

namespace memarea::report {

namespace {

using detail::tracking::entry;

const char* kind_name(memarea_memory_kind k) {
  switch (k) {
    case MEMAREA_MEMORY_DEVICE: return "device";
    case MEMAREA_MEMORY_HOST: return "host";
    case MEMAREA_MEMORY_MANAGED: return "managed";
    default: return "unknown";
  }
}

const char* origin_name(detail::origin o) {
  switch (o) {
    case detail::origin::area: return "area";
    case detail::origin::managed: return "managed";
    case detail::origin::host: return "host";
    case detail::origin::pool: return "pool_block";
  }
  return "unknown";
}

/// Whether frame f is memarea's, the C and C++ runtimes' or a sanitizer's (whose interceptor
/// of backtrace() is a frame of every stack in such a build).
bool inside_memarea_or_runtime(const std::string& f) {
  return f.find("libmemarea") != std::string::npos ||
         f.find("memarea::detail") != std::string::npos || f.rfind("memarea_", 0) == 0 ||
         f.find("libc.so") != std::string::npos || f.find("libstdc++") != std::string::npos ||
         f.find("libasan") != std::string::npos || f.find("libtsan") != std::string::npos ||
         f.find("libubsan") != std::string::npos || f.find("libclang_rt") != std::string::npos;
}

/// The first frame of a stack outside memarea and the C and C++ runtimes (the user it names).
/// Where no such frame has a name (a program that does not export its symbols, -rdynamic), the
/// object of the first one: "? in app"; "?" when the stack has nothing outside them.
std::string user_of(const std::vector<std::string>& stack) {
  for (const auto& f : stack)
    if (!f.empty() && f[0] != '?' && !inside_memarea_or_runtime(f))
      return f.substr(0, f.find('+'));
  for (const auto& f : stack) {
    // An unnamed frame reads "? (/path/to/object)".
    const auto open = f.find(" (");
    if (f.empty() || f[0] != '?' || open == std::string::npos || inside_memarea_or_runtime(f))
      continue;
    std::string object = f.substr(open + 2, f.size() - open - 3);
    if (const auto slash = object.rfind('/'); slash != std::string::npos)
      object = object.substr(slash + 1);
    return "? in " + object;
  }
  return "?";
}

nlohmann::json tracked(const entry& e, std::int64_t now, std::string* user) {
  const auto stack = detail::tracking::symbolise(e);
  if (user) *user = user_of(stack);
  return {{"size", e.size},
          {"age_s", static_cast<double>(now - e.born_ns) / 1e9},
          {"thread", e.thread},
          {"stream", e.stream ? fmt::format("{}", e.stream) : std::string()},
          {"stack", stack}};
}

nlohmann::json device_snapshot(int device, const std::vector<entry>& records,
                               std::int64_t now) {
  const auto& reg = detail::allocations();
  const auto held = reg.select([&](const detail::record& r) { return r.device == device; });
  std::map<std::uintptr_t, const entry*> by_ptr;
  for (const auto& e : records)
    if (e.device == device) by_ptr[reinterpret_cast<std::uintptr_t>(e.ptr)] = &e;
  std::map<std::string, std::size_t> users;  // bytes by user (stack's first frame) or pool
  nlohmann::json blocks = nlohmann::json::array();
  std::vector<detail::record> sorted = held;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.base < b.base; });
  for (const auto& r : sorted) {
    const auto base = reinterpret_cast<std::uintptr_t>(r.base);
    nlohmann::json b = {{"address", fmt::format("{}", r.base)},
                        {"size", r.size},
                        {"kind", kind_name(r.kind)},
                        {"origin", origin_name(r.made_by)}};
    if (r.made_by == detail::origin::pool) {
      b["pool"] = fmt::format("{}", r.owner);
      nlohmann::json pieces = nlohmann::json::array();
      std::size_t in_use = 0;
      for (auto it = by_ptr.lower_bound(base); it != by_ptr.end() && it->first < base + r.size;
           ++it) {
        const entry& e = *it->second;
        if (!e.piece) continue;
        std::string user;
        nlohmann::json t = tracked(e, now, &user);
        users[user] += e.size;
        in_use += e.size;
        pieces.push_back({{"offset", it->first - base}, {"size", e.size}, {"live", true},
                          {"track", std::move(t)}});
      }
      b["pieces"] = std::move(pieces);
      b["tracked_live"] = in_use;
    } else if (auto it = by_ptr.find(base); it != by_ptr.end()) {
      std::string user;
      b["track"] = tracked(*it->second, now, &user);
      users[user] += r.size;
    }
    blocks.push_back(std::move(b));
  }
  std::vector<std::pair<std::string, std::size_t>> top(users.begin(), users.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top.size() > 10) top.resize(10);
  nlohmann::json largest = nlohmann::json::array();
  for (const auto& [who, bytes] : top) largest.push_back({{"user", who}, {"bytes", bytes}});
  const usage_figures f = memory_usage(device);
  return {{"device", device},
          {"blocks", std::move(blocks)},
          {"largest_users", std::move(largest)},
          {"usage",
           {{"live", f.live}, {"cached", f.cached}, {"reserved", f.reserved},
            {"exported", f.exported}, {"imported", f.imported}, {"peak_live", f.peak_live},
            {"peak_reserved", f.peak_reserved}}}};
}

}  // namespace

nlohmann::json snapshot_json(int device) {
  const int n = device_count();
  if (device < -1 || device >= n)
    throw error(errc::invalid_device,
                fmt::format("snapshot: device {} is neither -1 (all) nor one of the {} devices",
                            device, n));
  const bool on = detail::tracking::enabled();
  const auto records = on ? detail::tracking::all() : std::vector<entry>{};
  const std::int64_t now = detail::tracking::now_ns();
  nlohmann::json devices = nlohmann::json::array();
  for (int d = device < 0 ? 0 : device; d < (device < 0 ? n : device + 1); ++d)
    devices.push_back(device_snapshot(d, records, now));
  if (device < 0) devices.push_back(device_snapshot(MEMAREA_CPU_DEVICE_ID, records, now));
  return {{"tracking", on},
          {"tracking_note",
           on ? "allocations made before tracking was turned on have no track record"
              : "tracking is off (MEMAREA_TRACK=1 or memarea_set_tracking): no records"},
          {"tracked_records", records.size()},
          {"stack_walker", on ? detail::tracking::stack_walker_name() : ""},
          {"stack_depth", on ? detail::tracking::stack_depth() : 0},
          {"tracking_since_s",
           on ? static_cast<double>(now - detail::tracking::since_ns()) / 1e9 : 0.0},
          {"devices", std::move(devices)}};
}

}  // namespace memarea::report
