// The add-on API's tests that count what memarea's registry holds (api/addon_test.cpp has the
// rest): a tag goes and comes with its allocation, and a refused placement allocates nothing.
#include "api/addon_util.hpp"
#include "whitebox/whitebox.hpp"

#include <memarea/area.hpp>
#include <memarea/c_interop.hpp>
#include <memarea/host.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

#include <numaif.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

using namespace memarea;
using namespace memarea::test;

// A tag goes with the allocation: lookups of any interior pointer read it, the tagged free
// frees only with the tag and the size, and memory made without a tag has none.
TEST(AddonTags, HostMemoryCarriesItsTagAndFreesOnlyWithIt) {
  const std::size_t before = live_allocations();
  const std::size_t n = 3 * host_page() + 10;
  void* p = host::allocate_placed(n, host::placement{}, nullptr, kMine);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tag_of(p), kMine);
  EXPECT_EQ(tag_of(static_cast<char*>(p) + n - 1), kMine);
  expect_errc(errc::invalid_value, [&] { free_tagged(p, n, kTheirs); });
  expect_errc(errc::invalid_value, [&] { free_tagged(p, n + 1, kMine); });
  expect_errc(errc::invalid_value, [&] { free_tagged(p, n - 1, kMine); });
  expect_errc(errc::invalid_value, [&] { free_tagged(static_cast<char*>(p) + 1, n, kMine); });
  expect_errc(errc::invalid_value, [&] { free_tagged(p, n, nullptr); });
  EXPECT_EQ(lookup(p).base, p) << "a refused free frees nothing";
  std::memset(p, 0x5a, n);  // still the caller's
  free_tagged(p, n, kMine);
  EXPECT_FALSE(find(p).has_value());
  expect_errc(errc::invalid_value, [&] { free_tagged(p, n, kMine); });  // twice

  // Size 0 skips the size's check; memarea_free frees tagged memory too.
  p = host::allocate_placed(n, host::placement{}, nullptr, kMine);
  free_tagged(p, 0, kMine);
  p = host::allocate_placed(n, host::placement{}, nullptr, kMine);
  EXPECT_EQ(memarea_free(p), MEMAREA_SUCCESS);

  // Without a tag: none, and no tag frees it.
  host::host_buffer plain(4096);
  EXPECT_EQ(tag_of(plain.data()), nullptr);
  expect_errc(errc::invalid_value, [&] { free_tagged(plain.data(), 4096, kMine); });
  plain.reset();

  // Memory memarea knows nothing of.
  int local = 0;
  expect_errc(errc::not_found, [&] { (void)tag_of(&local); });
  expect_errc(errc::invalid_value, [&] { free_tagged(&local, sizeof local, kMine); });
  EXPECT_EQ(live_allocations(), before);
}

