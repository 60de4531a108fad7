// The usage benchmark: memory_usage(0), this process's figures of device 0 (include/memarea/
// usage.hpp), against what a user asks instead, the driver's free and total memory of the
// device (cuMemGetInfo on CUDA; the driver layer's mem_get_info elsewhere: raw_driver.hpp),
// in turns, each timed over a batch of calls. A pool and a live piece exist meanwhile, so that
// memory_usage sums a thread's cache as it does in a program that pools.
#include "bench/src/bench.hpp"
#include "bench/src/raw_cuda.hpp"
#include "bench/src/raw_driver.hpp"

#include <memarea/area.hpp>
#include <memarea/pool.hpp>
#include <memarea/usage.hpp>

#include <fmt/format.h>

#include <functional>
#include <iostream>

namespace memarea::cli::bench {
namespace {

/// Calls per timed sample: one call takes well under a microsecond, below the clock's grain.
constexpr int kBatch = 1000;

struct raw_query {
  std::string name;
  std::function<void()> call;
};

raw_query make_raw() {
#ifdef MEMAREA_HAVE_CUDA
  if (auto* cu = raw_cuda()) {
    if (!raw_cuda_use_device(*cu, 0))
      throw error(errc::unknown, "bench usage: cannot make device 0's primary context current");
    return {"cuMemGetInfo", [cu] {
              std::size_t f = 0, t = 0;
              if (cu->MemGetInfo(&f, &t) != CUDA_SUCCESS)
                throw error(errc::unknown, "bench usage: raw cuMemGetInfo failed");
            }};
  }
#endif
  if (auto* d = raw_driver()) {
    return {raw_driver_name("mem_get_info"), [d] {
              std::size_t f = 0, t = 0;
              detail::check(d->mem_get_info(0, &f, &t), "bench usage: raw mem_get_info");
            }};
  }
  return {no_raw("no raw memory query"), {}};
}

void usage_query(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench usage: no devices, no rows\n";
    return;
  }
  pool p{area(0)};
  void* live = p.allocate(1 << 20);
  p.deallocate(p.allocate(4096));  // a piece in this thread's cache
  const raw_query raw = make_raw();
  std::size_t sink = 0;
  const std::function<void()> mem_op = [&] {
    for (int i = 0; i < kBatch; ++i) sink += memory_usage(0).live;
  };
  const std::function<void()> raw_op = raw.call ? std::function<void()>([&] {
    for (int i = 0; i < kBatch; ++i) raw.call();
  })
                                                : std::function<void()>([] {});
  const paired_times t = paired_times_us(ctx.repetitions, mem_op, raw_op);
  auto per_call = [](std::vector<double> v) {
    for (double& x : v) x = x * 1000.0 / kBatch;  // us per batch -> ns per call
    return v;
  };
  row r = measured_row("usage query", "memory_usage(0)", "ns", per_call(t.a),
                       raw.call ? per_call(t.b) : std::vector<double>{}, raw.name);
  r.target = "<= 1000 ns";
  r.met = r.memarea <= 1000.0;
  if (sink == 0) r.note = "no live bytes seen";  // never: a piece is live; keeps the calls
  ctx.add(r);
  p.deallocate(live);
}

const registrar reg("usage", usage_query, {"usage query: memory_usage(0) against the driver's "
                                           "free/total query"});

}  // namespace
}  // namespace memarea::cli::bench
