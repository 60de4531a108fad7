// The NUMA system calls of AML's linux area (linux_numa.hpp), over libnuma.
#include "linux_numa.hpp"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>

namespace memarea::aml::numa {

namespace {

constexpr std::size_t kWordBits = sizeof(unsigned long) * CHAR_BIT;

/// The optional flags the kernel ORs into a policy's mode (MPOL_F_STATIC_NODES,
/// MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING: <linux/mempolicy.h>, absent from numaif.h).
constexpr int kModeFlags = (1 << 15) | (1 << 14) | (1 << 13);

/// MPOL_PREFERRED_MANY (Linux 5.15), which numaif.h before libnuma 2.0.15 does not name.
constexpr int kPreferredMany = 5;

/// The usual meaning of an errno from the memory system calls.
errc errc_of(int err) noexcept {
  switch (err) {
    case 0: return errc::unknown;  // a failure without errno must never read as success
    case EINVAL:
    case EFAULT:
    case E2BIG: return errc::invalid_value;
    case ENOMEM: return errc::out_of_memory;
    case EPERM:
    case EACCES: return errc::not_permitted;
    case EBUSY:
    case EAGAIN: return errc::busy;
    case ENODEV:
    case ENXIO: return errc::invalid_device;
    case ENOSYS:
    case EOPNOTSUPP: return errc::not_supported;
    default: return errc::unknown;
  }
}

bool node_exists(int node) noexcept {
  if (node < 0) return false;
  if (!memarea::host::numa_available()) return node == 0;
  if (node > ::numa_max_node()) return false;
  if (numa_nodes_ptr != nullptr)
    return ::numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(node)) != 0;
  return ::numa_node_size64(node, nullptr) >= 0;
}

/// Checks a placement before anything uses it.
status validate(const placement& where) {
  switch (where.mode) {
    case policy::default_policy: return {};
    case policy::preferred:
    case policy::bind:
    case policy::interleave: break;
    default: return {errc::invalid_value, 0};
  }
  if (mask_count(where.nodes) == 0) return {errc::invalid_value, 0};
  for (std::size_t w = 0; w < where.nodes.size(); ++w)
    for (std::size_t b = 0; b < kWordBits; ++b) {
      if (!((where.nodes[w] >> b) & 1UL)) continue;
      const std::size_t node = w * kWordBits + b;
      if (node > static_cast<std::size_t>(INT_MAX) || !node_exists(static_cast<int>(node)))
        return {errc::invalid_device, 0};
    }
  return {};
}

/// Refuses a range that is not entirely mapped, before anything acts on it: mincore() has no
/// side effects and fails with ENOMEM exactly when part of the range is unmapped.
status check_mapped(std::uintptr_t begin, std::uintptr_t end) {
  const std::size_t ps = page_size();
  unsigned char vec[256];
  for (std::uintptr_t a = begin; a < end;) {
    const std::size_t pages = std::min<std::size_t>((end - a) / ps, sizeof vec);
    if (::mincore(reinterpret_cast<void*>(a), pages * ps, vec) != 0) {
      const int err = errno;
      return {err == ENOMEM ? errc::invalid_value : errc_of(err), err};
    }
    a += pages * ps;
  }
  return {};
}

/// mbind(mode, flags) over `nodes`, trailing zero words not passed (the kernel refuses a mask
/// longer than its own node count unless the extra bits are 0). The errno, 0 on success.
int mbind_mask(void* begin, std::size_t len, int mode, const node_mask& nodes, unsigned flags) {
  if (mode == MPOL_DEFAULT)
    return ::mbind(begin, len, MPOL_DEFAULT, nullptr, 0, flags) == 0 ? 0 : errno;
  std::size_t words = nodes.size();
  while (words > 0 && nodes[words - 1] == 0) --words;
  // The kernel reads maxnode-1 bits, hence the + 1 (as libnuma itself passes).
  const unsigned long maxnode = words * kWordBits + 1;
  return ::mbind(begin, len, mode, words ? nodes.data() : nullptr, maxnode, flags) == 0 ? 0
                                                                                        : errno;
}

/// Applies `where`: preferred over several nodes tries MPOL_PREFERRED_MANY first and falls back
/// to MPOL_PREFERRED (the lowest node of the set) on a kernel that does not know it (EINVAL).
int apply(void* begin, std::size_t len, const placement& where, unsigned flags) {
  switch (where.mode) {
    case policy::default_policy: return mbind_mask(begin, len, MPOL_DEFAULT, {}, flags);
    case policy::bind: return mbind_mask(begin, len, MPOL_BIND, where.nodes, flags);
    case policy::interleave: return mbind_mask(begin, len, MPOL_INTERLEAVE, where.nodes, flags);
    case policy::preferred:
      if (mask_count(where.nodes) > 1) {
        const int err = mbind_mask(begin, len, kPreferredMany, where.nodes, flags);
        if (err != EINVAL) return err;
      }
      return mbind_mask(begin, len, MPOL_PREFERRED, where.nodes, flags);
  }
  return EINVAL;
}

/// The words a node mask from the kernel needs: one bit per possible node and a word to spare.
std::size_t kernel_mask_words() noexcept {
  const int possible = ::numa_num_possible_nodes();
  const std::size_t bits = possible > 0 ? static_cast<std::size_t>(possible) : kWordBits;
  return (bits + kWordBits - 1) / kWordBits + 1;
}

}  // namespace

