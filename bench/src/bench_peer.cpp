// The peer benchmark: memarea's peer copy against the raw peer copy a user would make instead
// (cuMemcpyPeerAsync on CUDA; elsewhere the driver layer's own call on a driver of its own, see
// raw_driver.hpp), in one run, peer access on and off, one direction and both at once. The two
// sides copy two sets of buffers filled with random bytes, each side its own set at a time; on
// CUDA both sets are memarea's and the sides swap them halfway through each row (where buffers
// lie moves a short copy: docs/bench.md). After each half both sides' destinations are compared
// byte for byte with their sources, each through that side's own host copies.
// Which path memarea's copy takes is named on every row: with access on, the driver's peer
// copy; with access off, the driver's own staging up to 4 MiB (docs/peer.md), memarea's
// pipeline through pinned host buffers above. Estimator: docs/bench.md.
//
// (The staging sweep that tuned the pipeline's chunk sizes is internal tuning, not a user's
// measurement: it lives in bench/staging_sweep.cpp, a developer binary.)
#include "bench/src/bench.hpp"
#include "bench/src/raw_cuda.hpp"
#include "bench/src/raw_driver.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>

namespace memarea::cli::bench {
namespace {

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 30)) return fmt::format("{} GiB", n >> 30);
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} KiB", n >> 10);
}

#ifdef MEMAREA_HAVE_CUDA
void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw error(errc::unknown, fmt::format("bench peer: raw {} failed: {}", what,
                                           static_cast<int>(r)));
}
#endif

/// The raw peer copy of one direction from device `src` to device `dst`, on a stream of its own
/// on the source device. On CUDA it copies any two pointers (memarea's buffers too); elsewhere
/// the baseline's driver knows only its own memory, so it makes a source and a destination of
/// its own.
class raw_copier {
 public:
  raw_copier(int src, int dst, std::size_t n) : src_(src), dst_(dst), n_(n) {
#ifdef MEMAREA_HAVE_CUDA
    if ((cu_ = raw_cuda())) {
      CUdevice d;
      check_cu(cu_->DeviceGet(&d, src), "cuDeviceGet");
      check_cu(cu_->DevicePrimaryCtxRetain(&src_ctx_, d), "cuDevicePrimaryCtxRetain");
      check_cu(cu_->DeviceGet(&d, dst), "cuDeviceGet");
      check_cu(cu_->DevicePrimaryCtxRetain(&dst_ctx_, d), "cuDevicePrimaryCtxRetain");
      check_cu(cu_->CtxSetCurrent(src_ctx_), "cuCtxSetCurrent");
      check_cu(cu_->StreamCreate(&cs_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      return;
    }
#endif
    if ((d_ = raw_driver())) {
      detail::check(d_->malloc_device(dst, n, &to_), "bench peer: raw malloc_device");
      detail::check(d_->malloc_device(src, n, &from_), "bench peer: raw malloc_device");
      detail::check(d_->stream_create(src, &ds_), "bench peer: raw stream_create");
    }
  }
  ~raw_copier() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      cu_->CtxSetCurrent(src_ctx_);
      if (cs_) {
        cu_->StreamSynchronize(cs_);
        cu_->StreamDestroy(cs_);
      }
      return;
    }
#endif
    if (d_) {
      if (ds_) {
        (void)d_->stream_synchronize(src_, ds_);
        (void)d_->stream_destroy(src_, ds_);
      }
      if (from_) (void)d_->free_device(from_);
      if (to_) (void)d_->free_device(to_);
    }
  }
  raw_copier(const raw_copier&) = delete;
  raw_copier& operator=(const raw_copier&) = delete;

  /// Whether this backend has a raw peer copy to compare with.
  bool available() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return true;
#endif
    return from_ != nullptr;
  }
  /// Whether the raw call copies memory it did not make (CUDA: any device pointer).
  bool takes_any_pointer() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return true;
#endif
    return false;
  }
  std::string name() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return "cuMemcpyPeerAsync";
