// The HIP backend without an AMD GPU: every hipError_t is translated explicitly, and the driver
// loads (or fails to load) the runtime and then refuses every device call cleanly.
#include "driver/hip/hip_api.hpp"
#include "driver/hip/hip_driver.hpp"
#include "driver/hip/hip_errors.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace memarea::detail {
namespace {

struct expected_mapping {
  int code;
  errc status;
  const char* name;
};

// Every enumerator of ROCm 5.2's hipError_t, by its header name, so that a wrong number fails to
// compile; aliases (deprecated names) appear with the current name's text.
const expected_mapping k_header_codes[] = {
    {hipSuccess, errc::success, "hipSuccess"},
    {hipErrorInvalidValue, errc::invalid_value, "hipErrorInvalidValue"},
    {hipErrorOutOfMemory, errc::out_of_memory, "hipErrorOutOfMemory"},
    {hipErrorMemoryAllocation, errc::out_of_memory, "hipErrorOutOfMemory"},
    {hipErrorNotInitialized, errc::initialization, "hipErrorNotInitialized"},
    {hipErrorInitializationError, errc::initialization, "hipErrorNotInitialized"},
    {hipErrorDeinitialized, errc::initialization, "hipErrorDeinitialized"},
    {hipErrorProfilerDisabled, errc::not_supported, "hipErrorProfilerDisabled"},
    {hipErrorProfilerNotInitialized, errc::initialization, "hipErrorProfilerNotInitialized"},
    {hipErrorProfilerAlreadyStarted, errc::not_permitted, "hipErrorProfilerAlreadyStarted"},
    {hipErrorProfilerAlreadyStopped, errc::not_permitted, "hipErrorProfilerAlreadyStopped"},
    {hipErrorInvalidConfiguration, errc::invalid_value, "hipErrorInvalidConfiguration"},
    {hipErrorInvalidPitchValue, errc::invalid_value, "hipErrorInvalidPitchValue"},
    {hipErrorInvalidSymbol, errc::invalid_value, "hipErrorInvalidSymbol"},
    {hipErrorInvalidDevicePointer, errc::invalid_value, "hipErrorInvalidDevicePointer"},
    {hipErrorInvalidMemcpyDirection, errc::invalid_value, "hipErrorInvalidMemcpyDirection"},
    {hipErrorInsufficientDriver, errc::not_supported, "hipErrorInsufficientDriver"},
    {hipErrorMissingConfiguration, errc::invalid_value, "hipErrorMissingConfiguration"},
    {hipErrorPriorLaunchFailure, errc::unknown, "hipErrorPriorLaunchFailure"},
    {hipErrorInvalidDeviceFunction, errc::invalid_value, "hipErrorInvalidDeviceFunction"},
    {hipErrorNoDevice, errc::no_device, "hipErrorNoDevice"},
    {hipErrorInvalidDevice, errc::invalid_device, "hipErrorInvalidDevice"},
    {hipErrorInvalidImage, errc::invalid_value, "hipErrorInvalidImage"},
    {hipErrorInvalidContext, errc::invalid_context, "hipErrorInvalidContext"},
    {hipErrorContextAlreadyCurrent, errc::invalid_context, "hipErrorContextAlreadyCurrent"},
    {hipErrorMapFailed, errc::invalid_handle, "hipErrorMapFailed"},
    {hipErrorMapBufferObjectFailed, errc::invalid_handle, "hipErrorMapFailed"},
    {hipErrorUnmapFailed, errc::invalid_value, "hipErrorUnmapFailed"},
    {hipErrorArrayIsMapped, errc::busy, "hipErrorArrayIsMapped"},
    {hipErrorAlreadyMapped, errc::busy, "hipErrorAlreadyMapped"},
    {hipErrorNoBinaryForGpu, errc::not_supported, "hipErrorNoBinaryForGpu"},
    {hipErrorAlreadyAcquired, errc::busy, "hipErrorAlreadyAcquired"},
    {hipErrorNotMapped, errc::invalid_value, "hipErrorNotMapped"},
    {hipErrorNotMappedAsArray, errc::invalid_value, "hipErrorNotMappedAsArray"},
    {hipErrorNotMappedAsPointer, errc::invalid_value, "hipErrorNotMappedAsPointer"},
    {hipErrorECCNotCorrectable, errc::unknown, "hipErrorECCNotCorrectable"},
    {hipErrorUnsupportedLimit, errc::not_supported, "hipErrorUnsupportedLimit"},
    {hipErrorContextAlreadyInUse, errc::busy, "hipErrorContextAlreadyInUse"},
    {hipErrorPeerAccessUnsupported, errc::peer_access_unsupported, "hipErrorPeerAccessUnsupported"},
    {hipErrorInvalidKernelFile, errc::invalid_value, "hipErrorInvalidKernelFile"},
    {hipErrorInvalidGraphicsContext, errc::invalid_context, "hipErrorInvalidGraphicsContext"},
    {hipErrorInvalidSource, errc::invalid_value, "hipErrorInvalidSource"},
    {hipErrorFileNotFound, errc::not_found, "hipErrorFileNotFound"},
    {hipErrorSharedObjectSymbolNotFound, errc::not_found, "hipErrorSharedObjectSymbolNotFound"},
    {hipErrorSharedObjectInitFailed, errc::initialization, "hipErrorSharedObjectInitFailed"},
    {hipErrorOperatingSystem, errc::unknown, "hipErrorOperatingSystem"},
    {hipErrorInvalidHandle, errc::invalid_handle, "hipErrorInvalidHandle"},
    {hipErrorInvalidResourceHandle, errc::invalid_handle, "hipErrorInvalidHandle"},
    {hipErrorIllegalState, errc::not_permitted, "hipErrorIllegalState"},
    {hipErrorNotFound, errc::not_found, "hipErrorNotFound"},
    {hipErrorNotReady, errc::busy, "hipErrorNotReady"},
    {hipErrorIllegalAddress, errc::unknown, "hipErrorIllegalAddress"},
    {hipErrorLaunchOutOfResources, errc::unknown, "hipErrorLaunchOutOfResources"},
    {hipErrorLaunchTimeOut, errc::unknown, "hipErrorLaunchTimeOut"},
    {hipErrorPeerAccessAlreadyEnabled, errc::peer_access_already_enabled,
     "hipErrorPeerAccessAlreadyEnabled"},
    {hipErrorPeerAccessNotEnabled, errc::peer_access_not_enabled, "hipErrorPeerAccessNotEnabled"},
    {hipErrorSetOnActiveProcess, errc::not_permitted, "hipErrorSetOnActiveProcess"},
    {hipErrorContextIsDestroyed, errc::invalid_context, "hipErrorContextIsDestroyed"},
    {hipErrorAssert, errc::unknown, "hipErrorAssert"},
    {hipErrorHostMemoryAlreadyRegistered, errc::invalid_value,
     "hipErrorHostMemoryAlreadyRegistered"},
    {hipErrorHostMemoryNotRegistered, errc::invalid_value, "hipErrorHostMemoryNotRegistered"},
    {hipErrorLaunchFailure, errc::unknown, "hipErrorLaunchFailure"},
    {hipErrorCooperativeLaunchTooLarge, errc::unknown, "hipErrorCooperativeLaunchTooLarge"},
    {hipErrorNotSupported, errc::not_supported, "hipErrorNotSupported"},
    {hipErrorStreamCaptureUnsupported, errc::not_permitted, "hipErrorStreamCaptureUnsupported"},
    {hipErrorStreamCaptureInvalidated, errc::not_permitted, "hipErrorStreamCaptureInvalidated"},
    {hipErrorStreamCaptureMerge, errc::not_permitted, "hipErrorStreamCaptureMerge"},
    {hipErrorStreamCaptureUnmatched, errc::not_permitted, "hipErrorStreamCaptureUnmatched"},
    {hipErrorStreamCaptureUnjoined, errc::not_permitted, "hipErrorStreamCaptureUnjoined"},
    {hipErrorStreamCaptureIsolation, errc::not_permitted, "hipErrorStreamCaptureIsolation"},
    {hipErrorStreamCaptureImplicit, errc::not_permitted, "hipErrorStreamCaptureImplicit"},
    {hipErrorCapturedEvent, errc::not_permitted, "hipErrorCapturedEvent"},
    {hipErrorStreamCaptureWrongThread, errc::not_permitted, "hipErrorStreamCaptureWrongThread"},
    {hipErrorGraphExecUpdateFailure, errc::invalid_value, "hipErrorGraphExecUpdateFailure"},
    {hipErrorUnknown, errc::unknown, "hipErrorUnknown"},
    {hipErrorRuntimeMemory, errc::unknown, "hipErrorRuntimeMemory"},
    {hipErrorRuntimeOther, errc::unknown, "hipErrorRuntimeOther"},
    // 5.2's marker; the same number is hipErrorInvalidClusterSize from ROCm 6.2.
    {hipErrorTbd, errc::invalid_value, "hipErrorInvalidClusterSize"},
};

// Codes newer runtimes return that the 5.2 headers do not name.
const expected_mapping k_newer_codes[] = {
    {911, errc::invalid_value, "hipErrorInvalidChannelDescriptor"},
    {912, errc::invalid_value, "hipErrorInvalidTexture"},
    {1054, errc::invalid_value, "hipErrorInvalidClusterSize"},
    {1055, errc::unknown, "hipErrorTbd"},
};

TEST(HipErrors, EveryHeaderCodeIsMappedExplicitly) {
  for (const auto& m : k_header_codes) {
    SCOPED_TRACE(m.name);
    EXPECT_EQ(map_hip_error(m.code), m.status) << "code " << m.code;
    EXPECT_STREQ(hip_error_name(m.code), m.name) << "code " << m.code;
  }
}

TEST(HipErrors, Rocm6CodesAreMapped) {
  for (const auto& m : k_newer_codes) {
    SCOPED_TRACE(m.name);
    EXPECT_EQ(map_hip_error(m.code), m.status);
    EXPECT_STREQ(hip_error_name(m.code), m.name);
  }
}

TEST(HipErrors, UnknownCodesAreUnknownNeverSuccess) {
  for (int code : {-1, 10, 11, 14, 99, 102, 203, 703, 800, 909, 913, 1000, 1051, 1056, 4096,
                   INT_MAX, INT_MIN}) {
    SCOPED_TRACE(code);
    EXPECT_EQ(map_hip_error(code), errc::unknown);
    EXPECT_STREQ(hip_error_name(code), "hipErrorUnrecognized");
  }
}

// Sweeps the whole range HIP uses: only 0 is success, and every code that has a name is one of
// the tables above (so the tables and the implementation cannot drift apart silently).
TEST(HipErrors, SweepOnlyZeroIsSuccessAndNamedCodesAreListed) {
  std::set<int> listed;
  for (const auto& m : k_header_codes) listed.insert(m.code);
  for (const auto& m : k_newer_codes) listed.insert(m.code);
  for (int code = -100; code <= 2100; ++code) {
    if (code != 0) {
      EXPECT_NE(map_hip_error(code), errc::success) << code;
    }
    const bool named = std::strcmp(hip_error_name(code), "hipErrorUnrecognized") != 0;
    EXPECT_EQ(named, listed.count(code) == 1) << code << " " << hip_error_name(code);
    if (!named) {
      EXPECT_EQ(map_hip_error(code), errc::unknown) << code;
    }
  }
}

TEST(HipDriver, MissingLibraryMeansNoDevicesWithAReason) {
  auto d = make_hip_driver_from({"/nonexistent/libamdhip64.so.6", "/nonexistent/libamdhip64.so.5"});
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name(), "hip");
  EXPECT_EQ(d->device_count(), 0);
  const std::string why = d->unavailable_reason();
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libamdhip64.so.6"), std::string::npos) << why;
  EXPECT_EQ(d->version(), "");
  int device = 0;
  const dstatus s = d->get_current_device(&device);
  EXPECT_EQ(s.code, errc::no_device);
  EXPECT_NE(s.detail.find("not found"), std::string::npos) << s.detail;
}

