// Issue 6's benchmark: managed prefetch host->device and device->host through memarea vs the raw
// driver call (CUDA: cuMemPrefetchAsync with a CUmemLocation, CUDA 12.2+/13 signature) in one
// run, with pinned copies of the same size for reference. Managed memory is kept to a small
// share of the device's free memory (at most 1 GiB, one buffer reused for every size).
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/managed.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>

namespace memarea::cli::bench {
namespace {

namespace mm = memarea::managed;

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The median over reps of the timed part; `setup` runs untimed before each.
double median_s(int reps, const std::function<void()>& setup, const std::function<void()>& timed) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    setup();
    t.push_back(seconds_of(timed));
  }
  return median(std::move(t));
}

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 30)) return fmt::format("{} GiB", n >> 30);
  return fmt::format("{} MiB", n >> 20);
}

/// One raw prefetch (no memarea in between) of [p, p+n) to `to` on the stream, waited for.
using raw_prefetch = std::function<void(void* p, std::size_t n, bool to_device)>;

void managed_prefetch(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench managed: no devices, no rows\n";
    return;
  }
  constexpr int dev = 0;  // a constant: lambdas below use it without capturing it
  auto props = get_device_properties(dev);
  if (!props.managed_memory) {
    std::cerr << "bench managed: device 0 has no managed memory, no rows\n";
    return;
  }
  std::vector<std::size_t> sizes;
  if (ctx.quick) {
    sizes = {std::size_t{16} << 20};
  } else {
    sizes = {std::size_t{256} << 20, std::size_t{1} << 30};
  }
  // Never more than an eighth of what is free (managed overcommit can hang a GPU).
  const std::size_t cap = std::min(props.free_memory / 8, std::size_t{1} << 30);
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](std::size_t s) { return s > cap; }),
              sizes.end());
  if (sizes.empty()) {
    std::cerr << "bench managed: too little free device memory, no rows\n";
    return;
  }
  const std::size_t biggest = sizes.back();
  set_device(dev);
  stream s(dev);
  mm::managed_buffer m(biggest);
  std::memset(m.data(), 0x5a, biggest);  // populate every page on the host
  buffer pinned = area(dev, area_flags::host).allocate(biggest);
  buffer device_mem = area(dev).allocate(biggest);
  std::memset(pinned.data(), 0x3c, biggest);

  auto& gpu = detail::system::get().gpu();
  const memarea_stream_t h = s.get();
  std::string raw_name = "driver layer mem_prefetch_async";
  raw_prefetch raw = [&](void* p, std::size_t n, bool to_device) {
    auto loc = to_device ? detail::location::device(dev) : detail::location::host();
    detail::check(gpu.mem_prefetch_async(p, n, loc, h->device, h->native), "raw prefetch");
    detail::check(gpu.stream_synchronize(h->device, h->native), "raw sync");
  };
  std::string copy_raw_name = "driver layer memcpy_async";
  std::function<void(void*, const void*, std::size_t)> raw_copy = [&](void* d, const void* src,
                                                                       std::size_t n) {
    detail::check(gpu.memcpy_async(d, src, n, h->device, h->native), "raw copy");
    detail::check(gpu.stream_synchronize(h->device, h->native), "raw sync");
  };
#ifdef MEMAREA_HAVE_CUDA
  if (auto* cu = raw_cuda()) {
    if (!cu->MemPrefetchAsync) {
      std::cerr << "bench managed: the CUDA driver has no cuMemPrefetchAsync v2 (12.2+)\n";
    } else {
      raw_name = "cuMemPrefetchAsync(CUmemLocation)";
      copy_raw_name = "cuMemcpyAsync";
      CUdevice cudev;
      cu->DeviceGet(&cudev, dev);
      auto stream_of = [h] { return static_cast<CUstream>(h->native); };
      raw = [cu, cudev, stream_of](void* p, std::size_t n, bool to_device) {
        raw_cuda_use_device(*cu, dev);
        CUmemLocation loc;
        loc.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
        loc.id = to_device ? static_cast<int>(cudev) : 0;
        if (cu->MemPrefetchAsync(reinterpret_cast<CUdeviceptr>(p), n, loc, 0u, stream_of()) !=
                CUDA_SUCCESS ||
            cu->StreamSynchronize(stream_of()) != CUDA_SUCCESS)
          throw error(errc::unknown, "raw cuMemPrefetchAsync failed");
      };
      raw_copy = [cu, stream_of](void* d, const void* src, std::size_t n) {
        raw_cuda_use_device(*cu, dev);
        if (cu->MemcpyAsync(reinterpret_cast<CUdeviceptr>(d), reinterpret_cast<CUdeviceptr>(src),
                            n, stream_of()) != CUDA_SUCCESS ||
            cu->StreamSynchronize(stream_of()) != CUDA_SUCCESS)
          throw error(errc::unknown, "raw cuMemcpyAsync failed");
      };
    }
  }
#endif
  const bool noop = !props.concurrent_managed_access;
  const int reps = std::max(3, std::min(ctx.repetitions, ctx.quick ? 20 : 7));
  auto gbps = [](std::size_t n, double s) { return s > 0 ? static_cast<double>(n) / s / 1e9 : 0; };
  auto mem_to = [&](std::size_t n, bool to_device) {
    mm::prefetch(m.data(), n, to_device ? mm::location::device(dev) : mm::location::host(), s);
    s.synchronize();
  };

  for (std::size_t n : sizes) {
    for (bool to_device : {true, false}) {
      // Alternate memarea and raw one repetition at a time, so drift in the driver's state
      // (device->host prefetch varies by 10% from block to block on H200) hits both alike;
      // the untimed set-up puts every page on the other side first.
      std::vector<double> mems, raws;
      for (int i = 0; i < 3 * reps; ++i) {
        mem_to(n, !to_device);
        mems.push_back(seconds_of([&] { mem_to(n, to_device); }));
        raw(m.data(), n, !to_device);
        raws.push_back(seconds_of([&] { raw(m.data(), n, to_device); }));
      }
      row r;
      r.group = "managed prefetch";
      r.variant = fmt::format("{} {}", to_device ? "host->device" : "device->host", size_name(n));
      r.unit = "GB/s";
      r.memarea = gbps(n, median(mems));
      r.raw = gbps(n, median(raws));
      r.raw_name = raw_name;
      r.target = ">= 0.95x raw";
      r.met = r.memarea >= 0.95 * r.raw;
      if (noop) r.note = "no concurrent managed access: prefetch is a no-op";
      ctx.add(r);
    }
    // Reference: pinned host <-> device copies of the same size.
    for (bool to_device : {true, false}) {
      void* dst = to_device ? device_mem.data() : pinned.data();
      const void* src = to_device ? pinned.data() : device_mem.data();
      auto nothing = [] {};
      const double mem = median_s(reps, nothing, [&] {
        copy_async(dst, src, n, s);
        s.synchronize();
      });
      const double rawc = median_s(reps, nothing, [&] { raw_copy(dst, src, n); });
      row r;
      r.group = "pinned copy (reference)";
      r.variant = fmt::format("{} {}", to_device ? "host->device" : "device->host", size_name(n));
      r.unit = "GB/s";
      r.memarea = gbps(n, mem);
      r.raw = gbps(n, rawc);
      r.raw_name = copy_raw_name;
      r.target = "reference";
      r.met = true;
      ctx.add(r);
    }
  }
}

const registrar reg("managed", managed_prefetch);

}  // namespace
}  // namespace memarea::cli::bench
