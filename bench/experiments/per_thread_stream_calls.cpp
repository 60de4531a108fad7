// Experiment (not part of the library): which driver calls take the per-thread default stream's
// handle (CU_STREAM_PER_THREAD, 0x2) and the legacy one's (CU_STREAM_LEGACY, 0x1) when they
// were fetched as memarea fetches them (cuGetProcAddress, CUDA 12.0's ABI,
// CU_GET_PROC_ADDRESS_DEFAULT), and whether the per-thread-stream forms (_ptsz, fetched with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) take NULL and 0x2 instead. memarea's wrap of
// MEMAREA_STREAM_PER_THREAD hands 0x2 to every stream-ordered call.
// For each call and stream it prints the CUresult, and for the fills and copies whether the
// bytes arrived (random bytes, compared byte for byte after cuCtxSynchronize).
// Build (CUDA headers only) and run on a GPU machine:
//   g++ -std=c++20 -O2 -isystem /usr/local/cuda/include
//       bench/experiments/per_thread_stream_calls.cpp -ldl -o /tmp/ptsc && /tmp/ptsc
#include "libcuda_dl.hpp"

#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

PFN_cuGetProcAddress_v12000 get_proc = nullptr;

template <class F>
void fetch(F& f, const char* name, cuuint64_t flags) {
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  void* p = nullptr;
  if (get_proc(name, &p, 12000, flags, &q) != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS ||
      !p) {
    std::fprintf(stderr, "no %s (flags %llu)\n", name, static_cast<unsigned long long>(flags));
    std::exit(2);
  }
  f = reinterpret_cast<F>(p);
}

struct forms {
  PFN_cuMemcpyAsync_v4000 MemcpyAsync;
  PFN_cuMemsetD8Async_v3020 MemsetD8Async;
  PFN_cuMemsetD16Async_v3020 MemsetD16Async;
  PFN_cuMemsetD32Async_v3020 MemsetD32Async;
  PFN_cuMemcpy2DAsync_v3020 Memcpy2DAsync;
  PFN_cuEventRecord_v2000 EventRecord;
  PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
  PFN_cuStreamQuery_v2000 StreamQuery;
  PFN_cuStreamSynchronize_v2000 StreamSynchronize;
  PFN_cuStreamGetCtx_v9020 StreamGetCtx;

  void load(cuuint64_t flags) {
    fetch(MemcpyAsync, "cuMemcpyAsync", flags);
    fetch(MemsetD8Async, "cuMemsetD8Async", flags);
    fetch(MemsetD16Async, "cuMemsetD16Async", flags);
    fetch(MemsetD32Async, "cuMemsetD32Async", flags);
    fetch(Memcpy2DAsync, "cuMemcpy2DAsync", flags);
    fetch(EventRecord, "cuEventRecord", flags);
    fetch(StreamWaitEvent, "cuStreamWaitEvent", flags);
    fetch(StreamQuery, "cuStreamQuery", flags);
    fetch(StreamSynchronize, "cuStreamSynchronize", flags);
    fetch(StreamGetCtx, "cuStreamGetCtx", flags);
  }
};

PFN_cuCtxSynchronize_v2000 CtxSynchronize;
PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
PFN_cuGetErrorName_v6000 GetErrorName;

const char* name(CUresult r) {
  const char* n = nullptr;
  return GetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
}

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(g());
  return v;
}