TEST(HipDriver, LibraryWithoutHipSymbolsNamesTheMissingSymbol) {
  auto d = make_hip_driver_from({"libm.so.6"});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->device_count(), 0);
  const std::string why = d->unavailable_reason();
  EXPECT_NE(why.find("missing symbol hipGetDeviceCount"), std::string::npos) << why;
  EXPECT_EQ(d->version(), "");
}

TEST(HipDriver, DefaultCandidatesAreTheVersionedNames) {
  EXPECT_EQ(hip_library_candidates(),
            (std::vector<std::string>{"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}));
}

// Here (CI and the developer machine) the runtime is installed but there is no AMD GPU: the
// factory must load it, report zero devices and say why, and never crash.
TEST(HipDriver, FactoryReportsNoDeviceWithAReason) {
  auto d = make_hip_driver();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name(), "hip");
  if (d->device_count() > 0) GTEST_SKIP() << "an AMD GPU is present";
  const std::string why = d->unavailable_reason();
  EXPECT_FALSE(why.empty());
  const bool library_missing = why.find("not found") != std::string::npos;
  if (!library_missing) {
    // The runtime loaded: the reason is hipGetDeviceCount's own answer, and versions are known.
    EXPECT_EQ(why.rfind("hipGetDeviceCount", 0), 0u) << why;
    // ROCm's runtime, or HIP's NVIDIA platform where tools/hip-nvidia-shim is first on the path.
    EXPECT_TRUE(d->version().rfind("HIP runtime ", 0) == 0 ||
                d->version().rfind("HIP's NVIDIA platform over CUDA runtime ", 0) == 0)
        << d->version();
  }
}

TEST(HipDriver, EveryDeviceCallFailsCleanlyWithoutDevices) {
  auto d = make_hip_driver();
  ASSERT_NE(d, nullptr);
  if (d->device_count() > 0) GTEST_SKIP() << "an AMD GPU is present";

  std::vector<dstatus> results;
  memarea_device_properties props{};
  results.push_back(d->get_properties(0, &props));
  size_t free_bytes = 0, total_bytes = 0;
  results.push_back(d->mem_get_info(0, &free_bytes, &total_bytes));
  results.push_back(d->set_current_device(0));
  int current = 0;
  results.push_back(d->get_current_device(&current));

  void* p = nullptr;
  results.push_back(d->malloc_device(0, 4096, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_device(nullptr));
  results.push_back(d->malloc_host(0, 4096, host_portable | host_mapped, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_host(nullptr));
  std::vector<char> host(4096);
  results.push_back(d->host_register(0, host.data(), host.size(), host_mapped));
  results.push_back(d->host_unregister(host.data()));
  void* dp = nullptr;
  results.push_back(d->host_get_device_pointer(&dp, host.data()));
  results.push_back(d->malloc_managed(0, 4096, MEMAREA_MEM_ATTACH_GLOBAL, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_managed(nullptr));
  pointer_info info;
  results.push_back(d->pointer_query(host.data(), &info));

  int can = -1;
  results.push_back(d->can_access_peer(0, 1, &can));
  results.push_back(d->enable_peer_access(0, 1, 0));
  results.push_back(d->disable_peer_access(0, 1));
  int value = 0;
  results.push_back(d->get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 1, &value));

  std::vector<char> other(4096);
  results.push_back(d->memcpy_async(other.data(), host.data(), 16, 0, nullptr));
  results.push_back(d->memcpy_peer_async(other.data(), 1, host.data(), 0, 16, 0, nullptr));
  results.push_back(d->memset_async(other.data(), 0, 16, 0, nullptr));

  native_stream s = nullptr;
  results.push_back(d->stream_create(0, &s));
  EXPECT_EQ(s, nullptr);
  int dummy = 0;
  results.push_back(d->stream_destroy(0, &dummy));
  results.push_back(d->stream_synchronize(0, nullptr));
  native_event e = nullptr;
  results.push_back(d->event_create(0, &e, memarea::detail::event_timing::on));
  EXPECT_EQ(e, nullptr);
  results.push_back(d->event_destroy(0, &dummy));
  results.push_back(d->event_record(&dummy, 0, nullptr));
  results.push_back(d->stream_wait_event(0, nullptr, &dummy));
  results.push_back(d->event_synchronize(&dummy));
  float ms = 0;
  results.push_back(d->event_elapsed_ms(&ms, &dummy, &dummy));
  results.push_back(d->device_synchronize(0));

  ipc_native_handle h{};
  results.push_back(d->ipc_get_handle(host.data(), &h));
  results.push_back(d->ipc_open_handle(0, h, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &p));
  results.push_back(d->ipc_close_handle(host.data()));

  shareable_allocation a;
  results.push_back(d->shareable_create(0, 1 << 20, &a));
  int fd = -1;
  shareable_allocation fake;
  fake.ptr = host.data();
  fake.size = host.size();
  fake.opaque[0] = 1;
  results.push_back(d->shareable_export_fd(fake, &fd));
  EXPECT_EQ(fd, -1);
  results.push_back(d->shareable_import_fd(0, 3, 1 << 20, &a));
  results.push_back(d->shareable_release(fake));

  results.push_back(d->mem_prefetch_async(host.data(), host.size(), location::device(0), 0,
                                          nullptr));
  results.push_back(d->mem_advise(host.data(), host.size(), MEMAREA_MEM_ADVISE_SET_READ_MOSTLY,
                                  location::device(0)));
  int attr = 0;
  results.push_back(d->mem_range_get_attribute(&attr, sizeof attr,
                                               MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                               host.data(), host.size()));
  results.push_back(d->stream_attach_mem_async(0, nullptr, host.data(), host.size(),
                                               MEMAREA_MEM_ATTACH_GLOBAL));

  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_FALSE(results[i].ok());
    EXPECT_EQ(results[i].code, errc::no_device) << results[i].detail;
    EXPECT_FALSE(results[i].detail.empty());
  }
}

// Bad arguments are refused before the runtime is consulted, whatever its state.
TEST(HipDriver, BadArgumentsAreInvalidValue) {
  auto d = make_hip_driver();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->get_properties(0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_device(0, 16, nullptr).code, errc::invalid_value);
  void* p = nullptr;
  EXPECT_EQ(d->malloc_host(0, 16, 0x80, &p).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_managed(0, 4096, 0, &p).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_managed(0, 4096, MEMAREA_MEM_ATTACH_SINGLE, &p).code, errc::invalid_value);
  EXPECT_EQ(d->enable_peer_access(0, 1, 1).code, errc::invalid_value);
  int v = 0;
  EXPECT_EQ(d->get_p2p_attribute(static_cast<memarea_p2p_attribute>(99), 0, 1, &v).code,
            errc::invalid_value);
  ipc_native_handle h{};
  EXPECT_EQ(d->ipc_open_handle(0, h, 0x4, &p).code, errc::invalid_value);
  std::vector<char> buf(64);
  EXPECT_EQ(d->mem_advise(buf.data(), buf.size(), static_cast<memarea_mem_advice>(42),
                          location::device(0))
                .code,
            errc::invalid_value);
  EXPECT_EQ(d->mem_prefetch_async(buf.data(), buf.size(), location::host_numa(0), 0, nullptr).code,
            errc::not_supported);
  EXPECT_EQ(d->mem_range_get_attribute(&v, 3, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, buf.data(),
                                       buf.size())
                .code,
            errc::invalid_value);
  EXPECT_EQ(d->stream_attach_mem_async(0, nullptr, buf.data(), buf.size(), 0x8).code,
            errc::invalid_value);
}

}  // namespace
}  // namespace memarea::detail
