// Peer access (seeds 000 and 003): every status in C and C++, the budget, unreachable pairs,
// and scoped_access's reference counts. Peer state is process-wide: every test disables what it
// enabled.
#include "api/common.hpp"

#include <memarea/memarea.h>
#include <memarea/peer.hpp>
#include <memarea/area.hpp>
#include <memarea/copy.hpp>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>

using namespace memarea;
using namespace memarea::test;

namespace {

/// A reachable pair (a, b), a != b, if there is one.
std::optional<std::pair<int, int>> reachable_pair() {
  for (int a = 0; a < devices(); ++a)
    for (int b = 0; b < devices(); ++b)
      if (a != b && peer::can_access(a, b)) return std::pair{a, b};
  return std::nullopt;
}

/// True when the driver says access a -> b is on (enable answers "already enabled"); leaves
/// the state as it found it.
bool driver_says_enabled(int a, int b) {
  try {
    peer::enable(a, b);
  } catch (const error& e) {
    return e.status() == errc::peer_access_already_enabled;
  }
  peer::disable(a, b);
  return false;
}

}  // namespace

TEST(Peer, CanAccessStatuses) {
  int v = -1;
  if (devices() == 0) {
    EXPECT_MEMAREA_ERROR((void)peer::can_access(0, 0), errc::no_device);
    EXPECT_STATUS(memarea_device_can_access_peer(&v, 0, 0), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_STATUS(memarea_device_enable_peer_access(0, 0), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_STATUS(memarea_device_disable_peer_access(0), MEMAREA_ERROR_NO_DEVICE);
    return;
  }
  const int n = devices();
  for (int d = 0; d < n; ++d) {
    EXPECT_FALSE(peer::can_access(d, d)) << "a device is not its own peer";
    EXPECT_STATUS(memarea_device_can_access_peer(&v, d, d), MEMAREA_SUCCESS);
    EXPECT_EQ(v, 0);
  }
  for (int bad : {n, -1, -2, 1000}) {
    EXPECT_MEMAREA_ERROR((void)peer::can_access(0, bad), errc::invalid_device);
    EXPECT_MEMAREA_ERROR((void)peer::can_access(bad, 0), errc::invalid_device);
    EXPECT_STATUS(memarea_device_can_access_peer(&v, 0, bad), MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_STATUS(memarea_device_can_access_peer(&v, bad, 0), MEMAREA_ERROR_INVALID_DEVICE);
  }
  EXPECT_STATUS(memarea_device_can_access_peer(nullptr, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const bool can = peer::can_access(a, b);
      EXPECT_STATUS(memarea_device_can_access_peer(&v, a, b), MEMAREA_SUCCESS);
      EXPECT_EQ(v, can ? 1 : 0);
      if (auto expect = sim_reachable(a, b)) {
        EXPECT_EQ(can, *expect) << a << " -> " << b;
      }
    }
  }
}

TEST(Peer, EnableDisableStatuses) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no device can reach another";
  const auto [a, b] = *pair;
  const int n = devices();
  device_guard g(a);
  ASSERT_FALSE(peer::is_enabled(a, b));

  // Refusals change nothing.
  EXPECT_STATUS(memarea_device_enable_peer_access(b, 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_MEMAREA_ERROR(peer::enable(b, 0x80u), errc::invalid_value);
  EXPECT_STATUS(memarea_device_enable_peer_access(a, 0), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_MEMAREA_ERROR(peer::enable(a, 0u), errc::invalid_device);
  EXPECT_MEMAREA_ERROR(peer::enable(a, a), errc::invalid_device);
  for (int bad : {n, -1, 77}) {
    EXPECT_STATUS(memarea_device_enable_peer_access(bad, 0), MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_STATUS(memarea_device_disable_peer_access(bad), MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_MEMAREA_ERROR(peer::enable(bad, b), errc::invalid_device);
    EXPECT_MEMAREA_ERROR(peer::disable(bad, b), errc::invalid_device);
  }
  EXPECT_STATUS(memarea_device_disable_peer_access(a), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_STATUS(memarea_device_disable_peer_access(b), MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED);
  EXPECT_MEMAREA_ERROR(peer::disable(b), errc::peer_access_not_enabled);
  EXPECT_FALSE(peer::is_enabled(a, b));

  // C: enable, twice, disable, twice.
  EXPECT_STATUS(memarea_device_enable_peer_access(b, 0), MEMAREA_SUCCESS);
  EXPECT_TRUE(peer::is_enabled(a, b));
  EXPECT_FALSE(peer::is_enabled(b, a)) << "access is one-directional";
  EXPECT_STATUS(memarea_device_enable_peer_access(b, 0),
                MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  EXPECT_EQ(get_device(), a);
  EXPECT_STATUS(memarea_device_disable_peer_access(b), MEMAREA_SUCCESS);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_STATUS(memarea_device_disable_peer_access(b), MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED);

  // C++: enable(device, peer) from another current device leaves the current device alone.
  set_device(b);
  peer::enable(a, b);
  EXPECT_EQ(get_device(), b);
  EXPECT_TRUE(peer::is_enabled(a, b));
  EXPECT_MEMAREA_ERROR(peer::enable(a, b), errc::peer_access_already_enabled);
  EXPECT_MEMAREA_ERROR(peer::disable(a, a), errc::invalid_device);
  peer::disable(a, b);
  EXPECT_MEMAREA_ERROR(peer::disable(a, b), errc::peer_access_not_enabled);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_EQ(get_device(), b);
}

TEST(Peer, BothDirectionsAreIndependent) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no device can reach another";
  const auto [a, b] = *pair;
  if (!peer::can_access(b, a)) GTEST_SKIP() << "the pair is reachable one way only";
  peer::enable(a, b);
  peer::enable(b, a);
  EXPECT_TRUE(peer::is_enabled(a, b));
  EXPECT_TRUE(peer::is_enabled(b, a));
  peer::disable(a, b);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_TRUE(peer::is_enabled(b, a));
  EXPECT_MEMAREA_ERROR(peer::disable(a, b), errc::peer_access_not_enabled);
  peer::disable(b, a);
  EXPECT_FALSE(peer::is_enabled(b, a));
}

TEST(Peer, UnreachablePairIsUnsupported) {
  MEMAREA_REQUIRE_DEVICES(2);
  std::optional<std::pair<int, int>> pair;
  for (int a = 0; a < devices() && !pair; ++a)
    for (int b = 0; b < devices() && !pair; ++b)
      if (a != b && !peer::can_access(a, b)) pair = std::pair{a, b};
  if (!pair) {
    if (auto expect = sim_reachable(0, 1)) {
      EXPECT_EQ(std::getenv("MEMAREA_SIM_PEER_GROUPS"), nullptr)
          << "groups are configured but every pair is reachable";
    }
    GTEST_SKIP() << "every device can reach every other";
  }
  const auto [a, b] = *pair;
  device_guard g(a);
  EXPECT_STATUS(memarea_device_enable_peer_access(b, 0), MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED);
  EXPECT_MEMAREA_ERROR(peer::enable(a, b), errc::peer_access_unsupported);
  EXPECT_MEMAREA_ERROR(peer::scoped_access(a, b), errc::peer_access_unsupported);
  EXPECT_EQ(peer::scoped_access::count(a, b), 0);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_EQ(peer::attribute(peer::attribute_kind::access_supported, a, b), 0);
  EXPECT_STATUS(memarea_device_disable_peer_access(b), MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

TEST(Peer, BudgetGivesTooManyPeers) {
  // The sim's budget (MEMAREA_SIM_MAX_PEERS, default 8); CUDA's is 8 too, but no machine here
  // has ten GPUs.
  if (backend_name() != "sim") GTEST_SKIP() << "the budget is only reachable on sim";
  const char* env = std::getenv("MEMAREA_SIM_MAX_PEERS");
  const int budget = env ? std::atoi(env) : 8;
  if (devices() < budget + 2) GTEST_SKIP() << "needs " << budget + 2 << " devices";
  for (int p = 1; p < budget + 2; ++p)
    if (!peer::can_access(0, p)) GTEST_SKIP() << "device 0 cannot reach " << p;
  device_guard g(0);
  for (int p = 1; p <= budget; ++p) {
    SCOPED_TRACE(testing::Message() << "peer " << p);
    EXPECT_STATUS(memarea_device_enable_peer_access(p, 0), MEMAREA_SUCCESS);
  }
  EXPECT_STATUS(memarea_device_enable_peer_access(budget + 1, 0), MEMAREA_ERROR_TOO_MANY_PEERS);
  EXPECT_FALSE(peer::is_enabled(0, budget + 1));
  EXPECT_MEMAREA_ERROR(peer::scoped_access(0, budget + 1), errc::too_many_peers);
  // The budget is per device: another device still has its own.
  peer::enable(budget + 1, 0);
  peer::disable(budget + 1, 0);
  // Freeing one slot makes room again.
  peer::disable(0, 1);
  peer::enable(0, budget + 1);
  peer::disable(0, budget + 1);
  for (int p = 2; p <= budget; ++p) peer::disable(0, p);
}

TEST(Peer, AttributeStatuses) {
  int v = -1;
  if (devices() == 0) {
    EXPECT_STATUS(memarea_device_get_p2p_attribute(&v, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 1),
                  MEMAREA_ERROR_NO_DEVICE);
    return;
  }
  const int n = devices();
  EXPECT_STATUS(memarea_device_get_p2p_attribute(nullptr, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0,
                                                 0),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_device_get_p2p_attribute(&v, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, n),
                MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_MEMAREA_ERROR((void)peer::attribute(peer::attribute_kind::access_supported, -1, 0),
                       errc::invalid_device);
  if (n < 2) return;
  EXPECT_STATUS(memarea_device_get_p2p_attribute(&v, static_cast<memarea_p2p_attribute>(99), 0,
                                                 1),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_MEMAREA_ERROR((void)peer::attribute(peer::attribute_kind::access_supported, 0, 0),
                       errc::invalid_device);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      EXPECT_STATUS(
          memarea_device_get_p2p_attribute(&v, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, a, b),
          MEMAREA_SUCCESS);
      EXPECT_EQ(v != 0, peer::can_access(a, b)) << a << " -> " << b;
      for (auto attr : {peer::attribute_kind::performance_rank,
                        peer::attribute_kind::native_atomic_supported,
                        peer::attribute_kind::array_access_supported}) {
        EXPECT_GE(peer::attribute(attr, a, b), 0);
      }
    }
  }
}

TEST(PeerScope, NestedScopesCountAndTheLastOneDisables) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no device can reach another";
  const auto [a, b] = *pair;
  EXPECT_EQ(peer::scoped_access::count(a, b), 0);
  {
    peer::scoped_access outer(a, b);
    EXPECT_TRUE(outer);
    EXPECT_EQ(outer.device(), a);
    EXPECT_EQ(outer.peer(), b);
    EXPECT_EQ(peer::scoped_access::count(a, b), 1);
    EXPECT_TRUE(peer::is_enabled(a, b));
    {
      peer::scoped_access inner(a, b);
      EXPECT_EQ(peer::scoped_access::count(a, b), 2);
      peer::scoped_access moved(std::move(inner));
      EXPECT_FALSE(inner);
      EXPECT_EQ(peer::scoped_access::count(a, b), 2);
    }
    EXPECT_EQ(peer::scoped_access::count(a, b), 1);
    EXPECT_TRUE(peer::is_enabled(a, b));
    EXPECT_TRUE(driver_says_enabled(a, b)) << "an inner scope disabled the outer one's access";
  }
  EXPECT_EQ(peer::scoped_access::count(a, b), 0);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_FALSE(driver_says_enabled(a, b)) << "the last scope did not disable";
  // A new round enables again.
  {
    peer::scoped_access again(a, b);
    EXPECT_TRUE(driver_says_enabled(a, b));
  }
  EXPECT_FALSE(driver_says_enabled(a, b));
}

TEST(PeerScope, AccessEnabledOutsideTheScopesStaysOn) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no device can reach another";
  const auto [a, b] = *pair;
  peer::enable(a, b);
  {
    peer::scoped_access s1(a, b);
    peer::scoped_access s2(a, b);
    EXPECT_EQ(peer::scoped_access::count(a, b), 2);
  }
  EXPECT_TRUE(peer::is_enabled(a, b));
  EXPECT_TRUE(driver_says_enabled(a, b)) << "a scope disabled access it did not enable";
  peer::disable(a, b);
  EXPECT_FALSE(peer::is_enabled(a, b));
}

TEST(PeerScope, BadPairsThrowAndCountNothing) {
  if (devices() == 0) {
    EXPECT_MEMAREA_ERROR(peer::scoped_access(0, 1), errc::no_device);
    return;
  }
  EXPECT_MEMAREA_ERROR(peer::scoped_access(0, 0), errc::invalid_device);
  EXPECT_MEMAREA_ERROR(peer::scoped_access(0, devices()), errc::invalid_device);
  EXPECT_MEMAREA_ERROR(peer::scoped_access(-1, 0), errc::invalid_device);
  EXPECT_EQ(peer::scoped_access::count(0, 0), 0);
  EXPECT_EQ(peer::scoped_access::count(0, devices()), 0);
}

TEST(PeerScope, TwoIndependentUsersConcurrently) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no device can reach another";
  const auto [a, b] = *pair;
  std::atomic<int> failures{0};
  auto user = [&, a = a, b = b] {
    for (int i = 0; i < 200; ++i) {
      try {
        peer::scoped_access s(a, b);
        if (!peer::is_enabled(a, b)) ++failures;
        if (peer::scoped_access::count(a, b) < 1) ++failures;
      } catch (const error&) {
        ++failures;
      }
    }
  };
  {
    // One long-lived user while two others come and go.
    peer::scoped_access holder(a, b);
    std::thread t1(user), t2(user);
    t1.join();
    t2.join();
    EXPECT_EQ(peer::scoped_access::count(a, b), 1);
    EXPECT_TRUE(driver_says_enabled(a, b));
  }
  EXPECT_EQ(failures.load(), 0);
  // Two users alone: every round starts and ends cleanly.
  std::thread t1(user), t2(user);
  t1.join();
  t2.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(peer::scoped_access::count(a, b), 0);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_FALSE(driver_says_enabled(a, b));
}
