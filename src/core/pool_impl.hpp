// Internals of pools (src/core/pool.cpp) that the rest of core asks about.
#pragma once

#include "core/registry.hpp"

#include <cstddef>
#include <optional>
#include <utility>

namespace memarea::detail {

/// lookup() of p inside pool block r (origin::pool): the live allocation that holds p, as
/// (base, size); nullopt when p lies in free memory of the block or the pool is gone.
std::optional<std::pair<void*, std::size_t>> pool_sub_allocation(const record& r, const void* p);

}  // namespace memarea::detail
