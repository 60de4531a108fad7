// The pool benchmarks: memarea's pools against the fastest thing a user could do instead, in
// one run. On CUDA that is the runtime's stream-ordered allocator (cudaMallocAsync and
// cudaFreeAsync on the device's default memory pool, its release threshold at the maximum, so
// it keeps what it has) and cudaMallocHost for pinned memory; on another backend, the driver
// layer's own allocation on a driver of its own (a pool-less baseline, see raw_driver.hpp).
// Every row keeps each sample's per-call time; the memory handed out on both sides is written
// with random bytes and read back, and the trace's checksum is checked. Estimator:
// docs/bench.md.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <memarea/area.hpp>
#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/pool.hpp>
#include <memarea/stream.hpp>
#include <random>
#include <thread>
#include <vector>

#include "bench/src/bench.hpp"
#include "bench/src/raw_cudart.hpp"
#include "bench/src/raw_driver.hpp"
#include "tests/workloads/mixed_trace.hpp"

namespace memarea::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  if (n >= 1024) return fmt::format("{} KiB", n >> 10);
  return fmt::format("{} B", n);
}

/// The baseline allocator of this backend (see the file's comment).
struct raw_allocator {
  const cudart_api* rt = nullptr;
  void* rt_pool = nullptr;  // the device's default cudaMemPool_t
  decltype(raw_driver()) gpu = raw_driver();  // off CUDA

  raw_allocator() {
#ifdef MEMAREA_HAVE_CUDA
    std::string why;
    if (backend_name() == "cuda") rt = raw_cudart(&why);
    if (rt && (!rt->has_pools() || rt->SetDevice(0) != 0)) {
      why = rt->path + " lacks the stream-ordered allocator";
      rt = nullptr;
    }
    if (backend_name() == "cuda" && !rt) std::cerr << "bench pool: " << why << "\n";
    if (rt) {
      if (rt->DeviceGetDefaultMemPool(&rt_pool, 0) != 0)
        throw error(errc::unknown, "bench pool: cudaDeviceGetDefaultMemPool failed");
      std::uint64_t keep_all = UINT64_MAX;
      if (rt->MemPoolSetAttribute(rt_pool, cudart_pool_release_threshold, &keep_all) != 0)
        throw error(errc::unknown, "bench pool: cannot set the release threshold");
    }
#endif
  }
  /// Whether this backend has a baseline at all (CUDA's runtime, or a driver of its own).
  bool available() const { return rt || gpu; }
  std::string device_name() const {
    if (rt) return "cudaMallocAsync+cudaFreeAsync (threshold max)";
    return gpu ? raw_driver_name("malloc_device+free_device (no pool)")
               : no_raw("no raw allocation call");
  }
  std::string pinned_name() const {
    if (rt) return "cudaMallocHost+cudaFreeHost";
    return gpu ? raw_driver_name("malloc_host+free_host") : no_raw("no raw allocation call");
  }
  /// One plain allocation: what a program without a pool pays every time.
  std::string plain_name() const {
    if (rt) return "cudaMalloc (no pool)";
    return gpu ? raw_driver_name("malloc_device (no pool)") : no_raw("no raw allocation call");
  }
  /// s: the stream's native handle (stream::native_handle); the stream-ordered runtime uses
  /// it, the driver layer's plain allocation does not.
  void* alloc_device(std::size_t n, void* s) const {
    void* p = nullptr;
    if (rt ? rt->MallocAsync(&p, n, s) != 0 : !gpu->malloc_device(0, n, &p).ok())
      throw error(errc::out_of_memory, fmt::format("bench pool: raw allocation of {} failed", n));
    return p;
  }
  void free_device(void* p, void* s) const {
    if (rt ? rt->FreeAsync(p, s) != 0 : !gpu->free_device(p).ok())
      throw error(errc::unknown, "bench pool: raw free failed");
  }
  void* alloc_plain(std::size_t n) const {
    void* p = nullptr;
    if (rt ? rt->Malloc(&p, n) != 0 : !gpu->malloc_device(0, n, &p).ok())
      throw error(errc::out_of_memory, "bench pool: raw plain allocation failed");
    return p;
  }
  void free_plain(void* p) const {
    if (rt ? rt->Free(p) != 0 : !gpu->free_device(p).ok())
      throw error(errc::unknown, "bench pool: raw plain free failed");
  }
  void* alloc_pinned(std::size_t n) const {
    void* p = nullptr;
    if (rt ? rt->MallocHost(&p, n) != 0 : !gpu->malloc_host(0, n, 0, &p).ok())
      throw error(errc::out_of_memory, "bench pool: raw pinned allocation failed");
    return p;
  }
  void free_pinned(void* p) const {
    if (rt ? rt->FreeHost(p) != 0 : !gpu->free_host(p).ok())
      throw error(errc::unknown, "bench pool: raw pinned free failed");
  }
  /// Waits for the stream-ordered frees (the driver layer's plain calls have none to wait for).
  void synchronize(void* s) const {
    if (rt && rt->StreamSynchronize(s) != 0)
      throw error(errc::unknown, "bench pool: stream synchronize failed");
  }
  /// The baseline's own host copies (cudaMemcpy; the driver layer's copy), for the byte check.
  host_copy copier() const {
    if (rt)
      return [rt = rt](void* d, const void* s, std::size_t n) {
        if (rt->Memcpy(d, s, n, 4 /* cudaMemcpyDefault */) != 0)
          throw error(errc::unknown, "bench pool: raw cudaMemcpy failed");
      };
    return [g = gpu](void* d, const void* s, std::size_t n) {
      detail::check(g->memcpy_async(d, s, n, 0, nullptr), "bench pool: raw copy");
      detail::check(g->stream_synchronize(0, nullptr), "bench pool: raw sync");
    };
  }
  /// The runtime pool's high-water mark of reserved bytes; 0 off CUDA.
  std::uint64_t reserved_high(void* s) const {
    if (!rt) return 0;
    synchronize(s);
    std::uint64_t high = 0;
    (void)rt->MemPoolGetAttribute(rt_pool, cudart_pool_reserved_mem_high, &high);
    return high;
  }
  /// The same, then the pool emptied and its mark reset (a replay from empty follows).
  std::uint64_t reserved_high_and_reset(void* s) const {
    if (!rt) return 0;
    const std::uint64_t high = reserved_high(s);
    std::uint64_t zero = 0;
    (void)rt->MemPoolTrimTo(rt_pool, 0);
    (void)rt->MemPoolSetAttribute(rt_pool, cudart_pool_reserved_mem_high, &zero);
    return high;
  }
};

