// The NUMA system calls of AML's linux area (linux_area.cpp) on any mapped range: setting a
// range's memory policy (aml_area_linux_mbind, and mmaps with options, which are the caller's
// own mappings), reading it back (aml_area_linux_check_binding), the nodes the process may use
// and whether a range is mapped. Where memarea's public API offers the same, the area uses it:
// memory memarea places (memarea::host::allocate_placed), whether NUMA is available
// (memarea::host::numa_available). The rest repeats rules of memarea's own host layer (a
// placement's checks, MPOL_PREFERRED_MANY with its fallback, errno's meaning) because the
// public API places only memarea's own memory and has no call for a policy over any mapped
// range, the policy at an address, or the process's allowed nodes; and AML's calls report the
// kernel's refusal through errno, which only the caller of mbind(2) sees. Over libnuma, which
// AML programs link anyway.
#pragma once

#include <memarea/error.hpp>
#include <memarea/host.hpp>

#include <cstddef>
#include <vector>

namespace memarea::aml::numa {

using memarea::host::placement;
using memarea::host::policy;

/// A set of NUMA nodes in the kernel's layout (placement::nodes): node n is bit n % B of word
/// n / B, B the bits of an unsigned long. Words past the last may be absent.
using node_mask = std::vector<unsigned long>;
/// Whether node n is in mask.
bool mask_has(const node_mask& mask, int node) noexcept;
/// Adds node n (>= 0) to mask, growing it as needed.
void mask_add(node_mask& mask, int node);
/// Whether a and b hold the same nodes (trailing zero words do not count).
bool mask_equal(const node_mask& a, const node_mask& b) noexcept;
/// The number of nodes in mask.
std::size_t mask_count(const node_mask& mask) noexcept;

/// The outcome of a call: code, and the kernel's errno where the kernel refused (0 when the
/// call refused before any system call, or succeeded).
struct status {
  errc code = errc::success;
  int native = 0;
  bool ok() const noexcept { return code == errc::success; }
};

/// The host's page size.
std::size_t page_size() noexcept;
/// Whether every page of [ptr, ptr+size) (rounded out to pages) is mapped (mincore(2), which
/// has no side effects); false for size 0 or a range past the end of the address space.
bool range_mapped(const void* ptr, std::size_t size) noexcept;
/// Sets the policy of [ptr, ptr+size), rounded out to pages, to `where`, as memarea places its
/// own host memory: where is checked first (invalid_value for an unknown policy or an empty
/// set, invalid_device for a node that does not exist), the range must be entirely mapped
/// (invalid_value, native ENOMEM), preferred over several nodes is MPOL_PREFERRED_MANY where
/// the kernel has it. move: pages placed elsewhere move too (MPOL_MF_MOVE). Without NUMA
/// support it only checks.
status set_policy(const void* ptr, std::size_t size, const placement& where, bool move);
/// The kernel's policy at addr (get_mempolicy, MPOL_F_ADDR): *mode the MPOL_* value without its
/// mode flags, *nodes its set. not_supported without NUMA support; invalid_value when addr is
/// not mapped.
status policy_at(const void* addr, int* mode, node_mask* nodes);
/// The nodes this process may allocate memory on (its cpuset's mems_allowed); node 0 alone
/// without NUMA support.
status allowed_nodes(node_mask* nodes);

}  // namespace memarea::aml::numa
