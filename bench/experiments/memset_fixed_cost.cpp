// Experiment (not part of the library; issue 43): where memarea::memset_async's fixed cost over
// the driver's call goes, for a 4 KiB memset on a named stream. Up to four sides, each a call
// timed on its own to its return (steady_clock), alternating call by call in an order that
// rotates turn by turn, 16 calls a side in a turn, the stream drained between turns (untimed):
//   raw         the driver's entry point (cuMemsetD8Async / D32, as memarea's loader finds it)
//   memarea     memarea::memset_async (the public call)
//   front       the driver layer's memset_elements_async_checked (what memset_async ends in: the
//               backend's virtual call, its ready and entry-point checks, the vendor's call)
//   locate+raw  memarea's locate() of the destination, then the raw call (locate's share)
// Sides that look up their buffers share the thread's cache of lookups and its hints: run them
// one per process (argument 3) to compare them. Run together, each finds its buffer where the
// previous one left the hint, a few entries further than a loop of one would.
// Prints the median of each side and its difference from raw's, per turn too (min/median/max of
// the per-turn median differences). Sides write buffers of their own; afterwards each buffer's
// 4 KiB is read back and checked against the last value written, the bytes after it untouched.
// scripts/gpu-build.sh builds it into out/gpu-bin; by hand (from the repository root, after
// that script, whose build/gpu holds the Release static library; the CUDA headers only):
//   g++ -std=c++20 -O2 -DFMT_HEADER_ONLY=1 -DMEMAREA_HAVE_CUDA -Iinclude -Isrc
//       -isystem /usr/local/cuda/include bench/experiments/memset_fixed_cost.cpp
//       build/gpu/src/libmemarea.a -lnuma -ldl -lpthread -lrt -o out/gpu-bin/memset_fixed_cost
//   MEMAREA_BACKEND=cuda out/gpu-bin/memset_fixed_cost [turns=750] [width=1] [sides, e.g. memarea]
#include <memarea/c_interop.hpp>
#include <memarea/memarea.hpp>

#include "core/copy/locate.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "driver/cuda/cuda_api.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using clk = std::chrono::steady_clock;

namespace {

constexpr std::size_t kBytes = 4096, kGuard = 256;
constexpr int kCallsPerSide = 16, kSides = 4;
const char* const kNames[kSides] = {"raw", "memarea", "front", "locate+raw"};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int turns = argc > 1 ? std::atoi(argv[1]) : 750;
  const unsigned width = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1;
  // The sides in this process: raw and those named in argv[3] (all by default; see above).
  std::vector<int> on = {0};
  for (int k = 1; k < kSides; ++k)
    if (argc <= 3 || std::strstr(argv[3], kNames[k])) on.push_back(k);
  if (width != 1 && width != 4) {
    std::fprintf(stderr, "width must be 1 or 4\n");
    return 2;
  }
  const std::size_t count = kBytes / width;
  // The driver's entry points as memarea's loader finds them (cuGetProcAddress), so that both
  // sides call the same versions.
  static memarea::detail::cuda::api cu;
  if (!memarea::detail::cuda::load(&cu).ok) {
    std::fprintf(stderr, "cannot load libcuda's entry points\n");
    return 2;
  }
  memarea::set_device(0);
  memarea::stream s(0);
  memarea_stream* sh = memarea::to_c(memarea::stream_view(s));
  const auto cs = static_cast<CUstream>(s.native_handle());
  auto& gpu = memarea::detail::system::get().gpu();
  std::vector<memarea::buffer> bufs;
  for (int i = 0; i < kSides; ++i) bufs.push_back(memarea::area(0).allocate(kBytes + kGuard));
  // The guard bytes after each side's 4 KiB: random, left alone by every memset.
  std::vector<unsigned char> guard(kGuard);
  std::srand(43);
  for (auto& g : guard) g = static_cast<unsigned char>(std::rand());
  for (auto& b : bufs) memarea::copy(static_cast<char*>(b.data()) + kBytes, guard.data(), kGuard);