/// Per-call microseconds: `samples` samples, each `batch` calls of a (then of b) in turns.
struct turns {
  std::vector<double> a, b;
};
turns time_in_turns(int samples, int batch_a, const std::function<void()>& a, int batch_b,
                    const std::function<void()>& b) {
  auto per_call = [](int batch, const std::function<void()>& fn) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < batch; ++i) fn();
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / batch;
  };
  a();  // warm-up: the pool's first block, the runtime pool's first reservation
  b();
  turns t;
  for (int i = 0; i < samples; ++i) {
    if (i % 2 == 0) {
      t.a.push_back(per_call(batch_a, a));
      t.b.push_back(per_call(batch_b, b));
    } else {
      t.b.push_back(per_call(batch_b, b));
      t.a.push_back(per_call(batch_a, a));
    }
  }
  return t;
}

/// Writes random bytes into the first MiB of p (at most) through `via`, reads them back,
/// compares: the memory handed out is usable, on either side.
void check_bytes(void* p, std::size_t n, const std::string& what, const host_copy& via) {
  static std::uint64_t seed = 0x9001;
  const std::size_t m = std::min<std::size_t>(n, 1 << 20);
  fill_random(p, m, ++seed, via);
  expect_random(p, m, seed, via, "bench pool: " + what);
}

row make_row(const char* group, std::string variant, const turns& t, std::string raw_name) {
  return measured_row(group, std::move(variant), "us", t.a, t.b, std::move(raw_name));
}

