// The fill rows: memarea::memset_async (8- and 32-bit elements) and memarea::copy_2d_async against
// the raw call a user would make instead on the same stream (CUDA: cuMemsetD8Async,
// cuMemsetD32Async, cuMemcpy2DAsync on memarea's stream's native handle; sim and HIP: the
// driver layer's memset_elements_async and memcpy_2d_async on a driver of its own, see
// raw_driver.hpp), through the public API, in one run.
//
// Two kinds of row, as the copy rows. Where the work is short (4 KiB), the fixed cost: every
// call timed on its own to its return (an enqueue), both sides alternating call by call, both
// streams drained between turns (untimed); target >= 0.98x the raw call's speed. Where it is
// long (1 MiB and up, 1024 rows of 4 KiB), the whole operation queued and synchronized, in
// turns, as GB/s; target >= 0.98x raw (within 2% of the driver). Each side writes buffers of its
// own, filled with random bytes first, and after the timed turns each side reads its own back
// through its own calls and compares them byte for byte: the memset's elements and the random
// bytes after them, the 2D copy's rows and the gaps between them. Estimator: docs/bench.md.
#include "bench/src/bench.hpp"
#include "bench/src/raw_cuda.hpp"
#include "bench/src/raw_driver.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace memarea::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;
/// Target of every row: memarea's speed at least this times the raw call's.
constexpr double kTarget = 0.98;
/// Calls per side in one turn of a fixed-cost row (as the copy rows: 32 on a stream between
/// two drains, far below any driver's queue depth).
constexpr int kCallsPerSide = 16;
/// Random bytes after a memset's range, which it must leave alone.
constexpr std::size_t kGuard = 256;

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} KiB", n >> 10);
}

/// The baseline: its own buffers, its calls on a stream (memarea's on CUDA, its own elsewhere),
/// its own host copies for filling and checking.
class raw_side {
 public:
  explicit raw_side(const stream& s) {
#ifdef MEMAREA_HAVE_CUDA
    if ((cu_ = raw_cuda())) {
      if (!raw_cuda_use_device(*cu_, 0))
        throw error(errc::unknown, "bench fill: cannot make device 0's primary context current");
      cs_ = static_cast<CUstream>(s.native_handle());
      return;
    }
#endif
    (void)s;
    if ((d_ = raw_driver())) detail::check(d_->stream_create(0, &ds_), "bench fill: raw stream");
  }
  ~raw_side() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      (void)cu_->StreamSynchronize(cs_);
      for (void* p : device_) (void)cu_->MemFree(reinterpret_cast<CUdeviceptr>(p));
      for (void* p : pinned_) (void)cu_->MemFreeHost(p);
      return;
    }
#endif
    if (!d_) return;
    (void)d_->stream_synchronize(0, ds_);
    (void)d_->stream_destroy(0, ds_);
    for (void* p : device_) (void)d_->free_device(p);
    for (void* p : pinned_) (void)d_->free_host(p);
  }
  raw_side(const raw_side&) = delete;
  raw_side& operator=(const raw_side&) = delete;

  bool available() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return true;
#endif
    return d_ != nullptr;
  }
  std::string memset_name(unsigned width) const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return fmt::format("cuMemsetD{}Async on the same stream", 8 * width);
#endif
    if (d_) return raw_driver_name(fmt::format("memset_elements_async ({}-bit)", 8 * width));
    return no_raw("no raw memset");
  }
  std::string copy_2d_name() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return "cuMemcpy2DAsync on the same stream";
#endif
    if (d_) return raw_driver_name("memcpy_2d_async");
    return no_raw("no raw 2D copy");
  }

  void* device(std::size_t n) {
    void* p = nullptr;
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      CUdeviceptr d = 0;
      check_cu(cu_->MemAlloc(&d, n), "cuMemAlloc");
      p = reinterpret_cast<void*>(d);
    }