#endif
    if (d_) return raw_driver_name("memcpy_peer_async");
    return no_raw("no raw peer copy");
  }
  /// Its own source and destination (nullptr where it copies memarea's buffers).
  void* source() const { return from_; }
  void* destination() const { return to_; }
  /// Queues one copy of n bytes from `from` (on the source device) to `to` (on the destination
  /// device). On CUDA with no context switch: the stream carries its context, and a user who
  /// knows that switches for no call on a named stream (memarea's CUDA backend does not either;
  /// bench/experiments/stream_context_calls.cpp, docs/bench.md).
  void enqueue(void* to, const void* from) {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      check_cu(cu_->MemcpyPeerAsync(reinterpret_cast<CUdeviceptr>(to), dst_ctx_,
                                    reinterpret_cast<CUdeviceptr>(from), src_ctx_, n_, cs_),
               "cuMemcpyPeerAsync");
      return;
    }
#endif
    detail::check(d_->memcpy_peer_async(to, dst_, from, src_, n_, src_, ds_),
                  "bench peer: raw memcpy_peer_async");
  }
  /// Waits for what was queued.
  void wait() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      check_cu(cu_->StreamSynchronize(cs_), "cuStreamSynchronize");
      return;
    }
#endif
    detail::check(d_->stream_synchronize(src_, ds_), "bench peer: raw stream_synchronize");
  }
  /// The baseline's own host copies, for filling and checking its buffers.
  host_copy host() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_)
      return [this](void* d, const void* s, std::size_t n) {
        cu_->CtxSetCurrent(src_ctx_);
        check_cu(cu_->MemcpyAsync(reinterpret_cast<CUdeviceptr>(d),
                                  reinterpret_cast<CUdeviceptr>(s), n, nullptr),
                 "cuMemcpyAsync");
        check_cu(cu_->StreamSynchronize(nullptr), "cuStreamSynchronize");
      };
#endif
    return [this](void* d, const void* s, std::size_t n) {
      detail::check(d_->memcpy_async(d, s, n, src_, nullptr), "bench peer: raw memcpy_async");
      detail::check(d_->stream_synchronize(src_, nullptr), "bench peer: raw stream_synchronize");
    };
  }

 private:
#ifdef MEMAREA_HAVE_CUDA
  const detail::cuda::api* cu_ = nullptr;
  CUcontext src_ctx_ = nullptr, dst_ctx_ = nullptr;
  CUstream cs_ = nullptr;
#endif
  decltype(raw_driver()) d_ = nullptr;
  detail::native_stream ds_ = nullptr;
  int src_, dst_;
  std::size_t n_;
  void* from_ = nullptr;
  void* to_ = nullptr;
};

/// Peer access between a and b on the sim's own baseline driver for a scope (memarea's
/// scoped_access covers CUDA and HIP, whose access state is the process's, not a driver
/// object's).
class raw_access {
 public:
  raw_access(int a, int b) : a_(a), b_(b) {
    if (backend_name() != "sim" || !(d_ = raw_driver())) return;
    detail::check(d_->enable_peer_access(a, b, 0), "bench peer: raw enable_peer_access");
    detail::check(d_->enable_peer_access(b, a, 0), "bench peer: raw enable_peer_access");
  }
  ~raw_access() {
    if (!d_) return;
    (void)d_->disable_peer_access(a_, b_);
    (void)d_->disable_peer_access(b_, a_);
  }
  raw_access(const raw_access&) = delete;
  raw_access& operator=(const raw_access&) = delete;

 private:
  decltype(raw_driver()) d_ = nullptr;
  int a_, b_;
};

