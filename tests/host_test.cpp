// Tests of the host (NUMA) memory layer on the real kernel. The CI machine has one NUMA node, so
// multi-node placement is not exercised; the tests check node 0 behaviour and every refusal.
#include "driver/host/host.hpp"

#include <gtest/gtest.h>

#include <numaif.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace h = memarea::detail::host;
using memarea::errc;

namespace {

constexpr int k_bad_node = 4096;

/// An allocation freed at scope end, so a failing assertion does not leak a mapping.
struct host_block {
  void* ptr = nullptr;
  size_t size = 0;
  host_block(size_t s, int node) : size(s) {
    auto st = h::allocate(s, node, &ptr);
    EXPECT_TRUE(st.ok()) << st.detail;
  }
  ~host_block() {
    if (ptr) {
      EXPECT_TRUE(h::deallocate(ptr, size).ok());
    }
  }
  char* bytes() const { return static_cast<char*>(ptr); }
};

}  // namespace

TEST(Host, PageSizeIsPowerOfTwo) {
  const size_t ps = h::page_size();
  ASSERT_GE(ps, 4096u);
  EXPECT_EQ(ps & (ps - 1), 0u);
}

TEST(Host, NodeListIsSane) {
  const auto nodes = h::numa_nodes();
  ASSERT_FALSE(nodes.empty());
  std::set<int> ids;
  std::set<int> cpus;
  bool has_zero = false;
  for (const auto& n : nodes) {
    EXPECT_GE(n.id, 0);
    EXPECT_TRUE(ids.insert(n.id).second) << "duplicate node " << n.id;
    EXPECT_GE(n.total_bytes, n.free_bytes) << "node " << n.id;
    for (int c : n.cpus) {
      EXPECT_GE(c, 0);
      EXPECT_TRUE(cpus.insert(c).second) << "cpu " << c << " on two nodes";
    }
    if (n.id == 0) {
      has_zero = true;
      EXPECT_GT(n.total_bytes, 0u);
    }
  }
  EXPECT_TRUE(has_zero);
  EXPECT_FALSE(cpus.empty());
}

TEST(Host, AllocateOnNodeZeroWriteAndReadBack) {
  const size_t size = 3 * h::page_size() + 123;  // not a page multiple: rounding is exercised
  host_block b(size, 0);
  ASSERT_NE(b.ptr, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.ptr) % h::page_size(), 0u);

  std::mt19937 rng(12345);
  std::vector<char> data(size);
  for (auto& c : data) c = static_cast<char>(rng());
  std::memcpy(b.ptr, data.data(), size);
  EXPECT_EQ(std::memcmp(b.ptr, data.data(), size), 0);
}

TEST(Host, AllocateDefaultPolicy) {
  host_block b(h::page_size(), -1);
  ASSERT_NE(b.ptr, nullptr);
  b.bytes()[0] = 7;
  EXPECT_EQ(b.bytes()[0], 7);
}

TEST(Host, QueryNodeUntouchedThenTouched) {
  const size_t ps = h::page_size();
  host_block b(4 * ps, 0);
  ASSERT_NE(b.ptr, nullptr);
  int node = 99;
  auto st = h::query_node(b.ptr, 4 * ps, &node);
  ASSERT_TRUE(st.ok()) << st.detail;
  EXPECT_EQ(node, -1);  // nothing touched yet

  b.bytes()[0] = 1;  // first page only: the pages disagree
  st = h::query_node(b.ptr, 4 * ps, &node);
  ASSERT_TRUE(st.ok()) << st.detail;
  EXPECT_EQ(node, MEMAREA_INVALID_DEVICE_ID);

  std::memset(b.ptr, 0x5a, 4 * ps);
  st = h::query_node(b.ptr, 4 * ps, &node);
  ASSERT_TRUE(st.ok()) << st.detail;
  EXPECT_EQ(node, 0);  // this machine has one node

  // An unaligned sub-range reads the pages around it.
  st = h::query_node(b.bytes() + 10, 1, &node);
  ASSERT_TRUE(st.ok()) << st.detail;
  EXPECT_EQ(node, 0);
}

