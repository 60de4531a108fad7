// Memory caps per device and out-of-memory handlers (docs/usage.md, "Limits and out-of-memory
// handlers"). The choke point is area_mmap, through which areas and pools' growth take device
// and managed memory: with no cap set on the device, an allocation costs one relaxed load and a
// branch more; the cold path (a cap set, or the driver out of memory) trims the device's pools,
// retries, runs the handlers and retries once more before it fails.
#pragma once

#include "core/memory/usage_counters.hpp"
#include "driver/driver.hpp"

#include <memarea/limits.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

namespace memarea::detail::limits {

/// Each device's cap in bytes of `reserved` (0: none).
extern std::atomic<std::size_t> g_caps[usage::kDevices];

/// What the pool room (above this one) lends the cold path, set when its first pool is made:
/// every pool of a device gives back its empty blocks; words naming a device's largest users.
struct pool_hooks {
  void (*trim_device)(int device) = nullptr;
  std::string (*largest_users)(int device, std::size_t most) = nullptr;
};
/// Set once (pool room); read by the cold path.
extern std::atomic<const pool_hooks*> g_pool_hooks;

/// Bytes admitted under a cap and not yet in the usage counters (allocations in flight): held
/// by area_mmap until the allocation's record counts them, so that racing allocations cannot
/// pass the cap together. Empty (no cost) when no cap was judged.
struct admission {
  int device = -1;
  std::size_t bytes = 0;
  admission() = default;
  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;
  ~admission();
};

/// The cold path: judges the cap, trims the device's pools, runs the handlers, retries; throws
/// error out_of_memory naming the reason, the bytes and the device's largest users. `first`:
/// the driver's refusal of a first attempt already made, or nullptr.
[[gnu::cold, gnu::noinline]] void allocate_slow(int device, std::size_t bytes, admission& adm,
                                                const std::function<dstatus()>& alloc,
                                                const dstatus* first, const std::string& what);

/// Runs alloc() (which returns the driver's status) for `bytes` of device's memory under its
/// cap and the handlers; throws as check() on any failure. describe() names the operation.
template <class F, class D>
inline void allocate(int device, std::size_t bytes, admission& adm, F&& alloc, D&& describe) {
  if (g_caps[device].load(std::memory_order_relaxed) == 0) [[likely]] {
    const dstatus s = alloc();
    if (s.ok()) [[likely]]
      return;
    if (s.code != errc::out_of_memory) throw_status(s, describe());
    allocate_slow(device, bytes, adm, std::function<dstatus()>(std::ref(alloc)), &s, describe());
    return;
  }
  allocate_slow(device, bytes, adm, std::function<dstatus()>(std::ref(alloc)), nullptr,
                describe());
}

}  // namespace memarea::detail::limits
