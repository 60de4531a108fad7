// Issue 3's benchmark: area mmap+munmap of device memory vs the raw driver allocation.
#include "core/system.hpp"
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"

#include <memarea/area.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace memarea::cli::bench {
namespace {

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  if (n >= 1024) return fmt::format("{} KiB", n >> 10);
  return fmt::format("{} B", n);
}

void area_mmap_munmap(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench area: no devices, no rows\n";
    return;
  }
  const area a(0);
  std::vector<std::size_t> sizes{256, std::size_t{1} << 20, std::size_t{64} << 20};
  for (std::size_t size : sizes) {
    // Alternate the two in rounds so drift in the driver's state hits both alike.
    double mem = 0, raw = 0;
    std::string raw_name;
    std::vector<double> mems, raws;
    for (int round = 0; round < 5; ++round) {
      mems.push_back(median_us(ctx.repetitions, [&] { a.munmap(a.mmap(size), size); }));
#ifdef MEMAREA_HAVE_CUDA
      if (auto* cu = raw_cuda()) {
        raw_name = "cuMemAlloc+cuMemFree";
        raw_cuda_use_device(*cu, 0);
        raws.push_back(median_us(ctx.repetitions, [&] {
          CUdeviceptr p;
          if (cu->MemAlloc(&p, size) != CUDA_SUCCESS) throw error(errc::out_of_memory, "raw");
          cu->MemFree(p);
        }));
        continue;
      }
#endif
      raw_name = "driver layer malloc_device+free_device";
      auto& gpu = detail::system::get().gpu();
      raws.push_back(median_us(ctx.repetitions, [&] {
        void* p = nullptr;
        detail::check(gpu.malloc_device(0, size, &p), "raw malloc");
        detail::check(gpu.free_device(p), "raw free");
      }));
    }
    std::sort(mems.begin(), mems.end());
    std::sort(raws.begin(), raws.end());
    mem = mems[mems.size() / 2];
    raw = raws[raws.size() / 2];
    const double allowed = std::max(raw * 0.05, 0.2);
    row r;
    r.group = "area mmap+munmap";
    r.variant = "device " + size_name(size);
    r.unit = "us";
    r.memarea = mem;
    r.raw = raw;
    r.raw_name = raw_name;
    r.target = "<= raw + max(5%, 0.2us)";
    r.met = mem <= raw + allowed;
    ctx.add(r);
  }
}

const registrar reg("area", area_mmap_munmap);

}  // namespace
}  // namespace memarea::cli::bench