/// One thread: device round trips of every size, through C++ and through C.
void round_trips(context& ctx, const raw_allocator& raw) {
  const stream s(0);
  void* const ns = s.native_handle();
  pool p(area(0));
  const memarea_pool_t c = to_c(p);
  const memarea_stream_t cs = to_c(s);
  const int samples = ctx.quick ? 5 : std::max(ctx.repetitions, 20);
  const int batch = ctx.quick ? 200 : 2000;
  const std::vector<std::size_t> sizes =
      ctx.quick ? std::vector<std::size_t>{256, std::size_t{1} << 20}
                : std::vector<std::size_t>{256, 65536, std::size_t{1} << 20, std::size_t{64} << 20};
  for (std::size_t n : sizes) {
    void* q = p.allocate(n, s);
    check_bytes(q, n, "memarea pool, device " + size_name(n), memarea_host_copy());
    p.deallocate(q, s);
    void* theirs = raw.alloc_device(n, ns);
    raw.synchronize(ns);  // a stream-ordered allocation is usable elsewhere once it completed
    check_bytes(theirs, n, "raw, device " + size_name(n), raw.copier());
    raw.free_device(theirs, ns);
    const int raw_batch = raw.rt ? batch : std::max(1, batch / 100);
    auto raw_op = [&] { raw.free_device(raw.alloc_device(n, ns), ns); };
    const turns cpp = time_in_turns(
        samples, batch, [&] { p.deallocate(p.allocate(n, s), s); }, raw_batch, raw_op);
    row r = make_row("pool round trip", "device " + size_name(n) + ", C++", cpp, raw.device_name());
    r.target = "<= 0.080 us and >= 8x";
    r.met = r.memarea <= 0.080 && r.raw >= 8 * r.memarea;
    ctx.add(r);
    const turns capi = time_in_turns(
        samples, batch,
        [&] {
          void* x = nullptr;
          if (memarea_pool_alloc(c, &x, n, cs) != MEMAREA_SUCCESS ||
              memarea_pool_free(c, x, cs) != MEMAREA_SUCCESS)
            throw error(errc::unknown, "bench pool: the C API failed");
        },
        raw_batch, raw_op);
    row rc = make_row("pool round trip", "device " + size_name(n) + ", C", capi, raw.device_name());
    rc.target = "<= 0.100 us and >= 8x";
    rc.met = rc.memarea <= 0.100 && rc.raw >= 8 * rc.memarea;
    ctx.add(rc);
    raw.synchronize(ns);
  }
  // Idle, then warm: one round trip 70 ms after the last, on both sides in turns.
  {
    const std::size_t n = std::size_t{1} << 20;
    const int idle_samples = ctx.quick ? 3 : 15;
    auto after_idle = [](const std::function<void()>& fn) {
      std::this_thread::sleep_for(std::chrono::milliseconds(70));
      const auto t0 = clock_type::now();
      fn();
      return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
    };
    turns t;
    for (int i = 0; i < idle_samples; ++i) {
      t.a.push_back(after_idle([&] { p.deallocate(p.allocate(n, s), s); }));
      t.b.push_back(after_idle([&] { raw.free_device(raw.alloc_device(n, ns), ns); }));
    }
    row r = make_row("pool round trip", "device 1 MiB, 70 ms idle first", t, raw.device_name());
    r.note = "each sample after its own 70 ms pause";
    ctx.add(r);
  }
  // Cold: a new pool's first allocation (a block from the driver) against one plain
  // allocation of the driver (what a program without a pool pays every time).
  {
    const std::size_t n = std::size_t{1} << 20;
    turns t;
    for (int i = 0; i < (ctx.quick ? 3 : 10); ++i) {
      pool fresh(area(0));
      auto t0 = clock_type::now();
      void* x = fresh.allocate(n, s);
      t.a.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      fresh.deallocate(x, s);
      t0 = clock_type::now();
      void* y = raw.alloc_plain(n);
      t.b.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      raw.free_plain(y);
    }
    ctx.add(make_row("pool round trip", "device 1 MiB, a new pool's first", t,
                     raw.plain_name()));
  }
}

