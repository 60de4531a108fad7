// Internals of pools (src/core/pool.cpp) that the rest of core asks about.
#pragma once

#include "core/registry.hpp"
#include "driver/driver.hpp"

#include <cstddef>
#include <optional>
#include <utility>

namespace memarea::detail {

/// lookup() of p inside pool block r (origin::pool): the live allocation that holds p, as
/// (base, size); nullopt when p lies in free memory of the block or the pool is gone.
std::optional<std::pair<void*, std::size_t>> pool_sub_allocation(const record& r, const void* p);

/// Before stream s of device is destroyed: every pool that saw s waits for it once, makes what
/// was freed on it free for every stream, and forgets s (a new stream may get its handle).
void pool_retire_stream(int device, native_stream s);

}  // namespace memarea::detail
