// HIP's NVIDIA platform (tools/hip-nvidia-shim, docs/hip-nvidia.md) refuses shareable memory
// and allocates nothing: the registry's count says so. Checked in scripts/gpu-suite.sh's HIP
// pass; everywhere else it skips. The rest is api/hip_nvidia_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/memarea.h>

#include <string>

using namespace memarea;
using namespace memarea::test;

// HIP 5.2's NVIDIA platform has no virtual memory calls: shareable memory is refused, with why,
// and nothing is allocated.
TEST(HipOverNvidia, ShareableMemoryIsNotSupported) {
  REQUIRE_HIP_OVER_NVIDIA();
  const std::size_t live = live_allocations();
  void* p = nullptr;
  size_t allocated = 0;
  EXPECT_STATUS(memarea_shareable_create(&p, &allocated, 4096, 0), MEMAREA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(std::string(memarea_last_error_message()).find("virtual memory"), std::string::npos)
      << memarea_last_error_message();
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(live_allocations(), live);
  EXPECT_MEMAREA_ERROR(ipc::create_shareable(4096, 0), errc::not_supported);
}
