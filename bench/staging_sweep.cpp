// memarea-dev-staging-sweep: a developer's tool, not a user-facing bench. It tunes the staged
// peer copy (access off, one direction): memarea's defaults and fixed chunk sizes with 4 and 8
// slots, against the driver's own staged copy (memarea's driver layer, memcpy_peer_async: on
// CUDA cuMemcpyPeerAsync) in the same run, and prints the path each setting took. It reaches
// into core (detail::set_staging, detail::last_copy_path) on purpose, which is why it lives
// here and not in memarea-bench, whose rows use the public API only (docs/bench.md). It
// shows why the defaults are what they are (docs/peer.md, docs/gpu-results.md).
//   memarea-dev-staging-sweep [--reps N]      (needs 2 devices with peer access off)
#include "core/copy/copy_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace memarea;

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 30)) return fmt::format("{} GiB", n >> 30);
  return fmt::format("{} MiB", n >> 20);
}

/// Each time of `reps` calls of fn (microseconds), after one untimed call.
std::vector<double> times_us(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else {
      fmt::print(stderr, "usage: memarea-dev-staging-sweep [--reps N]\n");
      return 2;
    }
  }
  try {
    if (device_count() < 2) {
      fmt::print(stderr, "staging sweep: needs 2 devices; the {} backend has {}\n",
                 backend_name(), device_count());
      return 1;
    }
    const int a = 0, b = 1;
    if (peer::is_enabled(a, b) || peer::is_enabled(b, a)) {
      fmt::print(stderr, "staging sweep: peer access is on between 0 and 1\n");
      return 1;
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
    auto& gpu = detail::system::get().gpu();
    const std::size_t fits =
        std::min(get_device_properties(a).free_memory, get_device_properties(b).free_memory) / 3;
    fmt::print("{:<30} {:>12} {:>12} {:>8}  {}\n", "0->1, setting", "memarea GB/s", "driver GB/s",
               "ratio", "path, chunk");
    for (std::size_t n : {4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB}) {
      if (n > fits) continue;
      buffer x = area(a).allocate(n), y = area(b).allocate(n);
      const int r = n >= 256 * MiB ? std::max(3, reps / 4) : reps;
      const auto raw = times_us(r, [&] {
        detail::check(gpu.memcpy_peer_async(y.data(), b, x.data(), a, n, a, sa.native_handle()),
                      "driver peer copy");
        sa.synchronize();
      });
      const double raw_gbps = static_cast<double>(n) / raw[raw.size() / 2] / 1e3;
      for (const auto& st : settings) {
        detail::set_staging(st.s);
        const auto mem = times_us(r, [&] {
          copy_peer_async(y.data(), b, x.data(), a, n, sa);
          sa.synchronize();
        });
        const double gbps = static_cast<double>(n) / mem[mem.size() / 2] / 1e3;
        fmt::print("{:<30} {:>12.3f} {:>12.3f} {:>8.3f}  {}, chunk {}\n",
                   fmt::format("{}, {}", size_name(n), st.name), gbps, raw_gbps, gbps / raw_gbps,
                   detail::to_string(detail::last_copy_path()), size_name(st.s.chunk_for(n)));
      }
    }
    detail::set_staging(defaults);
  } catch (const std::exception& e) {
    fmt::print(stderr, "staging sweep: {}\n", e.what());
    return 1;
  }
  return 0;
}
