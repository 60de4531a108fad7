// The testing interface's probes of the registry (memarea_testing.hpp).
#include "testing/memarea_testing.hpp"

#include "core/ipc/ipc_impl.hpp"
#include "core/memory/registry.hpp"

namespace memarea::detail::testing {

std::size_t live_allocations() {
  return allocations().count_if(
      [](const record& r) { return r.area_device != ipc_internal::kImportedSentinel; });
}

std::size_t live_records() { return allocations().size(); }

bool registered(const void* p) { return allocations().find(p).has_value(); }

}  // namespace memarea::detail::testing
