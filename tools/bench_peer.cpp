// Issue 4's benchmark: memarea's peer copy vs the raw driver peer copy (cuMemcpyPeerAsync on
// CUDA, the driver layer elsewhere) in the same run, peer access on and off, one direction and
// both at once. With access off memarea pipelines through pinned host buffers and the raw call
// lets the driver stage on its own.
#include "core/copy_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
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

/// The raw peer copy of one direction, queued on a stream of the source device.
class raw_copier {
 public:
  raw_copier(const stream& s, int src, int dst) : s_(s), src_(src), dst_(dst) {
#ifdef MEMAREA_HAVE_CUDA
    if ((cu_ = raw_cuda())) {
      CUdevice d;
      check_cu(cu_->DeviceGet(&d, src));
      check_cu(cu_->DevicePrimaryCtxRetain(&src_ctx_, d));
      check_cu(cu_->DeviceGet(&d, dst));
      check_cu(cu_->DevicePrimaryCtxRetain(&dst_ctx_, d));
      check_cu(cu_->CtxSetCurrent(src_ctx_));
      check_cu(cu_->StreamCreate(&raw_, CU_STREAM_NON_BLOCKING));
    }
#endif
  }
  ~raw_copier() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_ && raw_) {
      cu_->CtxSetCurrent(src_ctx_);
      cu_->StreamSynchronize(raw_);
      cu_->StreamDestroy(raw_);
    }
#endif
  }
  raw_copier(const raw_copier&) = delete;
  raw_copier& operator=(const raw_copier&) = delete;

  std::string name() const {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) return "cuMemcpyPeerAsync";
#endif
    return "driver layer memcpy_peer_async";
  }
  /// Queues one copy.
  void enqueue(void* dst, const void* src, std::size_t n) {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      cu_->CtxSetCurrent(src_ctx_);
      check_cu(cu_->MemcpyPeerAsync(reinterpret_cast<CUdeviceptr>(dst), dst_ctx_,
                                    reinterpret_cast<CUdeviceptr>(src), src_ctx_, n, raw_));
      return;
    }
#endif
    detail::check(detail::system::get().gpu().memcpy_peer_async(dst, dst_, src, src_, n, src_,
                                                                s_.get()->native),
                  "raw peer copy");
  }
  /// Waits for what was queued.
  void wait() {
#ifdef MEMAREA_HAVE_CUDA
    if (cu_) {
      cu_->CtxSetCurrent(src_ctx_);
      check_cu(cu_->StreamSynchronize(raw_));
      return;
    }
#endif
    s_.synchronize();
  }

 private:
#ifdef MEMAREA_HAVE_CUDA
  static void check_cu(CUresult r) {
    if (r != CUDA_SUCCESS)
      throw error(errc::unknown, fmt::format("raw CUDA call failed: {}", static_cast<int>(r)));
  }
  const detail::cuda::api* cu_ = nullptr;
  CUcontext src_ctx_ = nullptr, dst_ctx_ = nullptr;
  CUstream raw_ = nullptr;
#endif
  const stream& s_;
  int src_, dst_;
};

