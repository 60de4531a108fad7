// Host memory: pageable, NUMA-aware (libnuma). Always present, whatever the GPU backend.
#pragma once

#include "driver/driver.hpp"

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; C libraries before glibc 2.35 lack the name
#endif

namespace memarea::detail::host {

/// One NUMA node of the host.
struct numa_node {
  int id = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  std::vector<int> cpus;  ///< CPUs of the node
};

/// True when the kernel has NUMA support (libnuma's numa_available() >= 0).
bool numa_available() noexcept;
/// The host's NUMA nodes (one node 0 with all memory when NUMA is unavailable).
std::vector<numa_node> numa_nodes();
/// Whether `node` is a NUMA node of this host (without NUMA support: node 0 only).
bool node_exists(int node) noexcept;
/// Page size of the host.
size_t page_size() noexcept;

/// Pageable memory, page-aligned; node < 0: the default policy, else bound to that node.
dstatus allocate(size_t size, int node, void** ptr);
/// Frees what allocate() returned (size as allocated).
dstatus deallocate(void* ptr, size_t size);
/// Moves the pages of [ptr, ptr+size) (rounded out to pages) to `node` with move_pages, leaving
/// the range's memory policy alone. Pages never written are first faulted in
/// (MADV_POPULATE_WRITE, Linux 5.14+; before that they stay where first touch puts them), so that
/// the whole range ends up on `node`, as a prefetch promises.
dstatus migrate(const void* ptr, size_t size, int node);
/// The node each page of [ptr, ptr+size) is on; -1 where the page is not yet touched. When all
/// pages agree *node is that node, else -2 (MEMAREA_INVALID_DEVICE_ID).
dstatus query_node(const void* ptr, size_t size, int* node);
/// madvise the range (MADV_* value) after rounding it to pages.
dstatus advise(const void* ptr, size_t size, int madvice);

/// A memory policy for a range (mbind), deciding where pages are placed when first faulted.
enum class policy {
  default_policy,  ///< MPOL_DEFAULT: the process's policy (first touch unless numactl said else)
  preferred,       ///< MPOL_PREFERRED: `node` first, other nodes when it is full
  bind,            ///< MPOL_BIND: `node` only
  interleave,      ///< MPOL_INTERLEAVE: page by page, round robin over the nodes
};
/// Sets the policy of [ptr, ptr+size), rounded out to pages; pages already placed stay where
/// they are (no MPOL_MF_MOVE: advice, not migration). node is ignored for default_policy and
/// must exist otherwise (invalid_device). Without NUMA support it only validates.
dstatus set_policy(const void* ptr, size_t size, policy p, int node);

/// A set of NUMA nodes in the kernel's nodemask layout: node n is bit n % B of word n / B, B
/// the bits of an unsigned long. Words past the last may be absent (their nodes are not set).
using node_mask = std::vector<unsigned long>;
/// Whether node n is in mask.
bool mask_has(const node_mask& mask, int node) noexcept;
/// Adds node n (>= 0) to mask, growing it as needed.
void mask_add(node_mask& mask, int node);
/// Whether a and b hold the same nodes (trailing zero words do not count).
bool mask_equal(const node_mask& a, const node_mask& b) noexcept;

/// A policy over a set of nodes: where the pages of a range go.
struct placement {
  policy mode = policy::default_policy;
  node_mask nodes;  ///< ignored for default_policy; otherwise one node at least, all existing
};
/// The placement of allocate(size, node): bound to node, or the default policy for node < 0.
placement placement_on(int node);
/// Checks a placement before anything uses it: invalid_value for an unknown policy or an empty
/// set (other than for default_policy), invalid_device for a node that does not exist.
dstatus validate(const placement& where, const char* what);

/// Pageable memory, page-aligned, whose policy is `where` before any page is touched (preferred
/// over several nodes is MPOL_PREFERRED_MANY where the kernel has it, Linux 5.15+, else
/// MPOL_PREFERRED on the lowest node). hint is mmap's address hint (never MAP_FIXED: the kernel
/// may place the memory elsewhere). Without NUMA support the placement is only validated.
dstatus allocate(size_t size, const placement& where, void* hint, void** ptr);
/// Sets the policy of [ptr, ptr+size), rounded out to pages, to `where` (validated first; the
/// range must be mapped). move: pages already placed elsewhere move too (MPOL_MF_MOVE, the
/// pages only this process maps), else they stay. Without NUMA support it only validates.
dstatus set_policy(const void* ptr, size_t size, const placement& where, bool move);
/// The kernel's policy at addr (get_mempolicy, MPOL_F_ADDR): *mode is the MPOL_* value without
/// its mode flags, *nodes its node set. not_supported without NUMA support; invalid_value when
/// addr is not mapped.
dstatus policy_at(const void* addr, int* mode, node_mask* nodes);
/// The nodes this process may allocate memory on (its cpuset's mems_allowed); node 0 alone
/// without NUMA support.
dstatus allowed_nodes(node_mask* nodes);

/// Sets `count` elements of `width` bytes (1, 2 or 4) from dst, each to the low `width` bytes of
/// value, on the calling thread; dst is aligned to `width`. For memory no GPU driver knows.
void fill(void* dst, std::uint32_t value, size_t count, unsigned width) noexcept;
/// Copies c's rows on the calling thread, each as memmove (rows that overlap each other in a
/// way that reordering would matter are the caller's to avoid, as for the drivers' 2D copies).
void copy_2d(const copy_2d_params& c) noexcept;

}  // namespace memarea::detail::host