  auto raw = [&](void* p, std::uint32_t v) {
    const auto d = reinterpret_cast<CUdeviceptr>(p);
    const CUresult r = width == 4 ? cu.MemsetD32Async(d, v, count, cs)
                                  : cu.MemsetD8Async(d, static_cast<unsigned char>(v), count, cs);
    if (r != CUDA_SUCCESS) std::exit(3);
  };
  auto side = [&](int k, std::uint32_t v) {
    void* p = bufs[k].data();
    switch (k) {
      case 0: raw(p, v); break;
      case 1: memarea::memset_async(p, v, count, width, s); break;
      case 2: {
        const auto st = gpu.memset_elements_async_checked(p, v, count, width, sh->device,
                                                          sh->native);
        if (!st.ok()) std::exit(4);
        break;
      }
      case 3: {
        const auto e = memarea::detail::locate(p, kBytes, memarea::detail::copy_end::destination,
                                               "experiment");
        asm volatile("" : : "r"(e.device) : "memory");
        raw(p, v);
        break;
      }
    }
  };

  std::array<std::vector<double>, kSides> all;
  std::array<std::vector<double>, kSides> per_turn;
  std::array<std::uint32_t, kSides> last{};
  std::vector<double> t(kCallsPerSide);
  std::array<std::vector<double>, kSides> turn_times;
  for (int turn = -20; turn < turns; ++turn) {  // 20 warm-up turns, not kept
    for (auto& v : turn_times) v.clear();
    for (int c = 0; c < kCallsPerSide; ++c) {
      for (std::size_t j = 0; j < on.size(); ++j) {
        const int k = on[(j + static_cast<std::size_t>(turn + 20)) % on.size()];
        const std::uint32_t v =
            width == 4 ? 0x9e3779b9u * static_cast<std::uint32_t>(turn * 64 + c * 4 + k + 1000)
                       : static_cast<std::uint32_t>((turn * 7 + c * 3 + k) & 0xff);
        const auto a = clk::now();
        side(k, v);
        const auto b = clk::now();
        turn_times[k].push_back(std::chrono::duration<double, std::nano>(b - a).count());
        last[k] = v;
      }
    }
    if (cu.StreamSynchronize(cs) != CUDA_SUCCESS) std::exit(3);
    if (turn < 0) continue;
    for (int k : on) {
      all[k].insert(all[k].end(), turn_times[k].begin(), turn_times[k].end());
      per_turn[k].push_back(median(turn_times[k]));
    }
  }
  // Every side's bytes: its last value over its 4 KiB, the guard after it untouched.
  std::vector<unsigned char> back(kBytes + kGuard);
  for (int k : on) {
    memarea::copy(back.data(), bufs[k].data(), back.size());
    for (std::size_t i = 0; i < kBytes; i += width) {
      std::uint32_t got = 0;
      std::memcpy(&got, back.data() + i, width);
      if (got != (width == 4 ? last[k] : (last[k] & 0xff))) {
        std::fprintf(stderr, "%s: byte %zu holds %#x, not %#x\n", kNames[k], i, got, last[k]);
        return 5;
      }
    }
    if (std::memcmp(back.data() + kBytes, guard.data(), kGuard) != 0) {
      std::fprintf(stderr, "%s: the guard after the memset changed\n", kNames[k]);
      return 5;
    }
  }
  const double raw_med = median(all[0]);
  std::printf("memset %u-bit 4 KiB enqueue, %d turns x %d calls a side; bytes checked\n",
              8 * width, turns, kCallsPerSide);
  for (int k : on) {
    std::vector<double> d(per_turn[k].size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = per_turn[k][i] - per_turn[0][i];
    std::sort(d.begin(), d.end());
    std::printf("  %-11s median %7.1f ns  (%+6.1f ns over raw; per turn %+.0f/%+.0f/%+.0f "
                "min/median/max)\n",
                kNames[k], median(all[k]), median(all[k]) - raw_med, d.front(), d[d.size() / 2],
                d.back());
  }
  return 0;
}