#endif
    if (d_) detail::check(d_->malloc_device(0, n, &p), "bench fill: raw malloc_device");
    device_.push_back(p);
    return p;
  }
  void* pinned(std::size_t n) {
    void* p = nullptr;
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) check_cu(cu_->MemHostAlloc(&p, n, 0), "cuMemHostAlloc");
#endif
    if (d_) detail::check(d_->malloc_host(0, n, 0, &p), "bench fill: raw malloc_host");
    pinned_.push_back(p);
    return p;
  }

  /// Queues a memset of `count` elements of `width` bytes.
  void memset(void* p, std::uint32_t value, std::size_t count, unsigned width) {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      const auto d = reinterpret_cast<CUdeviceptr>(p);
      if (width == 4) {
        if (!cu_->MemsetD32Async) throw error(errc::not_supported, "no cuMemsetD32Async");
        check_cu(cu_->MemsetD32Async(d, value, count, cs_), "cuMemsetD32Async");
      } else {
        check_cu(cu_->MemsetD8Async(d, static_cast<unsigned char>(value), count, cs_),
                 "cuMemsetD8Async");
      }
      return;
    }
#endif
    detail::check(d_->memset_elements_async(p, value, count, width, 0, ds_),
                  "bench fill: raw memset_elements_async");
  }
  /// Queues a 2D copy between memory the driver knows.
  void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
               std::size_t width, std::size_t height) {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      if (!cu_->Memcpy2DAsync) throw error(errc::not_supported, "no cuMemcpy2DAsync");
      CUDA_MEMCPY2D c;
      std::memset(&c, 0, sizeof c);
      c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
      c.srcDevice = reinterpret_cast<CUdeviceptr>(src);
      c.srcPitch = spitch;
      c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
      c.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
      c.dstPitch = dpitch;
      c.WidthInBytes = width;
      c.Height = height;
      check_cu(cu_->Memcpy2DAsync(&c, cs_), "cuMemcpy2DAsync");
      return;
    }
#endif
    detail::copy_2d_params c{dst, dpitch, src, spitch, width, height};
    detail::check(d_->memcpy_2d_async(c, 0, ds_), "bench fill: raw memcpy_2d_async");
  }
  void wait() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      check_cu(cu_->StreamSynchronize(cs_), "cuStreamSynchronize");
      return;
    }
#endif
    detail::check(d_->stream_synchronize(0, ds_), "bench fill: raw stream_synchronize");
  }
  /// Its own host copies (each completes before it returns).
  host_copy host() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_)
      return [this](void* d, const void* s, std::size_t n) {
        check_cu(cu_->MemcpyAsync(reinterpret_cast<CUdeviceptr>(d),
                                  reinterpret_cast<CUdeviceptr>(s), n, nullptr),
                 "cuMemcpyAsync");
        check_cu(cu_->StreamSynchronize(nullptr), "cuStreamSynchronize");
      };
#endif
    return [this](void* d, const void* s, std::size_t n) {
      detail::check(d_->memcpy_async(d, s, n, 0, nullptr), "bench fill: raw memcpy_async");
      detail::check(d_->stream_synchronize(0, nullptr), "bench fill: raw stream_synchronize");
    };
  }

 private:
#ifdef MEMAREA_HAVE_CUDA
  static void check_cu(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS)
      throw error(errc::unknown, fmt::format("bench fill: raw {} failed: {}", what,
                                             static_cast<int>(r)));
  }
  const detail::cuda::api* cu_ = nullptr;
  CUstream cs_ = nullptr;
#endif
  decltype(raw_driver()) d_ = nullptr;
  detail::native_stream ds_ = nullptr;
  std::vector<void*> device_, pinned_;
};

// --- byte checks --------------------------------------------------------------------------------

