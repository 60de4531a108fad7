// The tracking benchmark: what allocation tracking (memarea_set_tracking, docs/usage.md) costs
// an allocation while on. Each row times the same round trip with tracking on against off, in
// turns: a pool's allocate and free (its thread cache, where the piece's record and its stack
// are the whole added cost) and an area's allocate and free (a driver call). What tracking off
// costs against a library without the hooks is a before/after comparison of the `pool` case's
// rows on one machine (scripts/bench-compare.py): no build of this one lacks them.
#include "bench/src/bench.hpp"

#include <memarea/area.hpp>
#include <memarea/pool.hpp>
#include <memarea/report.h>

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <iostream>

namespace memarea::cli::bench {
namespace {

/// Round trips per timed sample of the pool (one is near the clock's grain); the area's, each a
/// driver call, in smaller batches.
constexpr int kPoolBatch = 1000;
constexpr int kAreaBatch = 20;

using clock_type = std::chrono::steady_clock;

void set_tracking(bool on) {
  if (memarea_set_tracking(on ? 1 : 0) != MEMAREA_SUCCESS)
    throw error(errc::unknown, "bench tracking: memarea_set_tracking failed");
}

void tracking_cost(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench tracking: no devices, no rows\n";
    return;
  }
  int was = 0;
  (void)memarea_tracking(&was);
  area a(0);
  pool p(a);
  p.deallocate(p.allocate(4096));  // the pool's block exists: the round trips stay in it
  // First use, once per process: turning tracking on for the first time (the stack walker
  // found and loaded) and the first tracked round trip (its first walk), against one round
  // trip with tracking off. One sample a side: a process has one first time.
  if (was == 0) {
    auto time_ns = [](const std::function<void()>& f) {
      const auto t0 = clock_type::now();
      f();
      return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    };
    const double off = time_ns([&] { p.deallocate(p.allocate(4096)); });
    const double first = time_ns([&] {
      set_tracking(true);
      p.deallocate(p.allocate(4096));
    });
    set_tracking(false);
    row r = measured_row("tracking", "first use: turned on, then one pool round trip (4 KiB)",
                         "ns", {first}, {off}, "one round trip, tracking off");
    r.note = "once per process: the walker loaded and the first stack walked";
    ctx.add(r);
  }
  auto run = [&](const char* variant, int batch, double target_ns,
                 std::function<void()> once) {
    const std::function<void()> on = [&] {
      set_tracking(true);
      for (int i = 0; i < batch; ++i) once();
    };
    const std::function<void()> off = [&] {
      set_tracking(false);
      for (int i = 0; i < batch; ++i) once();
    };
    const paired_times t = paired_times_us(ctx.repetitions, on, off);
    auto per_call = [&](std::vector<double> v) {
      for (double& x : v) x = x * 1000.0 / batch;  // us per batch -> ns per round trip
      return v;
    };
    row r = measured_row("tracking", variant, "ns", per_call(t.a), per_call(t.b),
                         "tracking off");
    const double added = r.memarea - r.raw;
    r.note = fmt::format("on adds {:.1f} ns", added);
    if (target_ns > 0) {
      r.target = fmt::format("on adds <= {:.0f} ns", target_ns);
      r.met = added <= target_ns;
    }
    ctx.add(r);
  };
  run("pool round trip (4 KiB), tracking on", kPoolBatch, 1000.0,
      [&] { p.deallocate(p.allocate(4096)); });
  run("area round trip (1 MiB), tracking on", kAreaBatch, 0,
      [&] { (void)a.allocate(1 << 20); });
  set_tracking(was != 0);
}

const registrar reg("tracking", tracking_cost,
                    {"tracking: first use (turned on, one round trip) against one round trip off",
                     "tracking: pool round trip with tracking on against off",
                     "tracking: area round trip with tracking on against off"});

}  // namespace
}  // namespace memarea::cli::bench
