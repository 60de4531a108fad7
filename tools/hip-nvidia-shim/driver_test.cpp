// memarea's HIP backend over the shim (MEMAREA_HIP_NVIDIA_SHIM: the built libamdhip64.so.5),
// loaded by path as make_hip_driver would load it by name. Where there is no GPU (CI), every call
// must fail cleanly with the runtime's reason; where there is one, the suite of
// scripts/gpu-suite.sh covers the calls and these only check the identity.
#include "driver/hip/hip_driver.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>

#ifndef MEMAREA_HIP_NVIDIA_SHIM
#error "MEMAREA_HIP_NVIDIA_SHIM (the shim's path) is defined by tests/CMakeLists.txt"
#endif

namespace {

using memarea::errc;
using namespace memarea::detail;

std::unique_ptr<driver> load_shim() { return make_hip_driver_from({MEMAREA_HIP_NVIDIA_SHIM}); }

TEST(HipNvidiaShim, LoadsAsAHipRuntimeOfTheNvidiaPlatform) {
  auto d = load_shim();
  ASSERT_NE(d, nullptr);
  const std::string version = d->version();
  // Every symbol resolved (a missing one leaves the version empty) and the runtime answered
  // hipRuntimeGetVersion with the CUDA runtime's version.
  EXPECT_EQ(version.rfind("HIP's NVIDIA platform over CUDA runtime ", 0), 0u) << version;
  EXPECT_NE(version.find(std::string("(") + MEMAREA_HIP_NVIDIA_SHIM + ")"), std::string::npos)
      << version;
  if (d->device_count() > 0) return;  // a GPU machine: gpu-suite.sh runs the calls
  const std::string why = d->unavailable_reason();
  // hipGetDeviceCount's own answer, e.g. "hipGetDeviceCount: hipErrorInsufficientDriver (35):
  // CUDA driver version is insufficient for CUDA runtime version" where no driver is installed.
  EXPECT_EQ(why.rfind("hipGetDeviceCount: hipError", 0), 0u) << why;
  EXPECT_EQ(why.find("not found"), std::string::npos) << why;
  EXPECT_EQ(why.find("missing symbol"), std::string::npos) << why;
}

TEST(HipNvidiaShim, WithoutDevicesEveryCallIsNoDevice) {
  auto d = load_shim();
  ASSERT_NE(d, nullptr);
  if (d->device_count() > 0) GTEST_SKIP() << "a GPU is present";
  memarea_device_properties props{};
  EXPECT_EQ(d->get_properties(0, &props).code, errc::no_device);
  void* p = nullptr;
  EXPECT_EQ(d->malloc_device(0, 4096, &p).code, errc::no_device);
  EXPECT_EQ(p, nullptr);
  shareable_allocation a;
  EXPECT_EQ(d->shareable_create(0, 4096, &a).code, errc::no_device);
  int current = -7;
  EXPECT_EQ(d->get_current_device(&current).code, errc::no_device);
  EXPECT_EQ(current, -7);
}

// HIP 5.2's NVIDIA platform has no virtual memory calls: the shim exports none, so the backend
// finds the API missing and refuses shareable memory as not_supported (on a GPU:
// tests/whitebox/hip_nvidia_test.cpp).
TEST(HipNvidiaShim, ExportsNoVirtualMemoryCalls) {
  void* lib = ::dlopen(MEMAREA_HIP_NVIDIA_SHIM, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  for (const char* name : {"hipMemCreate", "hipMemRelease", "hipMemAddressReserve", "hipMemMap",
                           "hipMemExportToShareableHandle", "hipMemImportFromShareableHandle"}) {
    EXPECT_EQ(::dlsym(lib, name), nullptr) << name;
  }
  // Nor the CUDA runtime inside it: a program's own libcudart is never interposed.
  EXPECT_EQ(::dlsym(lib, "cudaMalloc"), nullptr);
  EXPECT_EQ(::dlsym(lib, "cuDeviceGet"), nullptr);
  EXPECT_NE(::dlsym(lib, "hipMalloc"), nullptr);
  // Left loaded, as the backend leaves its runtime: the CUDA runtime inside is not made to be
  // unloaded.
}

// The calls the backend resolves only when present (memset of 2- and 4-byte elements, 2D
// copies): the shim exports them, so that those operations run over HIP's NVIDIA platform rather
// than answer not_supported; and the driver calls behind the two memsets stay inside.
TEST(HipNvidiaShim, ExportsTheOptionalCallsTheBackendUses) {
  void* lib = ::dlopen(MEMAREA_HIP_NVIDIA_SHIM, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  for (const char* name : {"hipMemsetD16Async", "hipMemsetD32Async", "hipMemcpy2DAsync"})
    EXPECT_NE(::dlsym(lib, name), nullptr) << name;
  EXPECT_EQ(::dlsym(lib, "cuMemsetD16Async"), nullptr);
  EXPECT_EQ(::dlsym(lib, "cuMemsetD32Async"), nullptr);
}

}  // namespace
