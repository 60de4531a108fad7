// Issue 18's fixed cost of a copy: the time memarea::copy_async and memarea::copy spend from
// entry to the driver's call, measured through the public API as the difference between
// memarea's call and the raw call a user would make instead on the same stream (CUDA:
// cuMemcpyAsync on the stream's native handle; sim: the driver layer's memcpy_async on a
// driver of its own, see raw_driver.hpp). The copies are 4 KiB, so what is timed is the
// enqueue (copy_async: batches of calls, the stream drained between batches, untimed) or the
// whole short copy (copy). Each side copies between buffers of its own, filled with random
// bytes; the destinations are compared byte for byte after the timed repetitions. Estimator:
// docs/bench.md.
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"
#include "tools/raw_driver.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <iostream>

namespace memarea::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t kBytes = 4096;
constexpr int kBatch = 32;  ///< enqueues per timed batch: far below any driver's queue depth
constexpr double kTargetNs = 50;

/// The baseline's buffers (device source, pinned and device destinations) and its calls.
struct raw_side {
  std::string name, blocking_name;
  void* src = nullptr;
  void* pinned = nullptr;
  void* device = nullptr;
  std::function<void(void* dst, const void* src, std::size_t n)> enqueue;  ///< on its stream
  std::function<void()> drain;                                             ///< waits for it
  std::function<void(void* dst, const void* src, std::size_t n)> blocking;  ///< copy and wait
  std::function<void()> release;
  bool available() const { return src != nullptr; }
};

raw_side make_raw(const stream& s) {
  raw_side r;
#ifdef MEMAREA_HAVE_CUDA
  if (auto* cu = raw_cuda()) {
    if (!raw_cuda_use_device(*cu, 0))
      throw error(errc::unknown, "bench copy: cannot make device 0's primary context current");
    CUdeviceptr a, b;
    if (cu->MemAlloc(&a, kBytes) != CUDA_SUCCESS || cu->MemAlloc(&b, kBytes) != CUDA_SUCCESS ||
        cu->MemHostAlloc(&r.pinned, kBytes, 0) != CUDA_SUCCESS)
      throw error(errc::out_of_memory, "bench copy: the raw allocations failed");
    r.src = reinterpret_cast<void*>(a);
    r.device = reinterpret_cast<void*>(b);
    // memarea's own stream, through its public native handle: both sides queue on one stream.
    auto st = static_cast<CUstream>(s.native_handle());
    r.name = "cuMemcpyAsync on the same stream";
    r.blocking_name = "cuMemcpyAsync+cuStreamSynchronize (default stream)";
    r.enqueue = [cu, st](void* d, const void* from, std::size_t n) {
      if (cu->MemcpyAsync(reinterpret_cast<CUdeviceptr>(d), reinterpret_cast<CUdeviceptr>(from),
                          n, st) != CUDA_SUCCESS)
        throw error(errc::unknown, "bench copy: raw cuMemcpyAsync failed");
    };
    r.drain = [cu, st] {
      if (cu->StreamSynchronize(st) != CUDA_SUCCESS)
        throw error(errc::unknown, "bench copy: raw cuStreamSynchronize failed");
    };
    r.blocking = [cu](void* d, const void* from, std::size_t n) {
      if (cu->MemcpyAsync(reinterpret_cast<CUdeviceptr>(d), reinterpret_cast<CUdeviceptr>(from),
                          n, nullptr) != CUDA_SUCCESS ||
          cu->StreamSynchronize(nullptr) != CUDA_SUCCESS)
        throw error(errc::unknown, "bench copy: raw cuMemcpyAsync failed");
    };
    r.release = [cu, r] {
      cu->MemFree(reinterpret_cast<CUdeviceptr>(r.src));
      cu->MemFree(reinterpret_cast<CUdeviceptr>(r.device));
      cu->MemFreeHost(r.pinned);
    };
    return r;
  }
#endif
  (void)s;
  auto* d = raw_driver();
  if (!d) {
    r.name = r.blocking_name = no_raw("no raw copy call");
    return r;
  }
  detail::native_stream rs = nullptr;
  detail::check(d->malloc_device(0, kBytes, &r.src), "bench copy: raw malloc_device");
  detail::check(d->malloc_device(0, kBytes, &r.device), "bench copy: raw malloc_device");
  detail::check(d->malloc_host(0, kBytes, 0, &r.pinned), "bench copy: raw malloc_host");
  // A stream of the baseline driver's own: memarea's belongs to memarea's driver.
  detail::check(d->stream_create(0, &rs), "bench copy: raw stream_create");
  r.name = raw_driver_name("memcpy_async on its own stream");
  r.blocking_name = raw_driver_name("memcpy_async+stream_synchronize");
  r.enqueue = [d, rs](void* dst, const void* from, std::size_t n) {
    detail::check(d->memcpy_async(dst, from, n, 0, rs), "bench copy: raw memcpy_async");
  };
  r.drain = [d, rs] { detail::check(d->stream_synchronize(0, rs), "bench copy: raw sync"); };
  r.blocking = [d](void* dst, const void* from, std::size_t n) {
    detail::check(d->memcpy_async(dst, from, n, 0, nullptr), "bench copy: raw memcpy_async");
    detail::check(d->stream_synchronize(0, nullptr), "bench copy: raw sync");
  };
  r.release = [d, r, rs] {
    (void)d->stream_synchronize(0, rs);
    (void)d->stream_destroy(0, rs);
    (void)d->free_device(r.src);
    (void)d->free_device(r.device);
    (void)d->free_host(r.pinned);
  };
  return r;
}