/// Median over rounds (alternating memarea and raw, so drift hits both) of the median time of
/// one operation; returns {memarea us, raw us}.
std::pair<double, double> time_pair(int reps, const std::function<void()>& mem,
                                    const std::function<void()>& raw) {
  std::vector<double> m, r;
  for (int round = 0; round < 3; ++round) {
    m.push_back(median_us(reps, mem));
    r.push_back(median_us(reps, raw));
  }
  std::sort(m.begin(), m.end());
  std::sort(r.begin(), r.end());
  return {m[1], r[1]};
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
  // Each device holds a source and a destination of the largest size.
  const std::size_t fits =
      std::min(get_device_properties(a).free_memory, get_device_properties(b).free_memory) / 3;
  const bool can = peer::can_access(a, b) && peer::can_access(b, a);
  stream sa(a), sb(b);
  for (bool access : {true, false}) {
    if (access && !can) {
      std::cerr << "bench peer: devices 0 and 1 cannot reach each other; access-on rows skipped\n";
      continue;
    }
    std::optional<peer::scoped_access> ab, ba;
    if (access) {
      ab.emplace(a, b);
      ba.emplace(b, a);
    }
    for (std::size_t n : sizes) {
      if (n > fits) {
        std::cerr << "bench peer: " << size_name(n) << " does not fit; skipped\n";
        continue;
      }
      buffer xa = area(a).allocate(n), xb = area(b).allocate(n);
      buffer ya = area(a).allocate(n), yb = area(b).allocate(n);
      raw_copier raw_ab(sa, a, b), raw_ba(sb, b, a);
      const int reps = n >= (std::size_t{256} << 20) ? std::max(3, ctx.repetitions / 4)
                                                     : ctx.repetitions;
      const bool big = n >= (std::size_t{64} << 20);
      const std::string on = access ? "access on" : "access off";
      // One direction.
      auto [mem1, raw1] = time_pair(
          reps,
          [&] {
            copy_peer_async(xb.data(), b, xa.data(), a, n, sa);
            sa.synchronize();
          },
          [&] {
            raw_ab.enqueue(xb.data(), xa.data(), n);
            raw_ab.wait();
          });
      row r;
      r.group = "peer copy " + on;
      r.variant = "0->1 " + size_name(n);
      r.unit = "GB/s";
      r.memarea = static_cast<double>(n) / mem1 / 1e3;
      r.raw = static_cast<double>(n) / raw1 / 1e3;
      r.raw_name = raw_ab.name() + (access ? "" : " (driver stages)");
      if (big) {
        r.target = access ? ">= 0.98x raw" : ">= 1.3x raw";
        r.met = r.memarea >= (access ? 0.98 : 1.3) * r.raw;
      }
      r.note = access ? "" : "memarea pipelines through pinned host buffers";
      if (backend_name() == "sim" && !access)
        r.note += "; sim's raw copy does not stage, so the target cannot hold here";
      ctx.add(r);
      // Both directions at once.
      auto [mem2, raw2] = time_pair(
          reps,
          [&] {
            copy_peer_async(xb.data(), b, xa.data(), a, n, sa);
            copy_peer_async(ya.data(), a, yb.data(), b, n, sb);
            sa.synchronize();
            sb.synchronize();
          },
          [&] {
            raw_ab.enqueue(xb.data(), xa.data(), n);
            raw_ba.enqueue(ya.data(), yb.data(), n);
            raw_ab.wait();
            raw_ba.wait();
          });
      row r2 = r;
      r2.variant = "0<->1 " + size_name(n);
      r2.memarea = 2.0 * static_cast<double>(n) / mem2 / 1e3;
      r2.raw = 2.0 * static_cast<double>(n) / raw2 / 1e3;
      if (big) {
        r2.target = access ? ">= 0.98x raw (bidir)" : ">= 1.3x raw (bidir)";
        r2.met = r2.memarea >= (access ? 0.98 : 1.3) * r2.raw;
      }
      ctx.add(r2);
    }
  }
}

/// Tuning data for the staged path (access off, one direction): the defaults and fixed chunk
/// sizes with 4 and 8 slots, against the driver's staged copy in the same run.
/// Not a target: it shows why the defaults are what they are (docs/gpu-results.md).
void staging_sweep(context& ctx) {
  if (ctx.quick) return;
  if (device_count() < 2) {
    std::cerr << "bench staging: needs 2 devices; no rows\n";
    return;
  }
  const int a = 0, b = 1;
  if (peer::is_enabled(a, b) || peer::is_enabled(b, a)) {
    std::cerr << "bench staging: peer access is on between 0 and 1; no rows\n";
    return;
  }
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const detail::staging_settings defaults = detail::staging();
  struct setting {
    std::string name;
    detail::staging_settings s;
  };
  std::vector<setting> settings{{"default", defaults}};
  for (std::size_t c : {MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB})
    for (int nb : {4, 8}) {
      detail::staging_settings s = defaults;
      s.chunk = s.min_chunk = c;
      s.buffers = nb;
      s.driver_up_to = 0;
      settings.push_back({fmt::format("{} x{}", size_name(c), nb), s});
    }
  stream sa(a);
  raw_copier raw(sa, a, b);
  const std::size_t fits =
      std::min(get_device_properties(a).free_memory, get_device_properties(b).free_memory) / 3;
  for (std::size_t n : {4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB}) {
    if (n > fits) continue;
    buffer x = area(a).allocate(n), y = area(b).allocate(n);
    const int reps = n >= 256 * MiB ? std::max(3, ctx.repetitions / 4) : ctx.repetitions;
    auto median3 = [&](const std::function<void()>& fn) {
      std::vector<double> t;
      for (int round = 0; round < 3; ++round) t.push_back(median_us(reps, fn));
      std::sort(t.begin(), t.end());
      return t[1];
    };
    const double raw_us = median3([&] {
      raw.enqueue(y.data(), x.data(), n);
      raw.wait();
    });
    for (const auto& st : settings) {
      detail::set_staging(st.s);
      const double mem_us = median3([&] {
        copy_peer_async(y.data(), b, x.data(), a, n, sa);
        sa.synchronize();
      });
      row r;
      r.group = "staging sweep";
      r.variant = fmt::format("0->1 {}, {}", size_name(n), st.name);
      r.unit = "GB/s";
      r.memarea = static_cast<double>(n) / mem_us / 1e3;
      r.raw = static_cast<double>(n) / raw_us / 1e3;
      r.raw_name = raw.name() + " (driver stages)";
      r.note = fmt::format("path {}, chunk {}", detail::to_string(detail::last_copy_path()),
                           size_name(st.s.chunk_for(n)));
      ctx.add(r);
    }
  }
  detail::set_staging(defaults);
}

const registrar reg("peer", peer_copies);
const registrar reg_staging("staging", staging_sweep);

}  // namespace
}  // namespace memarea::cli::bench