/// The path memarea's copy of n bytes takes (docs/peer.md), named on the row.
std::string path_of(bool access, std::size_t n) {
  if (access) return "path: the driver's peer copy (memarea adds its lookups and path choice)";
  for (const char* v : {"MEMAREA_STAGING_CHUNK", "MEMAREA_STAGING_MIN_CHUNK",
                        "MEMAREA_STAGING_CHUNK_COST", "MEMAREA_STAGING_BUFFERS",
                        "MEMAREA_STAGING_DRIVER_UP_TO"})
    if (std::getenv(v)) return "path: as the MEMAREA_STAGING_* settings choose";
  // The defaults: up to 4 MiB the driver stages; from 16 MiB a copy is more than two chunks.
  if (n <= (std::size_t{4} << 20)) return "path: the driver's own staging (<= 4 MiB)";
  return "path: memarea's pipeline through pinned host buffers";
}

/// The rows of the ordered pair a -> b at `sizes`: one direction, and both at once where
/// `both_ways`; access on and off (`both_access`), else only the state the pair allows (on where
/// it can).
void pair_rows(context& ctx, int a, int b, const std::vector<std::size_t>& sizes,
               bool both_ways, bool both_access, std::uint64_t& seed) {
  const std::string fwd = fmt::format("{}->{}", a, b), back = fmt::format("{}->{}", b, a),
                    two = fmt::format("{}<->{}", a, b);
  // Each device holds memarea's source and destination and the baseline's: four of the size.
  const std::size_t fits =
      std::min(get_device_properties(a).free_memory, get_device_properties(b).free_memory) / 5;
  const bool can = peer::can_access(a, b) && peer::can_access(b, a);
  for (bool access : {true, false}) {
    if (!both_access && access != can) continue;
    if (access && !can) {
      std::cerr << "bench peer: devices " << a << " and " << b
                << " cannot reach each other; access-on rows skipped\n";
      continue;
    }
    std::optional<peer::scoped_access> ab, ba;
    std::optional<raw_access> raw_on;
    if (access) {
      ab.emplace(a, b);
      ba.emplace(b, a);
      raw_on.emplace(a, b);
    }
    for (std::size_t n : sizes) {
      if (n > fits) {
        std::cerr << "bench peer: " << size_name(n) << " does not fit; skipped\n";
        continue;
      }
      // A set of buffers: a -> b one way (xa -> xb), b -> a the other (yb -> ya), with the
      // seeds of its two sources. Where buffers lie moves a short copy by more than memarea's
      // fixed cost (docs/bench.md), so where the raw call takes any pointer (CUDA) both sets
      // are memarea's, made alike, and the sides swap them halfway: each side copies set 0 in
      // one half of the turns and set 1 in the other. Elsewhere the baseline's driver knows
      // only its own memory, and set 1 is the raw copiers' own for the whole row.
      raw_copier raw_ab(a, b, n), raw_ba(b, a, n);
      // memarea's streams, made at the same point as the raw copiers' (each row's, with the
      // row's access already set), so that neither side's streams are older.
      stream sa(a), sb(b);
      const bool has_raw = raw_ab.available();
      const bool swap = has_raw && raw_ab.takes_any_pointer();
      struct set {
        void *xa, *xb, *yb, *ya;
        std::uint64_t s_ab, s_ba;
      };
      std::vector<buffer> made;
      made.reserve(8);
      auto make = [&](int device) { return made.emplace_back(area(device).allocate(n)).data(); };
      set sets[2]{};
      sets[0] = {make(a), make(b), make(b), make(a), ++seed, ++seed};
      if (swap)
        sets[1] = {make(a), make(b), make(b), make(a), ++seed, ++seed};
      else if (has_raw)
        sets[1] = {raw_ab.source(), raw_ab.destination(), raw_ba.source(), raw_ba.destination(),
                   ++seed, ++seed};
      // Each side fills its sources and checks its destinations with its own host copies (the
      // raw side's: each direction's copier), so that neither side's check rests on the other's
      // copies.
      const host_copy mine = memarea_host_copy();
      const host_copy raw_host_ab = has_raw ? raw_ab.host() : mine;
      const host_copy raw_host_ba = has_raw ? raw_ba.host() : mine;
      fill_random(sets[0].xa, n, sets[0].s_ab, mine);
      fill_random(sets[0].yb, n, sets[0].s_ba, mine);
      if (has_raw) {
        fill_random(sets[1].xa, n, sets[1].s_ab, swap ? mine : raw_host_ab);
        fill_random(sets[1].yb, n, sets[1].s_ba, swap ? mine : raw_host_ba);
      }
      const std::string on = access ? "access on" : "access off";
      const int reps = 3 * (n >= (std::size_t{256} << 20) ? std::max(3, ctx.repetitions / 4)
                                                          : ctx.repetitions);
      const bool big = n >= (std::size_t{64} << 20);
      // One row's turns, in two halves: in half h memarea copies set h (swap) or 0, the raw
      // side the other set. Before each half the destinations get other bytes (a copy that did
      // nothing cannot pass); after it each side's destinations are checked with its own host
      // copies. Returns both sides' times and, per half, memarea's median over the raw one's.
      struct halves {
        paired_times t;
        double ratio[2] = {0, 0};
      };
      auto run_halves = [&](bool both, const char* way) {
        halves out;
        for (int h = 0; h < 2; ++h) {
          const set& m = sets[swap ? h : 0];
          const set& r = sets[swap ? 1 - h : 1];
          fill_random(m.xb, n, ~m.s_ab, mine);
          if (both) fill_random(m.ya, n, ~m.s_ba, mine);
          if (has_raw) {
            fill_random(r.xb, n, ~r.s_ab, raw_host_ab);
            if (both) fill_random(r.ya, n, ~r.s_ba, raw_host_ba);
          }
          auto mem = [&] {
            copy_peer_async(m.xb, b, m.xa, a, n, sa);
            if (both) copy_peer_async(m.ya, a, m.yb, b, n, sb);
            sa.synchronize();
            if (both) sb.synchronize();
          };
          auto raw = [&] {
            raw_ab.enqueue(r.xb, r.xa);
            if (both) raw_ba.enqueue(r.ya, r.yb);
            raw_ab.wait();
            if (both) raw_ba.wait();
          };
          const paired_times t = has_raw ? paired_times_us(reps / 2, mem, raw)
                                         : paired_times_us(reps / 2, mem, [] {});
          const std::string what = fmt::format("bench peer: {} {} {}, half {}", on,
                                               size_name(n), way, h + 1);
          expect_random(m.xb, n, m.s_ab, mine, what + ", memarea " + fwd);
          if (both) expect_random(m.ya, n, m.s_ba, mine, what + ", memarea " + back);
          if (has_raw) {
            expect_random(r.xb, n, r.s_ab, raw_host_ab, what + ", raw " + fwd);
            if (both) expect_random(r.ya, n, r.s_ba, raw_host_ba, what + ", raw " + back);
            out.ratio[h] = median(t.a) / median(t.b);
          }
          out.t.a.insert(out.t.a.end(), t.a.begin(), t.a.end());
          out.t.b.insert(out.t.b.end(), t.b.begin(), t.b.end());
        }
        return out;
      };
      // The halves' note: in GB/s terms, raw time over memarea's (above 1: memarea faster).
      auto halves_note = [&](const halves& hv) {
        if (!swap) return std::string();
        return fmt::format("; the sides swap two sets of buffers halfway: memarea {:.3f}x and "
                           "{:.3f}x the raw speed on the first set made and on the second",
                           1 / hv.ratio[0], hv.ratio[1] > 0 ? 1 / hv.ratio[1] : 0.0);
      };
      // One direction.
      const halves t1 = run_halves(false, fwd.c_str());
      row r = measured_row("peer copy " + on, fwd + " " + size_name(n), "GB/s", gbps_of(n, t1.t.a),
                           has_raw ? gbps_of(n, t1.t.b) : std::vector<double>{},
                           raw_ab.name() + (access || !has_raw ? "" : " (driver stages)"));
      // With access on, the copy's speed target holds at every size (memarea's fixed cost against a
      // copy of a few microseconds); without, the staging pipeline's from 64 MiB.
      const bool judged = has_raw && (access || big);
      if (judged) {
        r.target = access ? ">= 0.98x raw" : ">= 1.3x raw";
        r.met = r.memarea >= (access ? 0.98 : 1.3) * r.raw;
      }
      const std::string path = path_of(access, n);
      r.note = path + halves_note(t1);
      if (backend_name() == "sim" && !access)
        r.note += "; sim's raw copy does not stage, so the target cannot hold here";
      ctx.add(r);
      if (!both_ways) continue;
      // Both directions at once.
      const halves t2 = run_halves(true, two.c_str());
      row r2 = measured_row(r.group, two + " " + size_name(n), "GB/s", gbps_of(2 * n, t2.t.a),
                            has_raw ? gbps_of(2 * n, t2.t.b) : std::vector<double>{}, r.raw_name);
      r2.note = path + halves_note(t2);
      if (backend_name() == "sim" && !access)
        r2.note += "; sim's raw copy does not stage, so the target cannot hold here";
      if (judged) {
        r2.target = access ? ">= 0.98x raw (bidir)" : ">= 1.3x raw (bidir)";
        r2.met = r2.memarea >= (access ? 0.98 : 1.3) * r2.raw;
      }
      ctx.add(r2);
    }
  }
}

