// The C++ headers spell the C API's constants and structures without memarea.h
// (memarea/c_interop.hpp converts between the two); here the values and fields are checked to
// be the same, so that every conversion stays a cast. errc's values are checked beside the
// status names (src/base/error_category.cpp); the handles' layouts where they are defined
// (src/core/stream_impl.hpp, src/core/pool_impl.hpp).
#include <memarea/c_interop.hpp>
#include <memarea/host.hpp>
#include <memarea/memarea.h>

#include <cstddef>

namespace {

using namespace memarea;

static_assert(area_flags::device_only == MEMAREA_AREA_DEFAULT);
static_assert(area_flags::host == MEMAREA_AREA_HOST);
static_assert(area_flags::unified == MEMAREA_AREA_UNIFIED);
static_assert(area_flags::mapped == MEMAREA_AREA_MAPPED);
static_assert(area_flags::global == MEMAREA_AREA_GLOBAL);
static_assert(static_cast<int>(host::policy::default_policy) == MEMAREA_HOST_POLICY_DEFAULT);
static_assert(static_cast<int>(host::policy::bind) == MEMAREA_HOST_POLICY_BIND);
static_assert(static_cast<int>(host::policy::preferred) == MEMAREA_HOST_POLICY_PREFERRED);
static_assert(static_cast<int>(host::policy::interleave) == MEMAREA_HOST_POLICY_INTERLEAVE);

static_assert(cpu_device_id == MEMAREA_CPU_DEVICE_ID);
static_assert(invalid_device_id == MEMAREA_INVALID_DEVICE_ID);

constexpr bool same(memory_kind k, memarea_memory_kind c) { return static_cast<int>(k) == c; }
static_assert(same(memory_kind::unknown, MEMAREA_MEMORY_UNKNOWN));
static_assert(same(memory_kind::device, MEMAREA_MEMORY_DEVICE));
static_assert(same(memory_kind::host_pinned, MEMAREA_MEMORY_HOST_PINNED));
static_assert(same(memory_kind::managed, MEMAREA_MEMORY_MANAGED));
static_assert(same(memory_kind::mapped, MEMAREA_MEMORY_MAPPED));
static_assert(same(memory_kind::registered, MEMAREA_MEMORY_REGISTERED));
static_assert(same(memory_kind::ipc_imported, MEMAREA_MEMORY_IPC_IMPORTED));
static_assert(same(memory_kind::host, MEMAREA_MEMORY_HOST));

static_assert(managed::attach_flags::global == MEMAREA_MEM_ATTACH_GLOBAL);
static_assert(managed::attach_flags::host == MEMAREA_MEM_ATTACH_HOST);
static_assert(managed::attach_flags::single == MEMAREA_MEM_ATTACH_SINGLE);
constexpr bool same(managed::advice a, memarea_mem_advice c) { return static_cast<int>(a) == c; }
static_assert(same(managed::advice::set_read_mostly, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY));
static_assert(same(managed::advice::unset_read_mostly, MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY));
static_assert(same(managed::advice::set_preferred_location,
                   MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION));
static_assert(same(managed::advice::unset_preferred_location,
                   MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION));
static_assert(same(managed::advice::set_accessed_by, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY));
static_assert(same(managed::advice::unset_accessed_by, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY));
static_assert(same(managed::advice::set_coarse_grain, MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN));
static_assert(same(managed::advice::unset_coarse_grain, MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN));
constexpr bool same(managed::coherency a, memarea_mem_range_coherency_mode c) {
  return static_cast<int>(a) == c;
}
static_assert(same(managed::coherency::fine_grain, MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN));
static_assert(same(managed::coherency::coarse_grain,
                   MEMAREA_MEM_RANGE_COHERENCY_MODE_COARSE_GRAIN));
static_assert(same(managed::coherency::indeterminate,
                   MEMAREA_MEM_RANGE_COHERENCY_MODE_INDETERMINATE));

constexpr bool same(peer::attribute_kind a, memarea_p2p_attribute c) {
  return static_cast<int>(a) == c;
}
static_assert(same(peer::attribute_kind::performance_rank, MEMAREA_P2P_ATTR_PERFORMANCE_RANK));
static_assert(same(peer::attribute_kind::access_supported, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED));
static_assert(same(peer::attribute_kind::native_atomic_supported,
                   MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED));
static_assert(same(peer::attribute_kind::array_access_supported,
                   MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED));

static_assert(ipc::lazy_enable_peer_access == MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS);
static_assert(sizeof(ipc::handle{}.bytes) == sizeof(memarea_ipc_handle_t{}.bytes));

// pool_stats: the same fields in the same order (to_c and from_c copy them by name).
#define MEMAREA_SAME_FIELD(f)                                                   \
  static_assert(offsetof(pool_stats, f) == offsetof(memarea_pool_stats, f) && \
                sizeof(pool_stats::f) == sizeof(memarea_pool_stats::f))
MEMAREA_SAME_FIELD(bytes_reserved);
MEMAREA_SAME_FIELD(bytes_in_use);
MEMAREA_SAME_FIELD(peak_bytes_reserved);
MEMAREA_SAME_FIELD(peak_bytes_in_use);
MEMAREA_SAME_FIELD(driver_allocations);
MEMAREA_SAME_FIELD(largest_free_block);
MEMAREA_SAME_FIELD(live_allocations);
#undef MEMAREA_SAME_FIELD
static_assert(sizeof(pool_stats) == sizeof(memarea_pool_stats));

// pool_options: its fields are memarea_pool_options's first five.
static_assert(pool_options{}.release_threshold == static_cast<std::size_t>(-1));

}  // namespace
