// The limits benchmark: what a memory cap costs an allocation (include/memarea/limits.hpp).
// Each row times the same round trip with a cap set on device 0 (far above what it reserves,
// so nothing is refused) against no cap, in turns: a pool's allocate and free (its thread
// cache: no cap is judged there), and an area's allocate and free (the driver's allocation,
// where the cap is judged). The no-cap side stands in the raw column.
#include "bench/src/bench.hpp"

#include <memarea/area.hpp>
#include <memarea/limits.hpp>
#include <memarea/pool.hpp>

#include <functional>
#include <iostream>

namespace memarea::cli::bench {
namespace {

/// Round trips per timed sample of the pool (one is below the clock's grain); the area's,
/// each a driver call, are timed in smaller batches.
constexpr int kPoolBatch = 1000;
constexpr int kAreaBatch = 20;

void limits_cost(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench limits: no devices, no rows\n";
    return;
  }
  constexpr std::size_t kCap = std::size_t{1} << 50;  // never reached
  const std::size_t before = memory_limit(0);
  area a(0);
  pool p(a);
  p.deallocate(p.allocate(4096));  // the pool's block exists: the round trips stay in it
  auto run = [&](const char* group, const char* variant, int batch, std::function<void()> once) {
    const std::function<void()> capped = [&] {
      set_memory_limit(0, kCap);
      for (int i = 0; i < batch; ++i) once();
    };
    const std::function<void()> uncapped = [&] {
      set_memory_limit(0, 0);
      for (int i = 0; i < batch; ++i) once();
    };
    const paired_times t = paired_times_us(ctx.repetitions, capped, uncapped);
    auto per_call = [&](std::vector<double> v) {
      for (double& x : v) x = x * 1000.0 / batch;  // us per batch -> ns per round trip
      return v;
    };
    ctx.add(measured_row(group, variant, "ns", per_call(t.a), per_call(t.b), "no cap"));
  };
  run("limits", "pool round trip (4 KiB), cap set", kPoolBatch,
      [&] { p.deallocate(p.allocate(4096)); });
  run("limits", "area round trip (1 MiB), cap set", kAreaBatch, [&] { (void)a.allocate(1 << 20); });
  set_memory_limit(0, before);
}

const registrar reg("limits", limits_cost,
                    {"limits: pool round trip with a cap set against none",
                     "limits: area round trip with a cap set against none"});

}  // namespace
}  // namespace memarea::cli::bench
