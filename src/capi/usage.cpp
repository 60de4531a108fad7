// The C API of memory usage (include/memarea/memarea.h, "Memory usage").
#include "capi/c_call.hpp"

#include <memarea/memarea.h>
#include <memarea/usage.hpp>

#include <cstddef>
#include <cstring>
#include <string>

using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_memory_usage(int device, memarea_memory_usage_t* out) {
  return c_call(__func__, [&] {
    require(out, "out");
    // The first version's fields: a caller built against a later memarea.h passes more.
    constexpr std::size_t first = offsetof(memarea_memory_usage_t, peak_imported) + sizeof(size_t);
    const std::size_t size = out->size;
    if (size < first)
      throw memarea::error(memarea::errc::invalid_value,
                           "out->size " + std::to_string(size) +
                               " is smaller than memarea_memory_usage_t (set it to its sizeof)");
    const memarea::usage_figures f = memarea::memory_usage(device);
    memarea_memory_usage_t u{};
    u.size = size;
    u.device = f.device;
    u.live = f.live;
    u.cached = f.cached;
    u.reserved = f.reserved;
    u.exported = f.exported;
    u.imported = f.imported;
    u.peak_live = f.peak_live;
    u.peak_cached = f.peak_cached;
    u.peak_reserved = f.peak_reserved;
    u.peak_exported = f.peak_exported;
    u.peak_imported = f.peak_imported;
    std::memcpy(out, &u, sizeof u);  // fields this version does not know stay as they were
  });
}

memarea_status memarea_memory_usage_reset_peaks(int device) {
  return c_call(__func__, [&] { memarea::reset_usage_peaks(device); });
}

}  // extern "C"