/// Runs body(i) on k threads that start together, after each ran warm(i) once; returns the
/// seconds from the first start to the last end. The threads leave the barrier (a futex: they
/// wake one after another) into a spin on `go`, which is set 2 ms later, when all of them spin:
/// every thread's clock starts within a spin of the others'.
template <class Warm, class Body>
double run_together(int k, Warm warm, Body body) {
  std::barrier ready(k + 1);
  std::atomic<bool> go{false};
  std::vector<clock_type::time_point> begin(static_cast<std::size_t>(k)), end(begin);
  std::vector<std::thread> ts;
  for (int i = 0; i < k; ++i)
    ts.emplace_back([&, i] {
      warm(i);
      ready.arrive_and_wait();
      while (!go.load(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      begin[static_cast<std::size_t>(i)] = clock_type::now();
      body(i);
      end[static_cast<std::size_t>(i)] = clock_type::now();
    });
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  go.store(true, std::memory_order_release);
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) -
                                       *std::min_element(begin.begin(), begin.end()))
      .count();
}

/// What this host gives k threads of work that shares nothing: each runs a private chain of
/// dependent multiply-adds, as long as one pooled thread's run. Returns the k-thread total in
/// millions of steps per second (the 16-thread row's note divides it by one thread's).
double private_work_rate(int k, int steps) {
  std::vector<std::uint64_t> sink(static_cast<std::size_t>(k) * 8);
  const double s = run_together(
      k, [](int) {},
      [&](int i) {
        std::uint64_t x = static_cast<std::uint64_t>(i) + 1;
        for (int j = 0; j < steps; ++j) x = x * 6364136223846793005ull + 1442695040888963407ull;
        sink[static_cast<std::size_t>(i) * 8] = x;  // a line apart: kept, never shared
      });
  return k * static_cast<double>(steps) / s / 1e6;
}

/// Threads each on its own stream, 1 MiB round trips: total calls per second.
void threads(context& ctx, const raw_allocator& raw) {
  pool p(area(0));
  const std::size_t n = std::size_t{1} << 20;
  // memarea's threads run 500,000 round trips each (about 20 ms at 40 ns), long beside their
  // start; the runtime's take about 1 us each: 50,000.
  const int per_pooled = ctx.quick ? 2000 : 500000;
  const int per_raw = ctx.quick ? 2000 : 50000;
  const std::vector<int> counts = ctx.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 4, 16};
  auto run = [&](int k, bool pooled) {
    // The pool-less driver layer takes microseconds a call: fewer of them.
    const int per = pooled ? per_pooled : raw.rt ? per_raw : std::max(20, per_raw / 100);
    std::vector<std::unique_ptr<stream>> streams;
    for (int i = 0; i < k; ++i) streams.push_back(std::make_unique<stream>(0));
    std::atomic<bool> bad{false};
    auto once = [&](int i) {
      const stream_view st = *streams[static_cast<std::size_t>(i)];
      void* const native = streams[static_cast<std::size_t>(i)]->native_handle();
      if (pooled)
        p.deallocate(p.allocate(n, st), st);
      else
        raw.free_device(raw.alloc_device(n, native), native);
    };
    const double s = run_together(
        k,
        [&](int i) {
          // Each thread's first round trip, before the clock: its cache, the runtime's
          // per-stream state.
          try {
            once(i);
          } catch (...) {
            bad = true;
          }
        },
        [&](int i) {
          try {
            for (int j = 0; j < per; ++j) once(i);
          } catch (...) {
            bad = true;
          }
        });
    for (auto& st : streams) st->synchronize();
    if (bad) throw error(errc::unknown, "bench pool: a thread's allocation failed");
    return k * per / s / 1e6;  // million round trips per second, all threads together
  };
  const int samples = ctx.quick ? 2 : 5;
  std::vector<double> one, host_one, host_k;
  const int host_steps = ctx.quick ? 100000 : 20000000;
  for (int k : counts) {
    turns t;
    for (int i = 0; i < samples; ++i) {
      t.a.push_back(run(k, true));
      t.b.push_back(run(k, false));
      if (k == counts.front()) host_one.push_back(private_work_rate(k, host_steps));
      if (k == counts.back()) host_k.push_back(private_work_rate(k, host_steps));
    }
    row r = make_row("pool threads", fmt::format("{} thread(s), own streams, 1 MiB", k), t,
                     raw.device_name());
    r.unit = "Mop/s";
    if (k == 1) one = t.a;
    if (k == counts.back() && k > 1 && !one.empty()) {
      const double scale = r.memarea / spread_of(one).median;
      r.target = fmt::format(">= 8x one thread's (x{})", k);
      r.met = !ctx.quick ? scale >= 8 : true;
      r.note = fmt::format("{:.1f}x one thread's total; this host gives {} threads of private "
                           "arithmetic {:.1f}x one thread's",
                           scale, k, spread_of(host_k).median / spread_of(host_one).median);
    }
    ctx.add(r);
  }
}

