// The copy rows: what memarea::copy_async and memarea::copy cost over the raw call a
// user would make instead on the same stream (CUDA: cuMemcpyAsync on the stream's native
// handle; sim: the driver layer's memcpy_async on a driver of its own, see raw_driver.hpp),
// through the public API, as the difference of the two sides' medians. The copies are 4 KiB,
// so what is timed is the enqueue (copy_async: every call on its own, memarea's and the raw
// calls alternating one by one, the streams drained between turns, untimed) or the whole short
// copy (copy). Each side copies between buffers of its own, filled with random bytes; the
// destinations are compared byte for byte after the timed turns. Estimator: docs/bench.md.
//
// Two targets, two kinds of run. Plain, each call is timed to its return, and memarea's must be
// at least 0.98x the raw call's speed. With the entry clock (bench/cuda-entry-clock, a
// libcuda.so.1 in front of the real one that stamps each cuMemcpyAsync's entry) first on
// LD_LIBRARY_PATH, the same three rows are made "to the driver call" instead: each call runs
// from the clock read before it to the stamp at the driver's entry, the span the fixed-cost
// target (under 50 ns) names, free of what the driver does after (for copy: the wait).
#include "bench/src/bench.hpp"
#include "bench/src/raw_cuda.hpp"
#include "bench/src/raw_driver.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <iostream>

#include <dlfcn.h>

namespace memarea::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t kBytes = 4096;
/// Enqueues per side in one turn; with the other side's, 32 on the streams between two drains:
/// far below any driver's queue depth.
constexpr int kCallsPerSide = 16;
/// Target: memarea's work from a copy's entry to the driver's call (the entry rows).
constexpr double kTargetNs = 50;
/// Target: the whole call against the raw call, as speed (the rows timed to the return).
constexpr double kTargetSpeed = 0.98;
constexpr const char* kEntryNote =
    "; each call from the clock read before it to the driver's entry (bench/cuda-entry-clock)";

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

/// The entry clock (bench/cuda-entry-clock), when the libcuda in this process is it.
struct entry_clock {
  void (*read)(std::uint64_t* calls, std::int64_t* last_ns) = nullptr;
  std::uint64_t calls = 0;  ///< stamps seen so far

  /// The stamp of the driver's entry of the one cuMemcpyAsync made since the last call of this;
  /// throws when there was not exactly one (the clock would time some other call).
  clock_type::time_point stamp_of_one_call(const char* what) {
    std::uint64_t now_calls = 0;
    std::int64_t ns = 0;
    read(&now_calls, &ns);
    if (now_calls != calls + 1)
      throw error(errc::unknown, fmt::format("bench copy: {}: {} cuMemcpyAsync calls seen by the "
                                             "entry clock where one was made",
                                             what, now_calls - calls));
    calls = now_calls;
    return clock_type::time_point(std::chrono::nanoseconds(ns));
  }
  /// Counts the calls made untimed (fills and checks copy through the driver too) as seen.
  void catch_up() {
    std::int64_t ns = 0;
    read(&calls, &ns);
  }
};