/// Nanoseconds per call of `calls` calls of fn.
double ns_per_call(int calls, const std::function<void()>& fn) {
  const auto t0 = clock_type::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / calls;
}

/// Samples of both sides in turns (which goes first alternates); `prepare` runs untimed
/// before each sample of each side.
struct turns {
  std::vector<double> mem, raw;
};
turns in_turns(int samples, int calls, const std::function<void()>& prepare,
               const std::function<void()>& mem, const std::function<void()>& raw) {
  turns t;
  for (int i = -1; i < samples; ++i) {  // sample -1: a warm-up of each side, not kept
    auto one = [&](const std::function<void()>& fn, std::vector<double>& into) {
      prepare();
      const double ns = ns_per_call(calls, fn);
      if (i >= 0) into.push_back(ns);
    };
    if (i % 2 == 0) {
      one(mem, t.mem);
      one(raw, t.raw);
    } else {
      one(raw, t.raw);
      one(mem, t.mem);
    }
  }
  return t;
}

row fixed_cost_row(const std::string& variant, const turns& t, const std::string& raw_name) {
  row r = measured_row("copy fixed cost", variant, "ns", t.mem, t.raw, raw_name);
  if (t.raw.empty()) return r;
  // The fixed cost: the median over turns of memarea's time minus the baseline's in the same
  // turn (adjacent in time, so drift cancels), per call.
  std::vector<double> diff;
  for (std::size_t i = 0; i < t.mem.size(); ++i) diff.push_back(t.mem[i] - t.raw[i]);
  const double cost = median(diff);
  r.target = fmt::format("fixed cost <= {:.0f} ns", kTargetNs);
  r.met = cost <= kTargetNs;
  r.note = fmt::format("fixed cost {:.0f} ns (target {:.0f} ns)", cost, kTargetNs);
  return r;
}

void copy_fixed_cost(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench copy: no devices, no rows\n";
    return;
  }
  stream s(0);
  buffer src = area(0).allocate(kBytes), to_dev = area(0).allocate(kBytes);
  buffer to_host = area(0, area_flags::host).allocate(kBytes);
  raw_side raw = make_raw(s);
  struct release_raw {
    raw_side& r;
    ~release_raw() {
      if (r.release) r.release();
    }
  } release{raw};
  const bool has_raw = raw.available();
  const std::uint64_t s_mem = 0xC0C0, s_raw = 0xC1C1;
  fill_random(src.data(), kBytes, s_mem, memarea_host_copy());
  if (has_raw) fill_random(raw.src, kBytes, s_raw, raw.blocking);
  const int samples = ctx.quick ? 50 : std::max(200, 10 * ctx.repetitions);
  auto none = [] {};

  struct kind {
    const char* variant;
    void* mem_dst;
    void* raw_dst;
  };
  for (const kind k : {kind{"copy_async 4 KiB device->host (pinned), enqueue", to_host.data(),
                            raw.pinned},
                       kind{"copy_async 4 KiB device->device, enqueue", to_dev.data(),
                            raw.device}}) {
    fill_random(k.mem_dst, kBytes, ~s_mem, memarea_host_copy());
    if (has_raw) fill_random(k.raw_dst, kBytes, ~s_raw, raw.blocking);
    // Both streams drained before each batch, untimed: each batch finds an empty queue.
    const turns t = in_turns(
        samples, kBatch,
        [&] {
          s.synchronize();
          if (has_raw) raw.drain();
        },
        [&] { copy_async(k.mem_dst, src.data(), kBytes, s); },
        [&] {
          if (has_raw) raw.enqueue(k.raw_dst, raw.src, kBytes);
        });
    s.synchronize();
    if (has_raw) raw.drain();
    const std::string what = std::string("bench copy: ") + k.variant;
    expect_random(k.mem_dst, kBytes, s_mem, memarea_host_copy(), what + ", memarea");
    if (has_raw) expect_random(k.raw_dst, kBytes, s_raw, raw.blocking, what + ", raw");
    ctx.add(fixed_cost_row(k.variant, has_raw ? t : turns{t.mem, {}}, raw.name));
  }
  // memarea::copy: the whole blocking copy, one call a sample.
  {
    fill_random(to_host.data(), kBytes, ~s_mem, memarea_host_copy());
    if (has_raw) fill_random(raw.pinned, kBytes, ~s_raw, raw.blocking);
    const turns t = in_turns(
        samples, 1, none, [&] { copy(to_host.data(), src.data(), kBytes); },
        [&] {
          if (has_raw) raw.blocking(raw.pinned, raw.src, kBytes);
        });
    const std::string what = "bench copy: copy 4 KiB device->host (pinned)";
    expect_random(to_host.data(), kBytes, s_mem, memarea_host_copy(), what + ", memarea");
    if (has_raw) expect_random(raw.pinned, kBytes, s_raw, raw.blocking, what + ", raw");
    ctx.add(fixed_cost_row("copy 4 KiB device->host (pinned), whole copy",
                           has_raw ? t : turns{t.mem, {}}, raw.blocking_name));
  }
}

const registrar reg("copy", copy_fixed_cost);

}  // namespace
}  // namespace memarea::cli::bench