/// Throws (as expect_random does) when `got` differs from `want`; honours
/// MEMAREA_BENCH_TEST_CORRUPT.
void expect_same(std::vector<unsigned char> got, const std::vector<unsigned char>& want,
                 const std::string& what) {
  if (corrupt_for_test() && !got.empty()) got[got.size() / 2] ^= 0xff;
  const auto at = std::mismatch(got.begin(), got.end(), want.begin());
  if (at.first == got.end()) return;
  const auto k = static_cast<std::size_t>(at.first - got.begin());
  throw error(errc::unknown,
              fmt::format("{}: the bytes written differ from the expected ones at offset {} of "
                          "{} (read {:#04x}, expected {:#04x})",
                          what, k, got.size(), got[k], want[k]));
}

std::vector<unsigned char> read_back(const void* p, std::size_t n, const host_copy& get) {
  std::vector<unsigned char> out(n);
  get(out.data(), p, n);
  return out;
}

/// The memset's `count` elements of `value` at p, and the random guard bytes of `seed` after
/// them, read back through `get`.
void expect_memset(const void* p, std::uint32_t value, std::size_t count, unsigned width,
                   std::uint64_t seed, const host_copy& get, const std::string& what) {
  std::vector<unsigned char> want(count * width);
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] = static_cast<unsigned char>(value >> (8 * (i % width)));
  expect_same(read_back(p, want.size(), get), want, what);
  expect_random(static_cast<const unsigned char*>(p) + want.size(), kGuard, seed, get,
                what + " (the bytes after it)");
}

// --- timing -------------------------------------------------------------------------------------

/// Per-call times (ns) of `turns` turns of kCallsPerSide calls a side, alternating call by call
/// (which side goes first alternates by turn), both sides' streams drained before each turn
/// (untimed); a warm-up turn first. Without a baseline only memarea's calls are made.
std::pair<std::vector<double>, std::vector<double>> per_call_ns(
    int turns, const std::function<void()>& drain, const std::function<void()>& mem,
    const std::function<void()>& raw) {
  std::vector<double> m, r;
  for (int t = -1; t < turns; ++t) {
    drain();
    const bool mem_first = t % 2 == 0;
    const int count = raw ? 2 * kCallsPerSide : kCallsPerSide;
    for (int i = 0; i < count; ++i) {
      const bool is_mem = !raw || ((i % 2 == 0) == mem_first);
      const auto t0 = clock_type::now();
      (is_mem ? mem : raw)();
      const std::chrono::duration<double, std::nano> took = clock_type::now() - t0;
      if (t >= 0) (is_mem ? m : r).push_back(took.count());
    }
  }
  drain();
  return {std::move(m), std::move(r)};
}

/// A fixed-cost row (ns per call, as the copy rows): fixed cost = difference of the medians,
/// target >= 0.98x the raw call's speed.
row fixed_cost_row(const std::string& group, const std::string& variant,
                   const std::vector<double>& mem, const std::vector<double>& raw,
                   const std::string& raw_name) {
  row r = measured_row(group, variant, "ns", mem, raw, raw_name);
  if (raw.empty()) return r;
  const double speed = median(raw) / median(mem);
  r.target = fmt::format(">= {:.2f}x the raw call", kTarget);
  r.met = speed >= kTarget;
  r.note = fmt::format("fixed cost {:.0f} ns, {:.3f}x the raw call's speed: medians of {} calls "
                       "a side",
                       median(mem) - median(raw), speed, mem.size());
  return r;
}

/// A bandwidth row: `bytes` written per operation, GB/s from the paired times; target >= 0.98x.
row bandwidth_row(const std::string& group, const std::string& variant, std::size_t bytes,
                  const paired_times& t, bool has_raw, const std::string& raw_name) {
  row r = measured_row(group, variant, "GB/s", gbps_of(bytes, t.a),
                       has_raw ? gbps_of(bytes, t.b) : std::vector<double>{}, raw_name);
  if (!has_raw) return r;
  r.target = fmt::format(">= {:.2f}x raw", kTarget);
  r.met = r.memarea >= kTarget * r.raw;
  r.note = fmt::format("{} turns a side, each the whole operation queued and synchronized; "
                       "median over 10-turn blocks of memarea's time over raw's {:.3f}",
                       t.a.size(), t.block_ratio);
  return r;
}

