// Issue 18's fixed cost of a copy: the time memarea::copy_async and memarea::copy spend from
// entry to the driver's call, measured through the public API as the difference between
// memarea's call and the raw call a user would make instead on the same stream (CUDA:
// cuMemcpyAsync on the stream's native handle; sim: the driver layer's memcpy_async on a
// driver of its own, see raw_driver.hpp). The copies are 4 KiB, so what is timed is the
// enqueue (copy_async: every call on its own, memarea's and the raw calls alternating one by
// one, the streams drained between turns, untimed) or the whole short copy (copy). Each side
// copies between buffers of its own, filled with random bytes; the destinations are compared
// byte for byte after the timed turns. Estimator: docs/bench.md.
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
/// Enqueues per side in one turn; with the other side's, 32 on the streams between two drains:
/// far below any driver's queue depth.
constexpr int kCallsPerSide = 16;
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

/// Every call's time (ns) of both sides, and per turn the difference of their medians.
struct calls {
  std::vector<double> mem, raw;   ///< each timed call, all turns
  std::vector<double> turn_diff;  ///< per turn: median of memarea's calls - median of raw's
};

/// `turns` turns of `per_side` calls of each side, timed one call at a time, the two sides
/// alternating call by call (mem raw mem raw ..., or raw mem raw mem ... in every other turn),
/// so that both meet the same queue: the i-th call of one side finds the same number of copies
/// queued as the i-th of the other, give or take the one between them, and which side that
/// one is alternates. `prepare` runs untimed before each turn. Turn -1 is a warm-up, not kept.
/// Each call's time runs from the clock read before it to the one after it, so both sides
/// carry the same clock and loop overhead, which the difference of medians cancels.
/// Without a baseline (raw empty), only memarea's calls are made and kept.
calls alternating(int turns, int per_side, const std::function<void()>& prepare,
                  const std::function<void()>& mem, const std::function<void()>& raw) {
  calls c;
  const bool has_raw = static_cast<bool>(raw);
  const auto n = static_cast<std::size_t>(turns) * static_cast<std::size_t>(per_side);
  c.mem.reserve(n);
  if (has_raw) c.raw.reserve(n);
  std::vector<clock_type::time_point> stamps(2 * static_cast<std::size_t>(per_side) + 1);
  std::vector<double> m, r;
  for (int t = -1; t < turns; ++t) {
    prepare();
    const bool mem_first = t % 2 == 0;
    const int count = has_raw ? 2 * per_side : per_side;
    // Only clock reads between the calls: the times are worked out after the turn.
    stamps[0] = clock_type::now();
    for (int i = 0; i < count; ++i) {
      const bool is_mem = !has_raw || ((i % 2 == 0) == mem_first);
      (is_mem ? mem : raw)();
      stamps[static_cast<std::size_t>(i) + 1] = clock_type::now();
    }
    if (t < 0) continue;
    m.clear();
    r.clear();
    for (int i = 0; i < count; ++i) {
      const bool is_mem = !has_raw || ((i % 2 == 0) == mem_first);
      const auto k = static_cast<std::size_t>(i);
      const std::chrono::duration<double, std::nano> took = stamps[k + 1] - stamps[k];
      (is_mem ? m : r).push_back(took.count());
    }
    c.mem.insert(c.mem.end(), m.begin(), m.end());
    if (has_raw) {
      c.raw.insert(c.raw.end(), r.begin(), r.end());
      c.turn_diff.push_back(median(m) - median(r));
    }
  }
  return c;
}

