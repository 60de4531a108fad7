// Peer access between every ordered pair: attributes agree with the configuration, and a copy
// with access on takes the driver's peer copy (the testing interface's last_copy_path). The rest
// of peer access is api/peer_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>

#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace mt = memarea::detail::testing;

TEST(Peer, EveryPairEnablesCopiesAndDisables) {
  // Every ordered pair of the machine (2, 4, 8 or 10 devices): attributes agree with
  // can_access, enable and disable work or refuse as they should, and data crosses byte for
  // byte through the driver's peer path while access is on.
  MEMAREA_REQUIRE_DEVICES(2);
  const std::size_t n = 64 * 1024 + 3;
  for (int a = 0; a < devices(); ++a) {
    for (int b = 0; b < devices(); ++b) {
      if (a == b) continue;
      SCOPED_TRACE(testing::Message() << a << " -> " << b);
      const bool can = peer::can_access(a, b);
      if (auto sim = sim_reachable(a, b)) {
        EXPECT_EQ(can, *sim);
      }
      int v = -1;
      EXPECT_STATUS(memarea_device_get_p2p_attribute(&v, MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, a, b),
                    MEMAREA_SUCCESS);
      EXPECT_EQ(v != 0, can);
      ASSERT_FALSE(peer::is_enabled(a, b));
      if (!can) {
        EXPECT_MEMAREA_ERROR(peer::enable(a, b), errc::peer_access_unsupported);
        EXPECT_FALSE(peer::is_enabled(a, b));
        continue;
      }
      peer::enable(a, b);
      EXPECT_TRUE(peer::is_enabled(a, b));
      {
        buffer x = area(a).allocate(n), y = area(b).allocate(n);
        const auto data = random_bytes(n);
        copy(x.data(), data.data(), n);
        copy_peer(y.data(), b, x.data(), a, n);
        EXPECT_EQ(mt::last_copy_path(), mt::copy_path::driver_peer);
        std::vector<unsigned char> back(n);
        copy(back.data(), y.data(), n);
        EXPECT_EQ(back, data);
      }
      peer::disable(a, b);
      EXPECT_FALSE(peer::is_enabled(a, b));
      EXPECT_MEMAREA_ERROR(peer::disable(a, b), errc::peer_access_not_enabled);
    }
  }
}