bool mask_has(const node_mask& mask, int node) noexcept {
  if (node < 0) return false;
  const auto n = static_cast<std::size_t>(node);
  return n / kWordBits < mask.size() && ((mask[n / kWordBits] >> (n % kWordBits)) & 1UL) != 0;
}

void mask_add(node_mask& mask, int node) {
  const auto n = static_cast<std::size_t>(node);
  if (mask.size() <= n / kWordBits) mask.resize(n / kWordBits + 1, 0UL);
  mask[n / kWordBits] |= 1UL << (n % kWordBits);
}

bool mask_equal(const node_mask& a, const node_mask& b) noexcept {
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    if ((i < a.size() ? a[i] : 0UL) != (i < b.size() ? b[i] : 0UL)) return false;
  return true;
}

std::size_t mask_count(const node_mask& mask) noexcept {
  std::size_t n = 0;
  for (unsigned long w : mask) n += static_cast<std::size_t>(__builtin_popcountl(w));
  return n;
}

std::size_t page_size() noexcept {
  // Cached without a guard: a function-local static's guard could be left pending by fork().
  static constinit std::atomic<std::size_t> cached{0};
  std::size_t ps = cached.load(std::memory_order_relaxed);
  if (ps == 0) {
    const long v = ::sysconf(_SC_PAGESIZE);
    ps = v > 0 ? static_cast<std::size_t>(v) : std::size_t{4096};
    cached.store(ps, std::memory_order_relaxed);
  }
  return ps;
}

bool range_mapped(const void* ptr, std::size_t size) noexcept {
  if (size == 0) return false;
  const std::uintptr_t ps = page_size();
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (size > UINTPTR_MAX - p || p + size > UINTPTR_MAX - (ps - 1)) return false;
  return check_mapped(p & ~(ps - 1), (p + size + ps - 1) & ~(ps - 1)).ok();
}

status set_policy(const void* ptr, std::size_t size, const placement& where, bool move) {
  if (!ptr || size == 0) return {errc::invalid_value, 0};
  const std::uintptr_t ps = page_size();
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (size > UINTPTR_MAX - p || p + size > UINTPTR_MAX - (ps - 1)) return {errc::invalid_value, 0};
  const std::uintptr_t begin = p & ~(ps - 1);
  const std::uintptr_t end = (p + size + ps - 1) & ~(ps - 1);
  if (status s = validate(where); !s.ok()) return s;
  if (status s = check_mapped(begin, end); !s.ok()) return s;
  if (!memarea::host::numa_available()) return {};  // one node: nothing to choose between
  if (const int err = apply(reinterpret_cast<void*>(begin), end - begin, where,
                            move ? MPOL_MF_MOVE : 0U);
      err != 0) {
    // EINVAL for nodes that exist is a node without memory (or outside the cpuset).
    return {err == EINVAL && where.mode != policy::default_policy ? errc::invalid_device
                                                                  : errc_of(err),
            err};
  }
  return {};
}

status policy_at(const void* addr, int* mode, node_mask* nodes) {
  if (!mode || !nodes) return {errc::invalid_value, 0};
  if (!memarea::host::numa_available()) return {errc::not_supported, 0};
  node_mask mask(kernel_mask_words(), 0UL);
  int kernel_mode = 0;
  // The kernel writes maxnode-1 bits rounded up to whole words: one word fewer than the buffer.
  const unsigned long maxnode = (mask.size() - 1) * kWordBits + 1;
  if (::get_mempolicy(&kernel_mode, mask.data(), maxnode, const_cast<void*>(addr),
                      MPOL_F_ADDR) != 0) {
    const int err = errno;
    return {err == EFAULT ? errc::invalid_value : errc_of(err), err};  // EFAULT: not mapped
  }
  *mode = kernel_mode & ~kModeFlags;
  *nodes = std::move(mask);
  return {};
}

status allowed_nodes(node_mask* nodes) {
  if (!nodes) return {errc::invalid_value, 0};
  if (!memarea::host::numa_available()) {
    node_mask only_zero;
    mask_add(only_zero, 0);
    *nodes = std::move(only_zero);
    return {};
  }
  node_mask mask(kernel_mask_words(), 0UL);
  const unsigned long maxnode = (mask.size() - 1) * kWordBits + 1;
  if (::get_mempolicy(nullptr, mask.data(), maxnode, nullptr, MPOL_F_MEMS_ALLOWED) != 0) {
    const int err = errno;
    return {errc_of(err), err};
  }
  *nodes = std::move(mask);
  return {};
}

}  // namespace memarea::aml::numa
