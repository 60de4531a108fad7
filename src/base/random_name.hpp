// Unpredictable parts of shared-memory names: another user who can list /dev/shm must not be
// able to guess the next name and create it first (which would make our creation fail, or,
// without O_EXCL, hand us their object).
#pragma once

#include <sys/random.h>

#include <chrono>
#include <cstdint>

namespace memarea::detail {

/// 64 random bits from the kernel (getrandom); never 0. Falls back to the clock mixed with the
/// address of a local only if the kernel has no entropy source at all (getrandom fails).
inline std::uint64_t random_u64() noexcept {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    v = static_cast<std::uint64_t>(t) * 0x9e3779b97f4a7c15ull ^
        reinterpret_cast<std::uintptr_t>(&v);
  }
  return v ? v : 1;
}

}  // namespace memarea::detail