// An area's allocation takes its tag from the mmap options; a pooled area takes none (its pieces
// are the pool's).
TEST(AddonTags, AreaAllocationsCarryTheOptionsTag) {
  MEMAREA_REQUIRE_DEVICES(1);
  const std::size_t before = live_allocations();
  const area a(0);
  mmap_options o;
  o.tag = kMine;
  void* p = a.mmap(1000, o);
  EXPECT_EQ(tag_of(p), kMine);
  EXPECT_EQ(tag_of(static_cast<char*>(p) + 999), kMine);
  expect_errc(errc::invalid_value, [&] { free_tagged(p, 1000, kTheirs); });
  // The area's own munmap still frees it (the tag restricts only the tagged free).
  a.munmap(p, 1000);

  // C: the options' tag; area munmap of a tagged allocation, and a tagged free across areas.
  memarea_area_t ca = nullptr;
  ASSERT_EQ(memarea_area_create(&ca, 0, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
  memarea_mmap_options co = MEMAREA_MMAP_OPTIONS_INIT;
  EXPECT_EQ(co.tag, nullptr);
  co.tag = kTheirs;
  ASSERT_EQ(memarea_area_mmap(ca, &p, 4096, &co), MEMAREA_SUCCESS);
  const void* tag = nullptr;
  EXPECT_EQ(memarea_pointer_get_tag(&tag, p), MEMAREA_SUCCESS);
  EXPECT_EQ(tag, kTheirs);
  EXPECT_EQ(memarea_free_tagged(p, 4096, kTheirs), MEMAREA_SUCCESS);
  ASSERT_EQ(memarea_area_mmap(ca, &p, 4096, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pointer_get_tag(&tag, p), MEMAREA_SUCCESS);
  EXPECT_EQ(tag, nullptr);
  EXPECT_EQ(memarea_area_munmap(ca, p, 4096), MEMAREA_SUCCESS);

  // A pool's pieces have no tag, and a pooled area refuses one.
  pool pl(a);
  void* piece = pl.allocate(512);
  EXPECT_EQ(tag_of(piece), nullptr);
  expect_errc(errc::invalid_value, [&] { free_tagged(piece, 512, kMine); });
  pl.deallocate(piece);
  expect_errc(errc::invalid_value, [&] { (void)pl.as_area().mmap(512, o); });
  memarea_area_t pooled = nullptr;
  ASSERT_EQ(memarea_area_create_pooled(&pooled, memarea::to_c(pl)), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_mmap(pooled, &p, 512, &co), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_area_destroy(pooled), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(ca), MEMAREA_SUCCESS);
  EXPECT_EQ(live_allocations(), before + 1);  // the pool's block
}

TEST(AddonHostPlacement, BadPlacementsAreRefused) {
  const std::size_t before = live_allocations();
  const std::size_t n = host_page();
  expect_errc(errc::invalid_value, [&] { (void)host::allocate_placed(0, host::placement{}); });
  expect_errc(errc::invalid_value,
              [&] { (void)host::allocate_placed(n, host::placement{host::policy::bind, {}}); });
  expect_errc(errc::invalid_value, [&] {
    (void)host::allocate_placed(n, host::placement{host::policy::interleave, {0UL, 0UL}});
  });
  expect_errc(errc::invalid_value, [&] {
    (void)host::allocate_placed(n, host::placement{static_cast<host::policy>(7), all_nodes()});
  });
  std::vector<unsigned long> missing;
  const int m = missing_node();
  missing.resize(static_cast<std::size_t>(m) / (sizeof(unsigned long) * CHAR_BIT) + 1, 0UL);
  missing.back() |= 1UL << (static_cast<std::size_t>(m) % (sizeof(unsigned long) * CHAR_BIT));
  expect_errc(errc::invalid_device, [&] {
    (void)host::allocate_placed(n, host::placement{host::policy::bind, missing});
  });
  // The default policy ignores the set.
  host::free(host::allocate_placed(n, host::placement{host::policy::default_policy, missing}));

  // C: options NULL, the same refusals, and nodes NULL with words.
  void* p = nullptr;
  EXPECT_EQ(memarea_host_malloc_placed(&p, n, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_free(p), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_host_malloc_placed(nullptr, n, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  memarea_host_malloc_options o = MEMAREA_HOST_MALLOC_OPTIONS_INIT;
  o.policy = MEMAREA_HOST_POLICY_BIND;
  EXPECT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_ERROR_INVALID_VALUE);  // empty set
  o.node_words = 1;
  EXPECT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_ERROR_INVALID_VALUE);  // NULL nodes
  o.nodes = missing.data();
  o.node_words = missing.size();
  EXPECT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("does not exist"), std::string::npos);
  const std::vector<unsigned long> nodes = all_nodes();
  o.nodes = nodes.data();
  o.node_words = nodes.size();
  o.policy = static_cast<memarea_host_policy>(9);
  EXPECT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_ERROR_INVALID_VALUE);
  o.policy = MEMAREA_HOST_POLICY_INTERLEAVE;
  ASSERT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_SUCCESS);
  if (host::numa_available()) {
    EXPECT_EQ(kernel_policy(p), MPOL_INTERLEAVE);
  }
  EXPECT_EQ(memarea_free(p), MEMAREA_SUCCESS);
  EXPECT_EQ(live_allocations(), before);
}
