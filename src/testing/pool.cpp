// The testing interface's hook of pools (memarea_testing.hpp); pool_state_of is pool.cpp's.
#include "testing/memarea_testing.hpp"

#include "core/pool/pool_state.hpp"

#include <mutex>

namespace memarea::detail::testing {

void set_pool_tag_limit(memarea_pool_t h, std::size_t limit) {
  pool_state& st = pool_state_of(h);
  std::lock_guard lock(st.m);
  st.tag_limit = limit;
}

}  // namespace memarea::detail::testing
