// Helpers of the add-on API's and host memory's tests (api/ and whitebox/ addon_test.cpp,
// host_memory_test.cpp): tags, the host's page size and nodes, and the kernel's memory policy
// of a page.
#pragma once

#include <memarea/error.hpp>
#include <memarea/host.hpp>

#include <gtest/gtest.h>

#include <numaif.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <vector>

namespace memarea::test {

// Two tags: the addresses of two objects, as a library makes its own.
inline char g_mine = 0;  // writable: no toolchain merges two of them into one address
inline char g_theirs = 0;
inline const void* const kMine = &g_mine;
inline const void* const kTheirs = &g_theirs;

/// The host's page size.
inline std::size_t host_page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

/// Expects f to throw memarea::error with status e.
template <class F>
void expect_errc(errc e, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected " << to_string(e);
  } catch (const error& x) {
    EXPECT_EQ(x.status(), e) << x.what();
  }
}

/// The kernel's policy (MPOL_*) of the page at p, and its nodes' first word.
inline int kernel_policy(const void* p, unsigned long* first_word = nullptr) {
  int mode = -1;
  unsigned long mask[16] = {};
  EXPECT_EQ(::get_mempolicy(&mode, mask, sizeof mask * CHAR_BIT, const_cast<void*>(p),
                            MPOL_F_ADDR),
            0);
  if (first_word) *first_word = mask[0];
  return mode;
}

/// Every node of the host, as a node mask.
inline std::vector<unsigned long> all_nodes() {
  std::vector<unsigned long> mask;
  for (const auto& n : host::numa_nodes()) {
    const auto bits = sizeof(unsigned long) * CHAR_BIT;
    const auto i = static_cast<std::size_t>(n.id);
    if (mask.size() <= i / bits) mask.resize(i / bits + 1, 0UL);
    mask[i / bits] |= 1UL << (i % bits);
  }
  return mask;
}

/// The ids of the host's NUMA nodes.
inline std::vector<int> node_ids() {
  std::vector<int> ids;
  for (const auto& n : host::numa_nodes()) ids.push_back(n.id);
  return ids;
}

/// A node id that does not exist on this host.
inline int missing_node() {
  int max = 0;
  for (const auto& n : host::numa_nodes()) max = std::max(max, n.id);
  return max + 1;
}

}  // namespace memarea::test
