// REFERENCE.md's mixed trace of pool operations, written once for the pool bench
// (bench/src/bench_pool.cpp) and the replay test (tests/api/pool_replay_test.cpp); the Python
// benches make the same trace and check it against the same checksum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memarea::bench {

/// The checksum of the 100,000 operations (FNV-style over the ops), as REFERENCE.md gives it.
inline constexpr std::uint64_t kMixedTraceChecksum = 0x01ce674ecf3a0693ull;

/// The trace: each op is a size to allocate (256 B to 4 MiB, log-uniform) or -(index + 1),
/// a free of that live entry (the last live entry moves into its slot). It allocates up to
/// 1000 live entries, then allocates or frees at random, never above 1000 live.
inline std::vector<std::int64_t> mixed_trace() {
  std::uint64_t x = 0x5EED2024;
  auto next = [&x] {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<std::int64_t> ops;
  ops.reserve(100000);
  std::size_t live = 0;
  bool reached = false;
  for (int i = 0; i < 100000; ++i) {
    const bool alloc = live == 0 || (live < 1000 && (!reached || (next() >> 63) == 1));
    if (live == 1000) reached = true;
    if (alloc) {
      const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
      const auto size = static_cast<std::int64_t>(256.0 * std::exp2(14.0 * u));
      ops.push_back(std::clamp<std::int64_t>(size, 256, (std::int64_t{4} << 20) - 1));
      ++live;
    } else {
      ops.push_back(-static_cast<std::int64_t>(next() % live) - 1);
      --live;
    }
  }
  return ops;
}

/// The checksum of ops, to compare with kMixedTraceChecksum.
inline std::uint64_t trace_checksum(const std::vector<std::int64_t>& ops) {
  std::uint64_t h = 0;
  for (std::int64_t op : ops) h = (h * 1099511628211ull) ^ static_cast<std::uint64_t>(op);
  return h;
}

}  // namespace memarea::bench