/// The entry clock if memarea's libcuda is it (the driver was loaded by the time a buffer was
/// made, so NOLOAD finds the library memarea loaded), else nothing.
std::optional<entry_clock> find_entry_clock() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return std::nullopt;
  entry_clock c;
  c.read = reinterpret_cast<decltype(c.read)>(dlsym(lib, "memarea_entry_clock_read"));
  dlclose(lib);  // NOLOAD took a reference; memarea's keeps the library loaded
  if (!c.read) return std::nullopt;
  return c;
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
/// carry the same clock and loop overhead, which the difference of medians cancels; with an
/// entry clock, to the stamp of the driver's entry instead (each call makes exactly one).
/// Without a baseline (raw empty), only memarea's calls are made and kept.
calls alternating(int turns, int per_side, const std::function<void()>& prepare,
                  const std::function<void()>& mem, const std::function<void()>& raw,
                  entry_clock* to_entry = nullptr) {
  calls c;
  const bool has_raw = static_cast<bool>(raw);
  const auto n = static_cast<std::size_t>(turns) * static_cast<std::size_t>(per_side);
  c.mem.reserve(n);
  if (has_raw) c.raw.reserve(n);
  std::vector<clock_type::time_point> stamps(2 * static_cast<std::size_t>(per_side) + 1);
  std::vector<clock_type::time_point> entries(stamps.size());  // with to_entry
  std::vector<double> m, r;
  for (int t = -1; t < turns; ++t) {
    prepare();
    if (to_entry) to_entry->catch_up();
    const bool mem_first = t % 2 == 0;
    const int count = has_raw ? 2 * per_side : per_side;
    // Only clock reads between the calls: the times are worked out after the turn.
    stamps[0] = clock_type::now();
    for (int i = 0; i < count; ++i) {
      const bool is_mem = !has_raw || ((i % 2 == 0) == mem_first);
      const auto k = static_cast<std::size_t>(i);
      if (to_entry) {
        stamps[k] = clock_type::now();
        (is_mem ? mem : raw)();
        entries[k] = to_entry->stamp_of_one_call(is_mem ? "memarea's call" : "the raw call");
        continue;
      }
      (is_mem ? mem : raw)();
      stamps[k + 1] = clock_type::now();
    }
    if (t < 0) continue;
    m.clear();
    r.clear();
    for (int i = 0; i < count; ++i) {
      const bool is_mem = !has_raw || ((i % 2 == 0) == mem_first);
      const auto k = static_cast<std::size_t>(i);
      const std::chrono::duration<double, std::nano> took =
          (to_entry ? entries[k] : stamps[k + 1]) - stamps[k];
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
/// The two targets: timed to the driver's entry (the entry clock), the fixed cost is
/// under 50 ns; timed to the return, memarea's call is at least 0.98x the raw call's speed.
row fixed_cost_row(const std::string& variant, const calls& c, const std::string& raw_name,
                   bool to_entry) {
  row r = measured_row("copy fixed cost", variant, "ns", c.mem, c.raw, raw_name);
  if (c.raw.empty()) return r;
  const double cost = median(c.mem) - median(c.raw);
  const double speed = median(c.raw) / median(c.mem);
  const spread per_turn = spread_of(c.turn_diff);
  if (to_entry) {
    r.target = fmt::format("fixed cost <= {:.0f} ns", kTargetNs);
    r.met = cost <= kTargetNs;
  } else {
    r.target = fmt::format(">= {:.2f}x the raw call", kTargetSpeed);
    r.met = speed >= kTargetSpeed;
  }
  // The speed only where a call is timed to its return: to the driver's entry, the times are
  // memarea's work and a clock read, and their ratio says nothing of the copy's speed.
  const std::string speed_text =
      to_entry ? std::string() : fmt::format(", {:.3f}x the raw call's speed", speed);
  r.note = fmt::format(
      "fixed cost {:.0f} ns{}: medians of {} calls a side; per turn "
      "{:.0f}/{:.0f}/{:.0f} ns min/median/max of {} turns",
      cost, speed_text, c.mem.size(), per_turn.min, per_turn.median, per_turn.max,
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
  // With the entry clock, every row runs to the driver's entry (named so) and no other is made.
  std::optional<entry_clock> clock;
  if (has_raw) clock = find_entry_clock();
  entry_clock* to_entry = clock ? &*clock : nullptr;
  auto variant = [&](const std::string& what, const char* until) {
    return what + (to_entry ? ", to the driver call" : until);
  };

  struct kind {
    std::string variant;
    void* mem_dst;
    void* raw_dst;
  };
  for (const kind& k :
       {kind{variant("copy_async 4 KiB device->host (pinned)", ", enqueue"), to_host.data(),
             raw.pinned},
        kind{variant("copy_async 4 KiB device->device", ", enqueue"), to_dev.data(),
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
        has_raw ? call([&] { raw.enqueue(k.raw_dst, raw.src, kBytes); }) : call(), to_entry);
    s.synchronize();
    if (has_raw) raw.drain();
    const std::string what = std::string("bench copy: ") + k.variant;
    expect_random(k.mem_dst, kBytes, s_mem, memarea_host_copy(), what + ", memarea");
    if (has_raw) expect_random(k.raw_dst, kBytes, s_raw, raw.blocking, what + ", raw");
    row r = fixed_cost_row(k.variant, c, raw.name, to_entry != nullptr);
    if (to_entry) r.note += kEntryNote;
    ctx.add(r);
  }
  // memarea::copy: the whole blocking copy, kCallsPerSide calls of each side a turn, as the
  // enqueues (each waits for its own copy, so the queues are empty at every call without a
  // drain). Where a buffer lies changes how long the driver's copy takes (the same raw call
  // took tens of nanoseconds more on the buffers allocated first, whichever side owned them:
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
        has_raw ? call([&] { raw.blocking(theirs().dst, theirs().src, kBytes); }) : call(),
        to_entry);
    expect_random(mine().dst, kBytes, mine().seed, memarea_host_copy(), what + ", memarea");
    if (has_raw)
      expect_random(theirs().dst, kBytes, theirs().seed, memarea_host_copy(), what + ", raw");
    row whole = fixed_cost_row(variant("copy 4 KiB device->host (pinned)", ", whole copy"), c,
                               raw.blocking_name, to_entry != nullptr);
    whole.note += "; the sides swap two sets of buffers turn by turn";
    if (to_entry) whole.note += kEntryNote;
    ctx.add(whole);
  }
}

const registrar reg("copy", copy_fixed_cost, {
    "copy fixed cost: copy_async 4 KiB device->host (pinned) and device->device, enqueue",
    "copy fixed cost: copy 4 KiB device->host (pinned), whole copy"});

}  // namespace
}  // namespace memarea::cli::bench