// --- the rows -----------------------------------------------------------------------------------

void memset_rows(context& ctx, stream& s, raw_side& raw) {
  const bool has_raw = raw.available();
  const host_copy mine = memarea_host_copy();
  const host_copy theirs = has_raw ? raw.host() : mine;
  const int turns = ctx.quick ? 50 : std::max(500, 25 * ctx.repetitions);
  const std::size_t big = ctx.quick ? (std::size_t{16} << 20) : (std::size_t{256} << 20);
  std::uint64_t seed = 0xF111;
  for (unsigned width : {1u, 4u}) {
    const std::uint32_t value = width == 1 ? 0xA5 : 0xDEADBEEF;
    const std::string bits = fmt::format("{}-bit", 8 * width);
    for (std::size_t n : {std::size_t{4} << 10, std::size_t{1} << 20, big}) {
      const std::size_t count = n / width;
      buffer mem = area(0).allocate(n + kGuard);
      void* other = has_raw ? raw.device(n + kGuard) : nullptr;
      const std::uint64_t s_mem = ++seed, s_raw = ++seed;
      // The range gets random bytes (a memset that did nothing cannot pass), and so do the
      // guard bytes after it, with a stream of their own that the check reads from offset 0.
      fill_random(mem.data(), n, s_mem, mine);
      fill_random(static_cast<char*>(mem.data()) + n, kGuard, ~s_mem, mine);
      if (has_raw) {
        fill_random(other, n, s_raw, theirs);
        fill_random(static_cast<char*>(other) + n, kGuard, ~s_raw, theirs);
      }
      auto on_mem = [&] { memset_async(mem.data(), value, count, width, s); };
      auto on_raw = [&] { raw.memset(other, value, count, width); };
      row r;
      if (n <= (std::size_t{4} << 10)) {
        const auto [m, rw] = per_call_ns(
            turns,
            [&] {
              s.synchronize();
              if (has_raw) raw.wait();
            },
            on_mem, has_raw ? std::function<void()>(on_raw) : std::function<void()>());
        r = fixed_cost_row("memset fixed cost", fmt::format("memset_async {} {}, enqueue", bits,
                                                            size_name(n)),
                           m, rw, raw.memset_name(width));
      } else {
        const int reps = 3 * (n >= (std::size_t{64} << 20) ? std::max(3, ctx.repetitions / 2)
                                                           : ctx.repetitions);
        const paired_times t = paired_times_us(
            reps,
            [&] {
              on_mem();
              s.synchronize();
            },
            [&] {
              if (!has_raw) return;
              on_raw();
              raw.wait();
            });
        r = bandwidth_row("memset", fmt::format("{} {}, device", bits, size_name(n)), n, t,
                          has_raw, raw.memset_name(width));
      }
      const std::string what = fmt::format("bench fill: memset {} {}", bits, size_name(n));
      expect_memset(mem.data(), value, count, width, ~s_mem, mine, what + ", memarea");
      if (has_raw) expect_memset(other, value, count, width, ~s_raw, theirs, what + ", raw");
      ctx.add(r);
    }
  }
}