TEST(Host, QueryNodeReadOnlyTouchFollowsTheKernel) {
  // A read of a never-written page maps the shared zero page. Kernels differ on what
  // move_pages says of it: -EFAULT (then memarea answers -1, not placed) on older ones, the
  // zero page's node on newer ones (seen on 6.18). Either way memarea answers what the kernel
  // says, and the query neither fails nor places the page.
  host_block b(h::page_size(), -1);
  ASSERT_NE(b.ptr, nullptr);
  volatile char c = b.bytes()[0];
  (void)c;
  int node = 99;
  auto st = h::query_node(b.ptr, h::page_size(), &node);
  ASSERT_TRUE(st.ok()) << st.detail;
  if (h::numa_available()) {
    void* page = b.ptr;
    int kernel = 99;
    ASSERT_EQ(::move_pages(0, 1, &page, nullptr, &kernel, 0), 0) << std::strerror(errno);
    EXPECT_EQ(node, kernel == -EFAULT || kernel == -ENOENT ? -1 : kernel);
  } else {
    EXPECT_TRUE(node == -1 || node == 0) << node;  // mincore: resident or not
  }
  EXPECT_EQ(b.bytes()[0], 0);
}

TEST(Host, MigrateToNodeZero) {
  const size_t ps = h::page_size();
  host_block b(8 * ps, -1);
  ASSERT_NE(b.ptr, nullptr);
  std::memset(b.ptr, 0x11, 4 * ps);  // half touched: untouched pages must not fail the move
  auto st = h::migrate(b.ptr, 8 * ps, 0);
  ASSERT_TRUE(st.ok()) << st.detail;
  int node = 99;
  ASSERT_TRUE(h::query_node(b.ptr, 4 * ps, &node).ok());
  EXPECT_EQ(node, 0);
  for (size_t i = 0; i < 4 * ps; ++i) ASSERT_EQ(b.bytes()[i], 0x11);
  // Unaligned range, rounded out.
  st = h::migrate(b.bytes() + 5, ps, 0);
  EXPECT_TRUE(st.ok()) << st.detail;
}

TEST(Host, InvalidNodeIsRefusedAndChangesNothing) {
  const size_t ps = h::page_size();
  void* p = reinterpret_cast<void*>(0x1);  // sentinel: must stay untouched
  auto st = h::allocate(ps, k_bad_node, &p);
  EXPECT_EQ(st.code, errc::invalid_device);
  EXPECT_FALSE(st.detail.empty());
  EXPECT_NE(st.detail.find("4096"), std::string::npos) << st.detail;
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1));

  host_block b(2 * ps, 0);
  ASSERT_NE(b.ptr, nullptr);
  std::memset(b.ptr, 0x33, 2 * ps);
  st = h::migrate(b.ptr, 2 * ps, k_bad_node);
  EXPECT_EQ(st.code, errc::invalid_device);
  EXPECT_FALSE(st.detail.empty());
  st = h::migrate(b.ptr, 2 * ps, -3);
  EXPECT_EQ(st.code, errc::invalid_device);
  int node = 99;
  ASSERT_TRUE(h::query_node(b.ptr, 2 * ps, &node).ok());
  EXPECT_EQ(node, 0);
  for (size_t i = 0; i < 2 * ps; ++i) ASSERT_EQ(b.bytes()[i], 0x33);
}

TEST(Host, SizeZeroIsInvalidValue) {
  void* p = nullptr;
  auto st = h::allocate(0, 0, &p);
  EXPECT_EQ(st.code, errc::invalid_value);
  EXPECT_FALSE(st.detail.empty());
  EXPECT_EQ(p, nullptr);

  host_block b(h::page_size(), 0);
  ASSERT_NE(b.ptr, nullptr);
  int node = 99;
  EXPECT_EQ(h::migrate(b.ptr, 0, 0).code, errc::invalid_value);
  EXPECT_EQ(h::query_node(b.ptr, 0, &node).code, errc::invalid_value);
  EXPECT_EQ(node, 99);
  EXPECT_EQ(h::advise(b.ptr, 0, MADV_WILLNEED).code, errc::invalid_value);
  EXPECT_EQ(h::deallocate(b.ptr, 0).code, errc::invalid_value);
  b.bytes()[0] = 1;  // still mapped
}

