// What differs when the HIP backend runs over HIP's NVIDIA platform (tools/hip-nvidia-shim,
// docs/hip-nvidia.md), checked where it does: scripts/gpu-suite.sh's HIP pass. Everywhere else
// these skip.
#include "api/common.hpp"

#include <memarea/memarea.h>

#include <string>

using namespace memarea;
using namespace memarea::test;

// The properties the platform answers for itself, and the one it cannot (unified addressing,
// which it does not map: the backend reports it, as every HIP device has it).
TEST(HipOverNvidia, PropertiesComeFromTheCudaDevice) {
  REQUIRE_HIP_OVER_NVIDIA();
  for (int d = 0; d < devices(); ++d) {
    const auto p = get_device_properties(d);
    EXPECT_EQ(p.backend, "hip");
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_GE(p.compute_major, 1) << "compute capability comes from CUDA";
    EXPECT_TRUE(p.unified_addressing);
    EXPECT_FALSE(p.virtual_memory_management);
    EXPECT_TRUE(p.ipc);
  }
}