/// Runs one stream's row of calls through form f and prints each result.
void row(const char* form, const forms& f, const char* stream_name, CUstream s, CUdeviceptr dev,
         CUevent ev) {
  constexpr std::size_t n = 1 << 16;
  const auto bytes = random_bytes(n, 7);
  libcuda_dl::ok(MemcpyHtoD(dev, bytes.data(), n), "cuMemcpyHtoD");
  std::vector<unsigned char> want = bytes;
  std::printf("%-8s %-12s", form, stream_name);
  auto show = [](const char* what, CUresult r) { std::printf(" %s=%s", what, name(r)); };
  CUresult r = f.MemsetD8Async(dev + 101, 0xab, 50, s);  // odd address, odd count
  show("D8", r);
  if (r == CUDA_SUCCESS) std::memset(want.data() + 101, 0xab, 50);
  r = f.MemsetD16Async(dev + 1024, 0x1234, 8, s);
  show("D16", r);
  if (r == CUDA_SUCCESS)
    for (int i = 0; i < 8; ++i) {
      want[1024 + 2 * i] = 0x34;
      want[1024 + 2 * i + 1] = 0x12;
    }
  r = f.MemsetD32Async(dev + 2048, 0xdeadbeef, 4, s);
  show("D32", r);
  if (r == CUDA_SUCCESS)
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t v = 0xdeadbeef;
      std::memcpy(want.data() + 2048 + 4 * i, &v, 4);
    }
  r = f.MemcpyAsync(dev + n / 2, dev, 512, s);
  show("copy", r);
  if (r == CUDA_SUCCESS) std::memcpy(want.data() + n / 2, want.data(), 512);
  CUDA_MEMCPY2D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = dev + 4096;
  p.srcPitch = 256;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = dev + 3 * n / 4;
  p.dstPitch = 256;
  p.WidthInBytes = 64;
  p.Height = 4;
  r = f.Memcpy2DAsync(&p, s);
  show("2D", r);
  if (r == CUDA_SUCCESS)
    for (int row = 0; row < 4; ++row)
      std::memcpy(want.data() + 3 * n / 4 + row * 256, want.data() + 4096 + row * 256, 64);
  show("record", f.EventRecord(ev, s));
  show("wait", f.StreamWaitEvent(s, ev, 0));
  show("query", f.StreamQuery(s));
  show("sync", f.StreamSynchronize(s));
  CUcontext c = nullptr;
  show("getctx", f.StreamGetCtx(s, &c));
  libcuda_dl::ok(CtxSynchronize(), "cuCtxSynchronize");
  std::vector<unsigned char> back(n);
  libcuda_dl::ok(MemcpyDtoH(back.data(), dev, n), "cuMemcpyDtoH");
  std::printf("  bytes %s\n", back == want ? "match" : "DIFFER");
}

}  // namespace

int main() {
  void* lib = libcuda_dl::open();
  libcuda_dl::load(lib, get_proc, "cuGetProcAddress_v2");
  PFN_cuInit_v2000 Init;
  PFN_cuDeviceGet_v2000 DeviceGet;
  PFN_cuDevicePrimaryCtxRetain_v7000 Retain;
  PFN_cuCtxSetCurrent_v4000 SetCurrent;
  PFN_cuMemAlloc_v3020 MemAlloc;
  PFN_cuStreamCreate_v2000 StreamCreate;
  PFN_cuEventCreate_v2000 EventCreate;
  PFN_cuDriverGetVersion_v2020 DriverGetVersion;
  fetch(Init, "cuInit", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(DriverGetVersion, "cuDriverGetVersion", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(DeviceGet, "cuDeviceGet", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(Retain, "cuDevicePrimaryCtxRetain", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(SetCurrent, "cuCtxSetCurrent", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(MemAlloc, "cuMemAlloc", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(StreamCreate, "cuStreamCreate", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(EventCreate, "cuEventCreate", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(CtxSynchronize, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(MemcpyHtoD, "cuMemcpyHtoD", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(MemcpyDtoH, "cuMemcpyDtoH", CU_GET_PROC_ADDRESS_DEFAULT);
  fetch(GetErrorName, "cuGetErrorName", CU_GET_PROC_ADDRESS_DEFAULT);
  libcuda_dl::ok(Init(0), "cuInit");
  int version = 0;
  libcuda_dl::ok(DriverGetVersion(&version), "cuDriverGetVersion");
  std::printf("driver %d\n", version);
  CUdevice d;
  CUcontext ctx;
  libcuda_dl::ok(DeviceGet(&d, 0), "cuDeviceGet");
  libcuda_dl::ok(Retain(&ctx, d), "cuDevicePrimaryCtxRetain");
  libcuda_dl::ok(SetCurrent(ctx), "cuCtxSetCurrent");
  CUdeviceptr dev;
  libcuda_dl::ok(MemAlloc(&dev, 1 << 16), "cuMemAlloc");
  CUstream named;
  libcuda_dl::ok(StreamCreate(&named, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUevent ev;
  libcuda_dl::ok(EventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  forms legacy{}, ptsz{};
  legacy.load(CU_GET_PROC_ADDRESS_DEFAULT);
  ptsz.load(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  const struct {
    const char* name;
    CUstream s;
  } streams[] = {{"NULL", nullptr},
                 {"LEGACY", CU_STREAM_LEGACY},
                 {"PER_THREAD", CU_STREAM_PER_THREAD},
                 {"named", named}};
  for (const auto& [n, s] : streams) row("default", legacy, n, s, dev, ev);
  for (const auto& [n, s] : streams) row("ptsz", ptsz, n, s, dev, ev);
  return 0;
}
