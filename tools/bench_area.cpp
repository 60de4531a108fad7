// Issue 3's benchmark: area mmap+munmap of device memory vs the raw driver allocation.
#include "core/system.hpp"
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"

#include <memarea/area.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
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
  std::string raw_name = "driver layer malloc_device+free_device";
#ifdef MEMAREA_HAVE_CUDA
  auto* cu = raw_cuda();
  if (cu) {
    raw_name = "cuMemAlloc+cuMemFree";
    // Device 0's primary context, current for the whole case (set once: the call retains it).
    // memarea's area(0) works in that context too, so neither side pays a context switch here.
    if (!raw_cuda_use_device(*cu, 0))
      throw error(errc::unknown, "bench area: cannot make device 0's primary context current");
  }
#endif
  auto& gpu = detail::system::get().gpu();
  std::vector<std::size_t> sizes{256, std::size_t{1} << 20, std::size_t{64} << 20};
  for (std::size_t size : sizes) {
    std::function<void()> raw_op = [&gpu, size] {
      void* p = nullptr;
      detail::check(gpu.malloc_device(0, size, &p), "raw malloc");
      detail::check(gpu.free_device(p), "raw free");
    };
#ifdef MEMAREA_HAVE_CUDA
    if (cu)
      raw_op = [cu, size] {
        CUdeviceptr p;
        if (cu->MemAlloc(&p, size) != CUDA_SUCCESS)
          throw error(errc::out_of_memory, "bench area: raw cuMemAlloc failed");
        cu->MemFree(p);
      };
#endif
    // One memarea and one raw allocation in turns: the driver's speed drifts within a run.
    const paired_times t = paired_median_us(
        5 * ctx.repetitions, [&] { a.munmap(a.mmap(size), size); }, raw_op);
    row r;
    r.group = "area mmap+munmap";
    r.variant = "device " + size_name(size);
    r.unit = "us";
    r.memarea = t.a;
    r.raw = t.b;
    r.raw_name = raw_name;
    r.target = "<= raw + max(5%, 0.2us)";
    // Judged on the blocks' ratio (see paired_median_us): what memarea adds where both ran alike.
    r.met = (t.block_ratio - 1.0) * t.b <= std::max(t.b * 0.05, 0.2);
    r.note = fmt::format("judged on the median ratio of 10-turn blocks: {:.3f}", t.block_ratio);
    ctx.add(r);
  }
}

const registrar reg("area", area_mmap_munmap);

}  // namespace
}  // namespace memarea::cli::bench
