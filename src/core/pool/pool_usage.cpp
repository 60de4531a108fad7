// memory_usage and reset_usage_peaks (include/memarea/usage.hpp): the counters of
// core/memory/usage_counters.hpp, with the bytes that pools' per-thread caches hold summed now.
// Here in the pool room because only it can sum those caches.
#include "core/memory/usage_counters.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/system.hpp"

#include <memarea/memarea.h>
#include <memarea/usage.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace memarea {

namespace {

/// device's row; invalid_device unless it is a device of this backend or the host.
int checked_row(int device, const char* what) {
  const int row = detail::usage::row_of(device);
  if (device == cpu_device_id) return row;
  if (row < 0 || !detail::system::get().valid_device(device))
    throw error(errc::invalid_device,
                fmt::format("{}: device {} is neither a device (0 to {}) nor the host ({})", what,
                            device, detail::system::get().device_count() - 1, cpu_device_id));
  return row;
}

std::size_t positive(std::int64_t v) { return v > 0 ? static_cast<std::size_t>(v) : 0; }

}  // namespace

namespace detail {

usage_figures usage_now(int device) {
  namespace u = detail::usage;
  const int row = u::row_of(device);
  if (row < 0) return usage_figures{device};
  const auto thread_cached = static_cast<std::int64_t>(detail::pool_thread_cached_bytes(device));
  u::raise_peaks(row, thread_cached);
  u::row& r = u::at(row);
  auto get = [&](u::field f) { return r.now[f].load(std::memory_order_relaxed); };
  auto high = [&](u::peak p) { return positive(r.high[p].load(std::memory_order_relaxed)); };
  const std::int64_t pieces = std::max<std::int64_t>(0, get(u::pool_handed) - thread_cached);
  usage_figures f;
  f.device = device;
  f.live = positive(get(u::direct) + pieces);
  f.cached = positive(get(u::pool_reserved) - pieces);
  f.reserved = positive(get(u::direct) + get(u::pool_reserved));
  f.exported = positive(get(u::exported));
  f.imported = positive(get(u::imported));
  f.peak_live = std::max(high(u::peak_live), f.live);
  f.peak_cached = std::max(high(u::peak_cached), f.cached);
  f.peak_reserved = std::max(high(u::peak_reserved), f.reserved);
  f.peak_exported = std::max(high(u::peak_exported), f.exported);
  f.peak_imported = std::max(high(u::peak_imported), f.imported);
  return f;
}

}  // namespace detail

usage_figures memory_usage(int device) {
  (void)checked_row(device, "memory usage");
  return detail::usage_now(device);
}

void reset_usage_peaks(int device) {
  namespace u = detail::usage;
  const int row = checked_row(device, "memory usage reset peaks");
  const usage_figures f = detail::usage_now(device);
  u::row& r = u::at(row);
  r.high[u::peak_live].store(static_cast<std::int64_t>(f.live), std::memory_order_relaxed);
  r.high[u::peak_cached].store(static_cast<std::int64_t>(f.cached), std::memory_order_relaxed);
  r.high[u::peak_reserved].store(static_cast<std::int64_t>(f.reserved), std::memory_order_relaxed);
  r.high[u::peak_exported].store(static_cast<std::int64_t>(f.exported), std::memory_order_relaxed);
  r.high[u::peak_imported].store(static_cast<std::int64_t>(f.imported), std::memory_order_relaxed);
}

}  // namespace memarea