/// Pinned host memory, 1 MiB round trips.
void pinned(context& ctx, const raw_allocator& raw) {
  pool p(area(0, area_flags::host));
  const std::size_t n = std::size_t{1} << 20;
  void* q = p.allocate(n);
  check_bytes(q, n, "memarea pool, pinned", memarea_host_copy());
  p.deallocate(q);
  void* theirs = raw.alloc_pinned(n);
  check_bytes(theirs, n, "raw, pinned", [](void* d, const void* src, std::size_t len) {
    std::memcpy(d, src, len);  // pinned memory is host memory
  });
  raw.free_pinned(theirs);
  const turns t = time_in_turns(
      ctx.quick ? 5 : 20, ctx.quick ? 200 : 2000, [&] { p.deallocate(p.allocate(n)); }, 1,
      [&] { raw.free_pinned(raw.alloc_pinned(n)); });
  row r = make_row("pool round trip", "pinned host 1 MiB", t, raw.pinned_name());
  r.target = "<= 0.100 us";
  r.met = r.memarea <= 0.100;
  ctx.add(r);
}

/// REFERENCE.md's mixed trace (tests/workloads/mixed_trace.hpp), its checksum checked.
std::vector<std::int64_t> mixed_trace() {
  std::vector<std::int64_t> ops = memarea::bench::mixed_trace();
  const std::uint64_t h = memarea::bench::trace_checksum(ops);
  if (h != memarea::bench::kMixedTraceChecksum)
    throw error(errc::unknown, fmt::format("bench pool: the trace's checksum is {:#x}, not "
                                           "REFERENCE.md's {:#x}",
                                           h, memarea::bench::kMixedTraceChecksum));
  return ops;
}