/// The row of one kind of call. Fixed cost = median of all memarea's calls - median of all the
/// baseline's: two medians of thousands of calls each, taken in the same turns; beside it the
/// min-median-max over turns of the per-turn difference of medians, to show how far it moves.
row fixed_cost_row(const std::string& variant, const calls& c, const std::string& raw_name) {
  row r = measured_row("copy fixed cost", variant, "ns", c.mem, c.raw, raw_name);
  if (c.raw.empty()) return r;
  const double cost = median(c.mem) - median(c.raw);
  const spread per_turn = spread_of(c.turn_diff);
  r.target = fmt::format("fixed cost <= {:.0f} ns", kTargetNs);
  r.met = cost <= kTargetNs;
  r.note = fmt::format(
      "fixed cost {:.0f} ns (target {:.0f} ns): medians of {} calls a side; per turn "
      "{:.0f}/{:.0f}/{:.0f} ns min/median/max of {} turns",
      cost, kTargetNs, c.mem.size(), per_turn.min, per_turn.median, per_turn.max,
      c.turn_diff.size());
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
  const int turns = ctx.quick ? 50 : std::max(500, 25 * ctx.repetitions);
  using call = std::function<void()>;

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
    // Both streams drained before each turn, untimed: each turn finds empty queues.
    const calls c = alternating(
        turns, kCallsPerSide,
        [&] {
          s.synchronize();
          if (has_raw) raw.drain();
        },
        [&] { copy_async(k.mem_dst, src.data(), kBytes, s); },
        has_raw ? call([&] { raw.enqueue(k.raw_dst, raw.src, kBytes); }) : call());
    s.synchronize();
    if (has_raw) raw.drain();
    const std::string what = std::string("bench copy: ") + k.variant;
    expect_random(k.mem_dst, kBytes, s_mem, memarea_host_copy(), what + ", memarea");
    if (has_raw) expect_random(k.raw_dst, kBytes, s_raw, raw.blocking, what + ", raw");
    ctx.add(fixed_cost_row(k.variant, c, raw.name));
  }
  // memarea::copy: the whole blocking copy, kCallsPerSide calls of each side a turn, as the
  // enqueues (each waits for its own copy, so the queues are empty at every call without a
  // drain). Where a buffer lies changes how long the driver's copy takes (on two H200s the same
  // raw call took 43-61 ns more on the buffers allocated first, whichever side owned them:
  // docs/bench.md), so the two sides swap two sets of buffers from turn to turn: each side
  // copies its own set within a turn, and each set serves both sides equally often. Both sets
  // are memarea's (the raw call takes any pointer; memarea's copy knows its own memory), made
  // by the same driver calls as the raw side's. Every turn's copies are checked before the next.
  {
    buffer second_src = area(0).allocate(kBytes);
    buffer second_host = area(0, area_flags::host).allocate(kBytes);
    struct set {
      void* src;
      void* dst;
      std::uint64_t seed;
    };
    const set sets[2] = {{src.data(), to_host.data(), s_mem},
                         {second_src.data(), second_host.data(), s_raw}};
    fill_random(sets[1].src, kBytes, sets[1].seed, memarea_host_copy());
    int turn = -2;  // prepare() runs before each turn, the warm-up (-1) first
    auto mine = [&] { return sets[turn & 1]; };
    auto theirs = [&] { return sets[(turn + 1) & 1]; };
    const std::string what = "bench copy: copy 4 KiB device->host (pinned)";
    auto prepare = [&] {
      if (turn >= -1) {
        expect_random(mine().dst, kBytes, mine().seed, memarea_host_copy(), what + ", memarea");
        if (has_raw)
          expect_random(theirs().dst, kBytes, theirs().seed, memarea_host_copy(), what + ", raw");
      }
      ++turn;
      for (const set& x : sets) fill_random(x.dst, kBytes, ~x.seed, memarea_host_copy());
    };
    const calls c = alternating(
        turns, kCallsPerSide, prepare, [&] { copy(mine().dst, mine().src, kBytes); },
        has_raw ? call([&] { raw.blocking(theirs().dst, theirs().src, kBytes); }) : call());
    expect_random(mine().dst, kBytes, mine().seed, memarea_host_copy(), what + ", memarea");
    if (has_raw)
      expect_random(theirs().dst, kBytes, theirs().seed, memarea_host_copy(), what + ", raw");
    row whole = fixed_cost_row("copy 4 KiB device->host (pinned), whole copy", c,
                               raw.blocking_name);
    whole.note += "; the sides swap two sets of buffers turn by turn";
    ctx.add(whole);
  }
}

const registrar reg("copy", copy_fixed_cost);

}  // namespace
}  // namespace memarea::cli::bench