TEST(Host, NullPointersAreInvalidValue) {
  EXPECT_EQ(h::allocate(4096, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(h::deallocate(nullptr, 4096).code, errc::invalid_value);
  EXPECT_EQ(h::migrate(nullptr, 4096, 0).code, errc::invalid_value);
  int node = 99;
  EXPECT_EQ(h::query_node(nullptr, 4096, &node).code, errc::invalid_value);
  EXPECT_EQ(node, 99);
  host_block b(h::page_size(), 0);
  ASSERT_NE(b.ptr, nullptr);
  EXPECT_EQ(h::query_node(b.ptr, 1, nullptr).code, errc::invalid_value);
  EXPECT_EQ(h::advise(nullptr, 4096, MADV_WILLNEED).code, errc::invalid_value);
}

TEST(Host, DeallocateRefusesUnaligned) {
  host_block b(2 * h::page_size(), -1);
  ASSERT_NE(b.ptr, nullptr);
  auto st = h::deallocate(b.bytes() + 1, h::page_size());
  EXPECT_EQ(st.code, errc::invalid_value);
  b.bytes()[0] = 1;  // still mapped
}

TEST(Host, UnmappedRangeIsInvalidValue) {
  // Three pages with the middle one unmapped: a hole between two live mappings.
  const size_t ps = h::page_size();
  void* p = nullptr;
  ASSERT_TRUE(h::allocate(3 * ps, -1, &p).ok());
  char* c = static_cast<char*>(p);
  ASSERT_EQ(::munmap(c + ps, ps), 0);
  std::memset(c, 1, ps);
  int node = 99;
  auto st = h::query_node(c, 3 * ps, &node);
  EXPECT_EQ(st.code, errc::invalid_value);
  EXPECT_EQ(st.native, ENOMEM);
  EXPECT_STREQ(st.native_name, "ENOMEM");
  EXPECT_FALSE(st.detail.empty());
  EXPECT_EQ(node, 99);
  EXPECT_EQ(h::migrate(c, 3 * ps, 0).code, errc::invalid_value);
  EXPECT_EQ(h::advise(c + ps, ps, MADV_WILLNEED).code, errc::invalid_value);
  EXPECT_TRUE(h::deallocate(c, ps).ok());
  EXPECT_TRUE(h::deallocate(c + 2 * ps, ps).ok());
}

TEST(Host, Advise) {
  const size_t ps = h::page_size();
  host_block b(4 * ps, 0);
  ASSERT_NE(b.ptr, nullptr);
  auto st = h::advise(b.bytes() + 7, 2 * ps, MADV_WILLNEED);  // unaligned: rounded out
  EXPECT_TRUE(st.ok()) << st.detail;

  st = h::advise(b.ptr, ps, 12345);  // no such advice
  EXPECT_EQ(st.code, errc::invalid_value);
  EXPECT_EQ(st.native, EINVAL);
  EXPECT_STREQ(st.native_name, "EINVAL");
  EXPECT_FALSE(st.detail.empty());

  // Discarding advice on an unaligned range would zero the neighbours: refused, data kept.
  std::memset(b.ptr, 0x44, 4 * ps);
  st = h::advise(b.bytes() + 1, ps, MADV_DONTNEED);
  EXPECT_EQ(st.code, errc::invalid_value);
  for (size_t i = 0; i < 4 * ps; ++i) ASSERT_EQ(b.bytes()[i], 0x44);
  // Aligned it is allowed and drops the page.
  st = h::advise(b.ptr, ps, MADV_DONTNEED);
  EXPECT_TRUE(st.ok()) << st.detail;
  EXPECT_EQ(b.bytes()[0], 0);
  EXPECT_EQ(b.bytes()[ps], 0x44);
}

TEST(Host, HugeSizeIsRefused) {
  void* p = nullptr;
  auto st = h::allocate(SIZE_MAX, 0, &p);
  EXPECT_EQ(st.code, errc::invalid_value);
  EXPECT_EQ(p, nullptr);
  st = h::allocate(SIZE_MAX / 2, -1, &p);  // rounds fine, but no such memory
  EXPECT_EQ(st.code, errc::out_of_memory);
  EXPECT_EQ(st.native, ENOMEM);
  EXPECT_EQ(p, nullptr);
}

TEST(Host, NodeExists) {
  EXPECT_TRUE(h::node_exists(0));
  for (const auto& n : h::numa_nodes()) EXPECT_TRUE(h::node_exists(n.id)) << n.id;
  EXPECT_FALSE(h::node_exists(-1));
  EXPECT_FALSE(h::node_exists(k_bad_node));
}

TEST(Host, MigratePlacesUntouchedPagesToo) {
  // A prefetch promises the whole range on the node: pages never written are faulted in there
  // (MADV_POPULATE_WRITE, Linux 5.14+), with their content (zeros) unchanged.
  const size_t ps = h::page_size();
  host_block b(4 * ps, -1);
  ASSERT_NE(b.ptr, nullptr);
  b.bytes()[0] = 9;
  ASSERT_TRUE(h::migrate(b.ptr, 4 * ps, 0).ok());
  int node = 99;
  ASSERT_TRUE(h::query_node(b.ptr, 4 * ps, &node).ok());
  if (h::numa_available() && ::madvise(b.ptr, ps, MADV_POPULATE_WRITE) == 0) {
    EXPECT_EQ(node, 0);
  }
  EXPECT_EQ(b.bytes()[0], 9);
  for (size_t i = 1; i < 4 * ps; ++i) ASSERT_EQ(b.bytes()[i], 0);
}

TEST(Host, SetPolicy) {
  const size_t ps = h::page_size();
  host_block b(4 * ps, 0);
  ASSERT_NE(b.ptr, nullptr);
  using p = h::policy;
  for (p pol : {p::preferred, p::bind}) {
    auto st = h::set_policy(b.bytes() + 3, 2 * ps, pol, 0);  // unaligned: rounded out
    EXPECT_TRUE(st.ok()) << st.detail;
  }
  auto st = h::set_policy(b.ptr, 4 * ps, p::default_policy, -1);  // the node is ignored
  EXPECT_TRUE(st.ok()) << st.detail;
  if (h::numa_available()) {
    // The kernel took it: the policy of the range reads back.
    int mode = -1;
    ASSERT_TRUE(h::set_policy(b.ptr, ps, p::preferred, 0).ok());
    ASSERT_EQ(::get_mempolicy(&mode, nullptr, 0, b.ptr, MPOL_F_ADDR), 0);
    EXPECT_EQ(mode, MPOL_PREFERRED);
    ASSERT_EQ(::get_mempolicy(&mode, nullptr, 0, b.bytes() + ps, MPOL_F_ADDR), 0);
    EXPECT_EQ(mode, MPOL_DEFAULT);  // the next page kept its own
    ASSERT_TRUE(h::set_policy(b.ptr, ps, p::default_policy, 0).ok());
    ASSERT_EQ(::get_mempolicy(&mode, nullptr, 0, b.ptr, MPOL_F_ADDR), 0);
    EXPECT_EQ(mode, MPOL_DEFAULT);
  }
  // Pages placed under a policy stay where they are and keep their data.
  std::memset(b.ptr, 0x21, 4 * ps);
  ASSERT_TRUE(h::set_policy(b.ptr, 4 * ps, p::preferred, 0).ok());
  for (size_t i = 0; i < 4 * ps; ++i) ASSERT_EQ(b.bytes()[i], 0x21);

  // Refusals.
  EXPECT_EQ(h::set_policy(nullptr, ps, p::preferred, 0).code, errc::invalid_value);
  EXPECT_EQ(h::set_policy(b.ptr, 0, p::preferred, 0).code, errc::invalid_value);
  st = h::set_policy(b.ptr, ps, p::preferred, k_bad_node);
  EXPECT_EQ(st.code, errc::invalid_device);
  EXPECT_NE(st.detail.find("4096"), std::string::npos) << st.detail;
  EXPECT_EQ(h::set_policy(b.ptr, ps, p::bind, -1).code, errc::invalid_device);
  EXPECT_EQ(h::set_policy(b.ptr, ps, static_cast<p>(42), 0).code, errc::invalid_value);
}

TEST(Host, SetPolicyOnUnmappedRangeIsInvalidValue) {
  const size_t ps = h::page_size();
  void* p = nullptr;
  ASSERT_TRUE(h::allocate(3 * ps, -1, &p).ok());
  char* c = static_cast<char*>(p);
  ASSERT_EQ(::munmap(c + ps, ps), 0);
  auto st = h::set_policy(c, 3 * ps, h::policy::preferred, 0);
  EXPECT_EQ(st.code, errc::invalid_value);
  EXPECT_EQ(st.native, ENOMEM);
  EXPECT_TRUE(h::deallocate(c, ps).ok());
  EXPECT_TRUE(h::deallocate(c + 2 * ps, ps).ok());
}
