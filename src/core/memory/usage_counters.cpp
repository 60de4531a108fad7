#include "core/memory/usage_counters.hpp"

#include "core/memory/registry.hpp"

#include <algorithm>

namespace memarea::detail::usage {

namespace {
constinit row g_rows[kRows];

void raise(std::atomic<std::int64_t>& high, std::int64_t v) noexcept {
  std::int64_t seen = high.load(std::memory_order_relaxed);
  while (v > seen && !high.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}
}  // namespace

row& at(int row_index) noexcept { return g_rows[row_index]; }

void raise_peaks(int i, std::int64_t thread_cached) noexcept {
  row& r = g_rows[i];
  auto get = [&](field f) { return r.now[f].load(std::memory_order_relaxed); };
  const std::int64_t pieces = std::max<std::int64_t>(0, get(pool_handed) - thread_cached);
  raise(r.high[peak_live], get(direct) + pieces);
  raise(r.high[peak_cached], std::max<std::int64_t>(0, get(pool_reserved) - pieces));
  raise(r.high[peak_reserved], get(direct) + get(pool_reserved));
  raise(r.high[peak_exported], get(exported));
  raise(r.high[peak_imported], get(imported));
}

void add(int device, field f, std::int64_t delta) noexcept {
  const int i = row_of(device);
  if (i < 0) return;
  g_rows[i].now[f].fetch_add(delta, std::memory_order_relaxed);
  if (delta > 0) raise_peaks(i);
}

void account(const record& r, int sign, bool peaks) noexcept {
  const int i = row_of(r.device);
  if (i < 0 || r.kind == MEMAREA_MEMORY_REGISTERED) return;
  const field f = r.kind == MEMAREA_MEMORY_IPC_IMPORTED ? imported
                  : r.made_by == origin::pool          ? pool_reserved
                                                       : direct;
  g_rows[i].now[f].fetch_add(sign * static_cast<std::int64_t>(r.size), std::memory_order_relaxed);
  if (peaks && sign > 0) raise_peaks(i);
}

}  // namespace memarea::detail::usage
