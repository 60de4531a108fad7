// Issue 4's benchmark: memarea's peer copy against the raw peer copy a user would make instead
// (cuMemcpyPeerAsync on CUDA; elsewhere the driver layer's own call on a driver of its own, see
// raw_driver.hpp), in one run, peer access on and off, one direction and both at once. Each
// side copies between buffers of its own, filled with random bytes, and both sides'
// destinations are compared byte for byte with their sources after the timed copies.
// Which path memarea's copy takes is named on every row: with access on, the driver's peer
// copy; with access off, the driver's own staging up to 4 MiB (docs/peer.md), memarea's
// pipeline through pinned host buffers above. Estimator: docs/bench.md.
//
// (The staging sweep that tuned the pipeline's chunk sizes is internal tuning, not a user's
// measurement: it lives in bench/staging_sweep.cpp, a developer binary.)
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"
#include "tools/raw_driver.hpp"

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

/// The raw peer copy of one direction: a source on `src` and a destination on `dst` of its
/// own, and a stream of its own on the source device.
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
      CUdeviceptr p;
      check_cu(cu_->CtxSetCurrent(dst_ctx_), "cuCtxSetCurrent");
      check_cu(cu_->MemAlloc(&p, n), "cuMemAlloc");
      to_ = reinterpret_cast<void*>(p);
      check_cu(cu_->CtxSetCurrent(src_ctx_), "cuCtxSetCurrent");
      check_cu(cu_->MemAlloc(&p, n), "cuMemAlloc");
      from_ = reinterpret_cast<void*>(p);
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
      if (from_) cu_->MemFree(reinterpret_cast<CUdeviceptr>(from_));
      if (to_) cu_->MemFree(reinterpret_cast<CUdeviceptr>(to_));
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
  bool available() const { return from_ != nullptr; }
  std::string name() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return "cuMemcpyPeerAsync";
#endif
    if (d_) return raw_driver_name("memcpy_peer_async");
    return no_raw("no raw peer copy");
  }
  void* source() const { return from_; }
  void* destination() const { return to_; }
  /// Queues one copy of the whole buffer. On CUDA with no context switch: the stream carries
  /// its context, and a user who knows that switches for no call on a named stream (memarea's
  /// CUDA backend does not either; bench/experiments/stream_context_calls.cpp, docs/bench.md).
  void enqueue() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      check_cu(cu_->MemcpyPeerAsync(reinterpret_cast<CUdeviceptr>(to_), dst_ctx_,
                                    reinterpret_cast<CUdeviceptr>(from_), src_ctx_, n_, cs_),
               "cuMemcpyPeerAsync");
      return;
    }