/// The ordered pairs beside 0 -> 1 that the bench measures on n devices: every one up to 8
/// devices; above, a sample: those from and to device 0 and each device to the next.
std::vector<std::pair<int, int>> other_pairs(int n) {
  std::vector<std::pair<int, int>> out;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || (a == 0 && b == 1)) continue;
      if (n <= 8 || a == 0 || b == 0 || b == (a + 1) % n) out.emplace_back(a, b);
    }
  return out;
}

void peer_copies(context& ctx) {
  if (device_count() < 2) {
    std::cerr << "bench peer: needs 2 devices, the " << backend_name() << " backend has "
              << device_count() << "; no rows\n";
    return;
  }
  std::vector<std::size_t> sizes{std::size_t{4} << 10, std::size_t{64} << 10,
                                 std::size_t{1} << 20, std::size_t{16} << 20};
  if (!ctx.quick)
    sizes.insert(sizes.end(), {std::size_t{64} << 20, std::size_t{256} << 20, std::size_t{1} << 30});
  std::uint64_t seed = 0x9EE2;
  // 0 -> 1 at every size, access on and off: the rows docs/bench.md and earlier runs quote.
  pair_rows(ctx, 0, 1, sizes, true, true, seed);
  // Every other ordered pair at one size, in the access state the pair allows: one direction,
  // and both at once for a < b (0 <-> 1 is above).
  const int n = device_count();
  if (n > 8)
    std::cerr << "bench peer: " << n << " devices: beside 0->1, a sample of pairs (those from "
              << "and to device 0, and each device to the next)\n";
  // 256 MiB up to 4 devices; above, 64 MiB (still bound by the link's bandwidth), so that
  // the 55 more pairs of 8 devices take about two minutes rather than five.
  const std::size_t mib = std::size_t{1} << 20;
  const std::vector<std::size_t> one{ctx.quick ? 16 * mib : n <= 4 ? 256 * mib : 64 * mib};
  for (auto [a, b] : other_pairs(n)) pair_rows(ctx, a, b, one, a < b && !(a == 0 && b == 1),
                                                false, seed);
}

const registrar reg("peer", peer_copies, {
    "peer copy access on, peer copy access off (two devices): 0->1 and 0<->1; 4 KiB, 64 KiB, "
    "1 MiB, 16 MiB, and without --quick 64 MiB, 256 MiB, 1 GiB; on 3 or more devices every "
    "other ordered pair a->b (a<->b for a < b) at 256 MiB (above 4 devices 64 MiB; --quick: "
    "16 MiB), access as the pair allows; above 8 devices a sample of pairs"});

}  // namespace
}  // namespace memarea::cli::bench
