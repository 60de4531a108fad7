// The managed benchmark: managed prefetch host->device and device->host through memarea against
// the raw prefetch a user would make instead (CUDA: cuMemPrefetchAsync with a CUmemLocation,
// the CUDA 12.2+/13 signature, on the same stream; elsewhere the driver layer's own call on a
// driver of its own, see raw_driver.hpp), with pinned copies of the same size for reference.
// Each side prefetches and copies memory of its own, filled with random bytes; after the timed
// repetitions the managed memory must still hold its bytes and each copy's destination its
// source's, byte for byte. Managed memory is kept to a small share of the device's free memory
// (at most 1 GiB a side, one buffer reused for every size). Estimator: docs/bench.md.
#include "bench/src/bench.hpp"
#include "bench/src/raw_cuda.hpp"
#include "bench/src/raw_driver.hpp"

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

double us_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 30)) return fmt::format("{} GiB", n >> 30);
  return fmt::format("{} MiB", n >> 20);
}

/// Host memory (pageable, pinned or managed) as both ends of a host_copy.
host_copy host_memcpy() {
  return [](void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); };
}

/// The baseline: its own managed, pinned and device memory, and its calls on them.
struct raw_side {
  std::string prefetch_name, copy_name;
  void* managed = nullptr;
  void* pinned = nullptr;
  void* device = nullptr;
  /// One prefetch of [p, p+n) to the device or the host, waited for.
  std::function<void(void* p, std::size_t n, bool to_device)> prefetch;
  /// One copy, waited for.
  std::function<void(void* dst, const void* src, std::size_t n)> copy;
  std::function<void()> release;
  bool available() const { return managed != nullptr; }
};

constexpr int dev = 0;  // a constant: lambdas below use it without capturing it

raw_side make_raw(std::size_t n, const stream& s) {
  raw_side r;
#ifdef MEMAREA_HAVE_CUDA
  if (auto* cu = raw_cuda()) {
    if (!cu->MemPrefetchAsync) {
      r.prefetch_name = r.copy_name = no_raw("the CUDA driver has no cuMemPrefetchAsync v2 (12.2+)");
      return r;
    }
    raw_cuda_use_device(*cu, dev);
    CUdeviceptr m, d;
    void* h = nullptr;
    if (cu->MemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS ||
        cu->MemHostAlloc(&h, n, 0) != CUDA_SUCCESS || cu->MemAlloc(&d, n) != CUDA_SUCCESS)
      throw error(errc::out_of_memory, "bench managed: the raw allocations failed");
    r.managed = reinterpret_cast<void*>(m);
    r.pinned = h;
    r.device = reinterpret_cast<void*>(d);
    r.prefetch_name = "cuMemPrefetchAsync(CUmemLocation)";
    r.copy_name = "cuMemcpyAsync";
    CUdevice cudev;
    cu->DeviceGet(&cudev, dev);
    // The same stream as memarea's: what a user mixing the two would queue on.
    auto st = static_cast<CUstream>(s.native_handle());
    r.prefetch = [cu, cudev, st](void* p, std::size_t len, bool to_device) {
      raw_cuda_use_device(*cu, dev);
      CUmemLocation loc;
      loc.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
      loc.id = to_device ? static_cast<int>(cudev) : 0;
      if (cu->MemPrefetchAsync(reinterpret_cast<CUdeviceptr>(p), len, loc, 0u, st) !=
              CUDA_SUCCESS ||
          cu->StreamSynchronize(st) != CUDA_SUCCESS)
        throw error(errc::unknown, "bench managed: raw cuMemPrefetchAsync failed");
    };
    r.copy = [cu, st](void* dst, const void* src, std::size_t len) {
      raw_cuda_use_device(*cu, dev);
      if (cu->MemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                          len, st) != CUDA_SUCCESS ||
          cu->StreamSynchronize(st) != CUDA_SUCCESS)
        throw error(errc::unknown, "bench managed: raw cuMemcpyAsync failed");
    };
    r.release = [cu, r] {
      raw_cuda_use_device(*cu, dev);
      cu->MemFree(reinterpret_cast<CUdeviceptr>(r.managed));
      cu->MemFreeHost(r.pinned);
      cu->MemFree(reinterpret_cast<CUdeviceptr>(r.device));
    };
    return r;
  }
#endif
  (void)s;
  auto* d = raw_driver();
  if (!d) {
    r.prefetch_name = r.copy_name = no_raw("no raw prefetch");
    return r;
  }
  detail::check(d->malloc_managed(dev, n, MEMAREA_MEM_ATTACH_GLOBAL, &r.managed),
                "bench managed: raw malloc_managed");
  detail::check(d->malloc_host(dev, n, 0, &r.pinned), "bench managed: raw malloc_host");
  detail::check(d->malloc_device(dev, n, &r.device), "bench managed: raw malloc_device");
  r.prefetch_name = raw_driver_name("mem_prefetch_async");
  r.copy_name = raw_driver_name("memcpy_async");
  r.prefetch = [d](void* p, std::size_t len, bool to_device) {
    const auto loc = to_device ? detail::location::device(dev) : detail::location::host();
    detail::check(d->mem_prefetch_async(p, len, loc, dev, nullptr), "bench managed: raw prefetch");
    detail::check(d->stream_synchronize(dev, nullptr), "bench managed: raw sync");
  };
  r.copy = [d](void* dst, const void* src, std::size_t len) {
    detail::check(d->memcpy_async(dst, src, len, dev, nullptr), "bench managed: raw copy");
    detail::check(d->stream_synchronize(dev, nullptr), "bench managed: raw sync");
  };
  r.release = [d, r] {
    (void)d->free_managed(r.managed);
    (void)d->free_host(r.pinned);
    (void)d->free_device(r.device);
  };
  return r;
}