void copy_2d_rows(context& ctx, stream& s, raw_side& raw) {
  const bool has_raw = raw.available();
  const host_copy mine = memarea_host_copy();
  const host_copy theirs = has_raw ? raw.host() : mine;
  struct shape {
    std::size_t width, pitch, height;
    bool to_pinned;
  };
  const std::size_t rows = ctx.quick ? 64 : 1024;
  const shape shapes[] = {{1024, 1536, 4, false},  // 4 KiB in all: the fixed cost
                          {4096, 4608, rows, false},
                          {4096, 4608, rows, true}};
  const int turns = ctx.quick ? 50 : std::max(500, 25 * ctx.repetitions);
  std::uint64_t seed = 0x2D00;
  for (const shape& sh : shapes) {
    const std::size_t n = sh.pitch * sh.height;
    buffer msrc = area(0).allocate(n);
    buffer mdst = sh.to_pinned ? area(0, area_flags::host).allocate(n) : area(0).allocate(n);
    void* rsrc = has_raw ? raw.device(n) : nullptr;
    void* rdst = has_raw ? (sh.to_pinned ? raw.pinned(n) : raw.device(n)) : nullptr;
    fill_random(msrc.data(), n, ++seed, mine);
    fill_random(mdst.data(), n, ++seed, mine);
    if (has_raw) {
      fill_random(rsrc, n, ++seed, theirs);
      fill_random(rdst, n, ++seed, theirs);
    }
    // What each destination must hold afterwards: its own bytes between the rows, its source's
    // rows (read back through each side's own copies).
    auto expected = [&](void* dst, const void* src, const host_copy& get) {
      auto want = read_back(dst, n, get);
      const auto from = read_back(src, n, get);
      for (std::size_t r = 0; r < sh.height; ++r)
        std::memcpy(want.data() + r * sh.pitch, from.data() + r * sh.pitch, sh.width);
      return want;
    };
    const auto want_mem = expected(mdst.data(), msrc.data(), mine);
    const auto want_raw = has_raw ? expected(rdst, rsrc, theirs) : std::vector<unsigned char>{};
    auto on_mem = [&] {
      copy_2d_async(mdst.data(), sh.pitch, msrc.data(), sh.pitch, sh.width, sh.height, s);
    };
    auto on_raw = [&] { raw.copy_2d(rdst, sh.pitch, rsrc, sh.pitch, sh.width, sh.height); };
    const std::string way = sh.to_pinned ? "device->host (pinned)" : "device->device";
    const std::string variant =
        fmt::format("{} rows of {}, pitch {} B, {}", sh.height, size_name(sh.width), sh.pitch,
                    way);
    row r;
    if (sh.height * sh.width <= (std::size_t{4} << 10)) {
      const auto [m, rw] = per_call_ns(
          turns,
          [&] {
            s.synchronize();
            if (has_raw) raw.wait();
          },
          on_mem, has_raw ? std::function<void()>(on_raw) : std::function<void()>());
      r = fixed_cost_row("copy_2d fixed cost", "copy_2d_async " + variant + ", enqueue", m, rw,
                         raw.copy_2d_name());
    } else {
      const paired_times t = paired_times_us(
          3 * ctx.repetitions,
          [&] {
            on_mem();
            s.synchronize();
          },
          [&] {
            if (!has_raw) return;
            on_raw();
            raw.wait();
          });
      r = bandwidth_row("copy_2d", variant, sh.width * sh.height, t, has_raw,
                        raw.copy_2d_name());
    }
    const std::string what = "bench fill: copy_2d " + variant;
    expect_same(read_back(mdst.data(), n, mine), want_mem, what + ", memarea");
    if (has_raw) expect_same(read_back(rdst, n, theirs), want_raw, what + ", raw");
    ctx.add(r);
  }
}

void fill_rows(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench fill: no devices, no rows\n";
    return;
  }
  stream s(0);
  raw_side raw(s);
  memset_rows(ctx, s, raw);
  copy_2d_rows(ctx, s, raw);
}

const registrar reg("fill", fill_rows, {
    "memset fixed cost: memset_async 8-bit and 32-bit 4 KiB, enqueue",
    "memset: 8-bit and 32-bit, 1 MiB and 256 MiB (16 MiB with --quick), device",
    "copy_2d fixed cost: 4 rows of 1 KiB (pitch 1.5 KiB) device->device, enqueue",
    "copy_2d: 1024 rows (64 with --quick) of 4 KiB, pitch 4.5 KiB, device->device and "
    "device->host (pinned)"});

}  // namespace
}  // namespace memarea::cli::bench
