// memarea — the host: NUMA nodes, and pageable host memory placed on them. Works with every
// backend, none included. docs/managed.md says what prefetch and advice do on this memory.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/pointer.hpp>

#include <cstddef>
#include <vector>

namespace memarea::host {

/// One NUMA node of the host.
struct numa_node {
  int id = 0;
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;
  std::vector<int> cpus;
};

/// True when the kernel supports NUMA placement.
bool numa_available() noexcept;
/// The host's NUMA nodes (one node 0 when NUMA is unavailable).
std::vector<numa_node> numa_nodes();

/// allocate()'s node for "no node": pages go where the process's policy puts them (first touch).
inline constexpr int any_node = -1;

/// Allocates size bytes of pageable host memory, page-aligned, and records it in memarea's
/// registry (kind memory_kind::host, device cpu_device_id), so lookup() answers for any
/// interior pointer, copy() takes it as either end, and managed::prefetch / advise / the range
/// queries work on it. `node` is a NUMA node of numa_nodes(), to which the pages are bound
/// (MPOL_BIND, as numa_alloc_onnode), or any_node. The size is rounded up to whole host pages
/// (the tail is the caller's to use); pages are not touched until the caller writes them.
/// Throws invalid_value (size 0), invalid_device (a node that does not exist or has no memory),
/// out_of_memory.
[[nodiscard]] void* allocate(std::size_t size, int node = any_node);
/// A NUMA memory policy: where the pages of a range go when first touched (memarea_host_policy,
/// same values).
enum class policy : int {
  default_policy = 0,  ///< the process's (first touch, or numactl's)
  bind = 1,            ///< the set's nodes only (MPOL_BIND)
  preferred = 2,       ///< the set's nodes first, others once full
  interleave = 3,      ///< page by page, round robin over the set
};

/// A policy over a set of NUMA nodes.
struct placement {
  policy mode = policy::default_policy;
  /// The node set (ignored for default_policy): node n is bit n % B of word n / B, B the bits
  /// of an unsigned long (libnuma's bitmask and mbind(2)'s layout).
  std::vector<unsigned long> nodes;
};

/// allocate() with any placement, mmap's address hint (nullptr: none; never MAP_FIXED, so the
/// memory may land elsewhere) and a tag (tag_of, pointer.hpp). The pages get `where` before
/// any is touched, and it is what advice "unset preferred location" puts back; preferred over
/// several nodes is MPOL_PREFERRED_MANY where the kernel has it (Linux 5.15), else the lowest
/// node of the set. Without NUMA support `where` is only checked. Throws invalid_value (size 0,
/// an unknown policy, an empty set other than for default_policy), invalid_device (a node that
/// does not exist or has no memory), out_of_memory.
[[nodiscard]] void* allocate_placed(std::size_t size, const placement& where,
                                    void* hint = nullptr, const void* tag = nullptr);
/// Frees what allocate() returned by its base pointer (managed::free and memarea_free take it
/// too); invalid_value, freeing nothing, when ptr is not the start of a live memarea allocation.
void free(void* ptr);

/// The NUMA node holding the pages of [ptr, ptr+n) (rounded out to pages; any mapped host
/// memory, not only memarea's): the node when every page is on it, -1 when no page has been
/// written yet, invalid_device_id (-2) when the pages are on several nodes or only some
/// are placed. Throws invalid_value (NULL, n 0, a range that is not entirely mapped).
int node_of(const void* ptr, std::size_t n);

/// An owning, move-only allocation of pageable host memory (owner.hpp: data(), size() as asked
/// for, reset(), try_reset(), release(); released memory is freed with host::free).
class host_buffer : public owned_allocation {
 public:
  /// Empty: holds nothing.
  host_buffer() = default;
  /// allocate(size, node).
  explicit host_buffer(std::size_t size, int node = any_node)
      : owned_allocation(allocate(size, node), size, {}) {}
};

}  // namespace memarea::host

#pragma GCC visibility pop