void managed_prefetch(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench managed: no devices, no rows\n";
    return;
  }
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
  // Never more than an eighth of what is free for both sides' managed memory (managed
  // overcommit can hang a GPU).
  const std::size_t cap = std::min(props.free_memory / 16, std::size_t{1} << 30);
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
  buffer pinned = area(dev, area_flags::host).allocate(biggest);
  buffer device_mem = area(dev).allocate(biggest);
  raw_side raw = make_raw(biggest, s);
  struct release_raw {
    raw_side& r;
    ~release_raw() {
      if (r.release) r.release();
    }
  } release{raw};

  const bool noop = !props.concurrent_managed_access;
  const int reps = std::max(3, std::min(ctx.repetitions, ctx.quick ? 20 : 7));
  auto mem_to = [&](std::size_t n, bool to_device) {
    mm::prefetch(m.data(), n, to_device ? mm::location::device(dev) : mm::location::host(), s);
    s.synchronize();
  };
  std::uint64_t seed = 0x3A3A;
  for (std::size_t n : sizes) {
    // Random bytes in both sides' managed memory, written by the host (managed memory is).
    const std::uint64_t s_mem = ++seed, s_raw = ++seed;
    fill_random(m.data(), n, s_mem, host_memcpy());
    if (raw.available()) fill_random(raw.managed, n, s_raw, host_memcpy());
    for (bool to_device : {true, false}) {
      // Alternate memarea and raw one repetition at a time, so drift in the driver's state
      // (device->host prefetch can vary by a tenth from block to block) hits both alike;
      // the untimed set-up puts every page on the other side first.
      std::vector<double> mems, raws;
      for (int i = 0; i < 3 * reps; ++i) {
        mem_to(n, !to_device);
        mems.push_back(us_of([&] { mem_to(n, to_device); }));
        if (!raw.available()) continue;
        raw.prefetch(raw.managed, n, !to_device);
        raws.push_back(us_of([&] { raw.prefetch(raw.managed, n, to_device); }));
      }
      // The pages moved, and moved back: the bytes must be the ones written.
      const std::string what = fmt::format("bench managed: prefetch {} {}",
                                           to_device ? "host->device" : "device->host",
                                           size_name(n));
      expect_random(m.data(), n, s_mem, host_memcpy(), what + ", memarea");
      if (raw.available()) expect_random(raw.managed, n, s_raw, host_memcpy(), what + ", raw");
      row r = measured_row("managed prefetch",
                           fmt::format("{} {}", to_device ? "host->device" : "device->host",
                                       size_name(n)),
                           "GB/s", gbps_of(n, mems), gbps_of(n, raws), raw.prefetch_name);
      if (raw.available()) {
        r.target = ">= 0.95x raw";
        r.met = r.memarea >= 0.95 * r.raw;
      }
      if (noop) r.note = "no concurrent managed access: prefetch is a no-op";
      ctx.add(r);
    }
    // Reference: pinned host <-> device copies of the same size.
    for (bool to_device : {true, false}) {
      void* dst = to_device ? device_mem.data() : pinned.data();
      void* src = to_device ? pinned.data() : device_mem.data();
      void* raw_dst = to_device ? raw.device : raw.pinned;
      void* raw_src = to_device ? raw.pinned : raw.device;
      const std::uint64_t s_mem_c = ++seed, s_raw_c = ++seed;
      fill_random(src, n, s_mem_c, memarea_host_copy());
      fill_random(dst, n, ~s_mem_c, memarea_host_copy());
      if (raw.available()) {
        fill_random(raw_src, n, s_raw_c, raw.copy);
        fill_random(raw_dst, n, ~s_raw_c, raw.copy);
      }
      const paired_times t = paired_times_us(
          reps,
          [&] {
            copy_async(dst, src, n, s);
            s.synchronize();
          },
          [&] {
            if (raw.available()) raw.copy(raw_dst, raw_src, n);
          });
      const std::string what =
          fmt::format("bench managed: pinned copy {} {}",
                      to_device ? "host->device" : "device->host", size_name(n));
      expect_random(dst, n, s_mem_c, memarea_host_copy(), what + ", memarea");
      if (raw.available()) expect_random(raw_dst, n, s_raw_c, raw.copy, what + ", raw");
      row r = measured_row("pinned copy (reference)",
                           fmt::format("{} {}", to_device ? "host->device" : "device->host",
                                       size_name(n)),
                           "GB/s", gbps_of(n, t.a),
                           raw.available() ? gbps_of(n, t.b) : std::vector<double>{},
                           raw.copy_name);
      r.target = "reference";
      ctx.add(r);
    }
  }
}

const registrar reg("managed", managed_prefetch, {
    "managed prefetch: host->device, device->host; 256 MiB, 1 GiB (--quick: 16 MiB)",
    "pinned copy (reference): the same directions and sizes"});

}  // namespace
}  // namespace memarea::cli::bench
