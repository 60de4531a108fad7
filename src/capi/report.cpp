// The C API of the info and topology reports (memarea/report.h): the JSON core/report.hpp
// builds, handed over as a malloc'ed string.
#include "capi/c_call.hpp"
#include "core/memory/tracking.hpp"
#include "core/report/report.hpp"

#include <memarea/report.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

using memarea::detail::c_call;
using memarea::detail::require;

namespace {

/// A copy of s in memory memarea_string_free frees (malloc: C callers and ctypes may free
/// nothing else).
char* c_string(const std::string& s) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace

extern "C" {

memarea_status memarea_info_json(char** json) {
  return c_call(__func__, [&] {
    require(json, "json");
    *json = c_string(memarea::report::info_json().dump(2));
  });
}

memarea_status memarea_topo_json(char** json, size_t size, int reps) {
  return memarea_topo_json_ex(json, size, reps, 0, nullptr, nullptr);
}

memarea_status memarea_topo_json_ex(char** json, size_t size, int reps, unsigned flags,
                                    memarea_topo_progress_fn progress, void* user) {
  return c_call(__func__, [&] {
    require(json, "json");
    *json = nullptr;
    if (flags & ~MEMAREA_TOPO_BASELINE)
      throw memarea::error(memarea::errc::invalid_value,
                           "flags " + std::to_string(flags) + " has unknown bits");
    memarea::report::topology_options o;
    o.size = size;
    o.reps = reps;
    o.baseline = (flags & MEMAREA_TOPO_BASELINE) != 0;
    memarea::report::topology_defaults(o.size, o.reps);
    const auto t = memarea::report::measure_topology(o, [&](const std::string& what) {
      if (progress) progress(what.c_str(), user);
    });
    *json = c_string(memarea::report::topology_json(t, o).dump(2));
  });
}

memarea_status memarea_ps_json(char** json, const int* device) {
  return c_call(__func__, [&] {
    require(json, "json");
    *json = nullptr;
    if (device && *device < MEMAREA_CPU_DEVICE_ID)
      throw memarea::error(memarea::errc::invalid_device,
                           "device " + std::to_string(*device) + " is neither a device nor the host");
    *json = c_string(memarea::report::ps_json(device).dump(2));
  });
}

// Tracking and snapshots.

memarea_status memarea_set_tracking(int on) {
  return c_call(__func__, [&] { memarea::detail::tracking::set(on != 0); });
}

memarea_status memarea_tracking(int* on) {
  return c_call(__func__, [&] {
    require(on, "on");
    *on = memarea::detail::tracking::enabled() ? 1 : 0;
  });
}

memarea_status memarea_snapshot_json(char** json, int device) {
  return c_call(__func__, [&] {
    require(json, "json");
    *json = nullptr;
    // Frames name objects and symbols by whatever bytes they have: not always UTF-8.
    *json = c_string(memarea::report::snapshot_json(device).dump(
        2, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

void memarea_string_free(char* s) { std::free(s); }

}  // extern "C"