#endif
    detail::check(d_->memcpy_peer_async(to_, dst_, from_, src_, n_, src_, ds_),
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

void peer_copies(context& ctx) {
  if (device_count() < 2) {
    std::cerr << "bench peer: needs 2 devices, the " << backend_name() << " backend has "
              << device_count() << "; no rows\n";
    return;
  }
  const int a = 0, b = 1;
  std::vector<std::size_t> sizes{std::size_t{4} << 10, std::size_t{64} << 10,
                                 std::size_t{1} << 20, std::size_t{16} << 20};
  if (!ctx.quick)
    sizes.insert(sizes.end(), {std::size_t{64} << 20, std::size_t{256} << 20, std::size_t{1} << 30});
  // Each device holds memarea's source and destination and the baseline's: four of the size.
  const std::size_t fits =
      std::min(get_device_properties(a).free_memory, get_device_properties(b).free_memory) / 5;
  const bool can = peer::can_access(a, b) && peer::can_access(b, a);
  stream sa(a), sb(b);
  std::uint64_t seed = 0x9EE2;
  for (bool access : {true, false}) {
    if (access && !can) {
      std::cerr << "bench peer: devices 0 and 1 cannot reach each other; access-on rows skipped\n";
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
      // memarea's: xa -> xb one way, yb -> ya the other. The baseline's: its own pair each way.
      buffer xa = area(a).allocate(n), xb = area(b).allocate(n);
      buffer ya = area(a).allocate(n), yb = area(b).allocate(n);
      raw_copier raw_ab(a, b, n), raw_ba(b, a, n);
      const bool has_raw = raw_ab.available();
      const std::uint64_t s_ab = ++seed, s_ba = ++seed, s_raw_ab = ++seed, s_raw_ba = ++seed;
      const host_copy mine = memarea_host_copy();
      fill_random(xa.data(), n, s_ab, mine);
      fill_random(yb.data(), n, s_ba, mine);
      if (has_raw) {
        fill_random(raw_ab.source(), n, s_raw_ab, raw_ab.host());
        fill_random(raw_ba.source(), n, s_raw_ba, raw_ba.host());
      }
      // Destinations start with other bytes, so that a copy that did nothing cannot pass.
      auto poison = [&] {
        fill_random(xb.data(), n, ~s_ab, mine);
        fill_random(ya.data(), n, ~s_ba, mine);
        if (has_raw) {
          fill_random(raw_ab.destination(), n, ~s_raw_ab, raw_ab.host());
          fill_random(raw_ba.destination(), n, ~s_raw_ba, raw_ba.host());
        }
      };
      const std::string on = access ? "access on" : "access off";
      auto check = [&](bool both) {
        const std::string what = fmt::format("bench peer: {} {}", on, size_name(n));
        expect_random(xb.data(), n, s_ab, mine, what + " 0->1, memarea");
        if (both) expect_random(ya.data(), n, s_ba, mine, what + " 1->0, memarea");
        if (!has_raw) return;
        expect_random(raw_ab.destination(), n, s_raw_ab, raw_ab.host(), what + " 0->1, raw");
        if (both)
          expect_random(raw_ba.destination(), n, s_raw_ba, raw_ba.host(), what + " 1->0, raw");
      };
      const int reps = 3 * (n >= (std::size_t{256} << 20) ? std::max(3, ctx.repetitions / 4)
                                                          : ctx.repetitions);
      const bool big = n >= (std::size_t{64} << 20);
      auto timed = [&](const std::function<void()>& mem, const std::function<void()>& raw) {
        return has_raw ? paired_times_us(reps, mem, raw) : paired_times_us(reps, mem, [] {});
      };
      // One direction.
      poison();
      const paired_times t1 = timed(
          [&] {
            copy_peer_async(xb.data(), b, xa.data(), a, n, sa);
            sa.synchronize();
          },
          [&] {
            raw_ab.enqueue();
            raw_ab.wait();
          });
      check(false);
      row r = measured_row("peer copy " + on, "0->1 " + size_name(n), "GB/s", gbps_of(n, t1.a),
                           has_raw ? gbps_of(n, t1.b) : std::vector<double>{},
                           raw_ab.name() + (access || !has_raw ? "" : " (driver stages)"));
      // With access on, issue 18's target holds at every size (memarea's fixed cost against a
      // copy of a few microseconds); without, the staging pipeline's from 64 MiB.
      const bool judged = has_raw && (access || big);
      if (judged) {
        r.target = access ? ">= 0.98x raw" : ">= 1.3x raw";
        r.met = r.memarea >= (access ? 0.98 : 1.3) * r.raw;
      }
      r.note = path_of(access, n);
      if (backend_name() == "sim" && !access)
        r.note += "; sim's raw copy does not stage, so the target cannot hold here";
      ctx.add(r);
      // Both directions at once.
      poison();
      const paired_times t2 = timed(
          [&] {
            copy_peer_async(xb.data(), b, xa.data(), a, n, sa);
            copy_peer_async(ya.data(), a, yb.data(), b, n, sb);
            sa.synchronize();
            sb.synchronize();
          },
          [&] {
            raw_ab.enqueue();
            raw_ba.enqueue();
            raw_ab.wait();
            raw_ba.wait();
          });
      check(true);
      row r2 = measured_row(r.group, "0<->1 " + size_name(n), "GB/s", gbps_of(2 * n, t2.a),
                            has_raw ? gbps_of(2 * n, t2.b) : std::vector<double>{}, r.raw_name);
      r2.note = r.note;
      if (judged) {
        r2.target = access ? ">= 0.98x raw (bidir)" : ">= 1.3x raw (bidir)";
        r2.met = r2.memarea >= (access ? 0.98 : 1.3) * r2.raw;
      }
      ctx.add(r2);
    }
  }
}

const registrar reg("peer", peer_copies);

}  // namespace
}  // namespace memarea::cli::bench