/// Replays ops[0, count) through alloc/free; returns µs per operation and the peak of live
/// bytes. check: each allocation gets its own id in its first 8 bytes, verified at its free.
template <class Alloc, class Free>
std::pair<double, std::size_t> replay(const std::vector<std::int64_t>& ops, std::size_t count,
                                      Alloc alloc, Free free, bool check) {
  struct live_one {
    void* p;
    std::size_t n;
    std::uint64_t tag;
  };
  std::vector<live_one> live;
  live.reserve(1000);
  std::size_t bytes = 0, peak = 0;
  std::uint64_t id = 0;
  const auto t0 = clock_type::now();
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t op = ops[i];
    if (op > 0) {
      const auto n = static_cast<std::size_t>(op);
      void* p = alloc(n);
      const std::uint64_t tag = ++id * 0x9E3779B97F4A7C15ull;
      if (check) copy(p, &tag, sizeof tag);
      live.push_back({p, n, tag});
      bytes += n;
      peak = std::max(peak, bytes);
    } else {
      const auto k = static_cast<std::size_t>(-op - 1);
      const live_one one = live[k];
      if (check) {
        std::uint64_t tag = 0;
        copy(&tag, one.p, sizeof tag);
        if (tag != one.tag)
          throw error(errc::unknown, "bench pool: a trace allocation's id was overwritten");
      }
      free(one.p);
      bytes -= one.n;
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (const live_one& one : live) free(one.p);
  const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
  return {us / static_cast<double>(count), peak};
}

/// The mixed trace replayed 12 times on one pool, as a program that runs the same steps over
/// and over: per replay, the pool's peak reserved up to its end over the trace's peak live, and
/// the driver blocks it took. A pool that creeps (its reserved bytes growing replay after
/// replay) shows here, not in one replay from empty. Each side keeps its own pool throughout
/// (the runtime's from empty too), replay by replay in turns.
void trace_replays(context& ctx, const raw_allocator& raw, const std::vector<std::int64_t>& ops,
                   std::size_t count, const stream& s) {
  constexpr int kReplays = 12;
  void* const ns = s.native_handle();
  pool p(area(0));
  (void)raw.reserved_high_and_reset(ns);
  turns t;
  std::vector<double> ours, theirs;
  std::vector<std::size_t> blocks;
  const auto mine = [&] {
    const std::size_t before = p.stats().driver_allocations;
    const auto [us, peak] = replay(
        ops, count, [&](std::size_t n) { return p.allocate(n, s); },
        [&](void* x) { p.deallocate(x, s); }, false);
    t.a.push_back(us);
    const pool_stats st = p.stats();  // reserved never shrinks here: its peak so far is this one's
    ours.push_back(static_cast<double>(st.peak_bytes_reserved) / static_cast<double>(peak));
    blocks.push_back(st.driver_allocations - before);
  };
  const auto runtime = [&] {
    const auto [us, peak] = replay(
        ops, count, [&](std::size_t n) { return raw.alloc_device(n, ns); },
        [&](void* x) { raw.free_device(x, ns); }, false);
    t.b.push_back(us);
    if (raw.rt)
      theirs.push_back(static_cast<double>(raw.reserved_high(ns)) / static_cast<double>(peak));
  };
  for (int k = 0; k < kReplays; ++k) {
    if (k % 2 == 0) {
      mine();
      runtime();
    } else {
      runtime();
      mine();
    }
  }
  const auto list = [](const auto& v, const char* f) {
    std::string out;
    for (const auto& x : v) {
      if (!out.empty()) out += ' ';
      out += fmt::format(fmt::runtime(f), x);
    }
    return out;
  };
  int over = 0, late = 0;  // the first replay over 1.2x, the first to take a block after the 2nd
  for (int k = kReplays; k-- > 0;) {
    if (ours[static_cast<std::size_t>(k)] > 1.2) over = k + 1;
    if (k >= 2 && blocks[static_cast<std::size_t>(k)] > 0) late = k + 1;
  }
  row r =
      make_row("pool trace", fmt::format("mixed, {} ops, {} replays on one pool", count, kReplays),
               t, raw.device_name());
  r.target = "reserved <= 1.2x live at every replay, no new block after the 2nd";
  r.met = over == 0 && late == 0;
  r.note = fmt::format(
      "per replay, peak reserved / peak live: memarea {}{}; memarea's new blocks: {}; {}",
      list(ours, "{:.3f}"), theirs.empty() ? "" : "; runtime " + list(theirs, "{:.3f}"),
      list(blocks, "{}"),
      r.met ? "the target holds"
            : fmt::format("the target is missed:{}{}",
                          over ? fmt::format(" replay {} is over 1.2x", over) : "",
                          late ? fmt::format("{} replay {} took a block", over ? "," : "", late)
                               : ""));
  ctx.add(r);
}

void trace(context& ctx, const raw_allocator& raw) {
  const auto ops = mixed_trace();
  // On sim (and --quick) a prefix: the whole trace holds up to 465 MiB live.
  const std::size_t count = ctx.quick ? 5000 : ops.size();
  const stream s(0);
  void* const ns = s.native_handle();
  {
    pool p(area(0));
    (void)replay(
        ops, std::min<std::size_t>(count, 20000),
        [&](std::size_t n) { return p.allocate(n, s); },
        [&](void* x) { p.deallocate(x, s); }, true);
  }
  turns t, warm;
  std::vector<double> ours_ratio, raw_ratio, warm_blocks;
  for (int i = 0; i < (ctx.quick ? 1 : 3); ++i) {
    pool p(area(0));  // from empty, as REFERENCE.md's figures
    const auto [us, peak] = replay(
        ops, count, [&](std::size_t n) { return p.allocate(n, s); },
        [&](void* x) { p.deallocate(x, s); }, false);
    t.a.push_back(us);
    ours_ratio.push_back(static_cast<double>(p.stats().peak_bytes_reserved) /
                         static_cast<double>(peak));
    // The same replay once more on the pool that holds its blocks now: the pool's own cost,
    // without most of the driver's allocations (the difference to the cold replay is theirs;
    // the note counts the blocks it still adds).
    const std::size_t blocks_before = p.stats().driver_allocations;
    warm.a.push_back(replay(
                         ops, count, [&](std::size_t n) { return p.allocate(n, s); },
                         [&](void* x) { p.deallocate(x, s); }, false)
                         .first);
    warm_blocks.push_back(static_cast<double>(p.stats().driver_allocations - blocks_before));
    (void)raw.reserved_high_and_reset(ns);
    const auto [rus, rpeak] = replay(
        ops, count, [&](std::size_t n) { return raw.alloc_device(n, ns); },
        [&](void* x) { raw.free_device(x, ns); }, false);
    t.b.push_back(rus);
    if (raw.rt)
      raw_ratio.push_back(static_cast<double>(raw.reserved_high(ns)) /
                          static_cast<double>(rpeak));
    // The runtime's pool keeps its memory too (release threshold at the maximum; trimmed
    // before the next cold replay).
    warm.b.push_back(replay(
                         ops, count, [&](std::size_t n) { return raw.alloc_device(n, ns); },
                         [&](void* x) { raw.free_device(x, ns); }, false)
                         .first);
  }
  row r =
      make_row("pool trace", fmt::format("mixed, {} ops, one stream", count), t, raw.device_name());
  const double ratio = spread_of(ours_ratio).max;
  r.target = "<= 0.150 us/op, reserved <= 1.2x live";
  r.met = r.memarea <= 0.150 && ratio <= 1.2;
  r.note = fmt::format(
      "peak reserved / peak live: memarea {:.3f}{}; checksum 0x01ce674ecf3a0693 "
      "matched",
      ratio, raw_ratio.empty() ? "" : fmt::format(", runtime {:.3f}", spread_of(raw_ratio).max));
  ctx.add(r);
  row w = make_row("pool trace",
                   fmt::format("mixed, {} ops, one stream, warm: its blocks held", count), warm,
                   raw.device_name());
  w.note = fmt::format("the same replay again on the same pool; memarea's new blocks in it: "
                       "{:.0f}-{:.0f}",
                       spread_of(warm_blocks).min, spread_of(warm_blocks).max);
  ctx.add(w);
  trace_replays(ctx, raw, ops, count, s);
}

void pool_case(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench pool: no devices, no rows\n";
    return;
  }
  const raw_allocator raw;
  if (!raw.available()) {
    std::cerr << "bench pool: no baseline on the " << backend_name() << " backend, no rows\n";
    return;
  }
  round_trips(ctx, raw);
  threads(ctx, raw);
  pinned(ctx, raw);
  trace(ctx, raw);
  // Pooled memory shared between processes is measured by the ipc case ("100 pieces of one
  // pool block"), beside the other imports.
}

const registrar reg("pool", pool_case, {
    "pool round trip: device 256 B, 64 KiB, 1 MiB, 64 MiB (--quick: 256 B, 1 MiB), each C++ "
    "and C",
    "pool round trip: device 1 MiB after 70 ms idle; a new pool's first; pinned host 1 MiB",
    "pool threads: 1 and more threads, own streams, 1 MiB",
    "pool trace: mixed, 5000 ops, one stream; the same warm; 12 replays on one pool"});

}  // namespace
}  // namespace memarea::cli::bench
