// This process's usage figures, published in its lease for `memarea ps` (base/lease_table.hpp):
// a task of the background thread, run with IPC's, so a process publishes once it has a lease
// (its first device allocation makes one) and then every tick.
#include "base/lease.hpp"
#include "core/ipc/ipc_impl.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/system.hpp"

#include <algorithm>

namespace memarea::detail::ipc_internal {

void publish_usage() noexcept {
  if (lease::current() == 0) return;
  try {
    lease_table::row rows[lease_table::kMaxRows] = {};
    const int devices =
        std::min<int>(system::get().device_count(), static_cast<int>(lease_table::kMaxRows) - 1);
    std::uint32_t n = 0;
    for (int d = -1; d < devices; ++d) {
      const usage_figures f = usage_now(d);
      lease_table::row& r = rows[n++];
      r.device = d;
      r.live = f.live;
      r.cached = f.cached;
      r.reserved = f.reserved;
      r.exported = f.exported;
      r.imported = f.imported;
      r.peak_live = f.peak_live;
      r.peak_cached = f.peak_cached;
      r.peak_reserved = f.peak_reserved;
      r.peak_exported = f.peak_exported;
      r.peak_imported = f.peak_imported;
    }
    (void)lease::publish_usage(rows, n);
  } catch (...) {
    // Out of memory, or no system yet: the next tick publishes.
  }
}

}  // namespace memarea::detail::ipc_internal
