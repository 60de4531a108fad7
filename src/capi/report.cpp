// The C API of the info and topology reports (memarea/report.h): the JSON core/report.hpp
// builds, handed over as a malloc'ed string.
#include "capi/c_call.hpp"
#include "core/report.hpp"

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
  return c_call(__func__, [&] {
    require(json, "json");
    memarea::report::topology_defaults(size, reps);
    const auto t = memarea::report::measure_topology(size, reps);
    *json = c_string(memarea::report::topology_json(t, size, reps).dump(2));
  });
}

void memarea_string_free(char* s) { std::free(s); }

}  // extern "C"
