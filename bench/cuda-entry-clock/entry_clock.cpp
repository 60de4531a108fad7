// A libcuda.so.1 that stands in front of the real one for `memarea-bench --filter copy`'s entry
// rows (a copy's fixed cost "from entry to the driver call"). It forwards everything to
// the real libcuda; the one difference is that the cuMemcpyAsync it hands out notes, on entry,
// the steady clock's time and a count of calls, which the bench reads back through
// memarea_entry_clock_read. Both sides of a row (memarea's call and the raw call) reach the
// driver through it, so its own cost falls after the stamp and in neither side's figure.
//
// A bench tool, never installed and never linked: put its directory first on LD_LIBRARY_PATH.
// The real libcuda is MEMAREA_ENTRY_CLOCK_LIBCUDA (an absolute path) or the first of the usual
// places that holds one; a path that leads back to this library is refused.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

// The driver's ABI as far as this library touches it, spelled out rather than taken from
// cuda.h, whose macros rename cuGetProcAddress to _v2 (so it builds without the CUDA headers).
using CUresult = int;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
using CUdeviceptr = unsigned long long;
using CUstream = void*;
using cuuint64_t = std::uint64_t;

using get_proc_v2 = CUresult (*)(const char*, void**, int, cuuint64_t, int*);
using get_proc_v1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using memcpy_async_fn = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

struct real_driver {
  get_proc_v2 v2 = nullptr;
  get_proc_v1 v1 = nullptr;
};

std::once_flag g_load_once;
real_driver g_real;
/// The real cuMemcpyAsync behind the timed one (the first one handed out; another version's is
/// handed out as it is, unstamped, and the bench's count check then fails).
std::atomic<memcpy_async_fn> g_memcpy_async{nullptr};
std::atomic<std::uint64_t> g_calls{0};
std::atomic<std::int64_t> g_last_ns{0};

/// Whether `handle` is this library (a path that resolves back to it).
bool is_self(void* handle) { return dlsym(handle, "memarea_entry_clock_read") != nullptr; }

void* open_real() {
  if (const char* named = std::getenv("MEMAREA_ENTRY_CLOCK_LIBCUDA")) {
    if (named[0] != '/') return nullptr;  // a relative name would search the path: this library
    void* h = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (h && is_self(h)) return nullptr;
    return h;
  }
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
                           "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
                           "/usr/local/nvidia/lib64/libcuda.so.1"}) {
    if (void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      if (!is_self(h)) return h;
    }
  }
  return nullptr;
}

void load() {
  void* h = open_real();
  if (!h) {
    // The loader above us would only say that libcuda lacks its entry points: say why here.
    const char* why = dlerror();
    std::fprintf(stderr,
                 "memarea entry clock: no real libcuda.so.1 loaded (MEMAREA_ENTRY_CLOCK_LIBCUDA "
                 "must be an absolute path to it, not to this library; unset, the usual places "
                 "are tried): %s\n",
                 why ? why : "a relative path, this library itself, or none found");
    return;
  }
  g_real.v2 = reinterpret_cast<get_proc_v2>(dlsym(h, "cuGetProcAddress_v2"));
  g_real.v1 = reinterpret_cast<get_proc_v1>(dlsym(h, "cuGetProcAddress"));
}

const real_driver& real() {
  std::call_once(g_load_once, load);
  return g_real;
}

CUresult timed_memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  g_last_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(),
                  std::memory_order_relaxed);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return g_memcpy_async.load(std::memory_order_relaxed)(dst, src, n, s);
}

/// What the real cuGetProcAddress answered, with cuMemcpyAsync swapped for the timed one.
void swap_in(const char* symbol, void** fn) {
  if (!*fn || std::strcmp(symbol, "cuMemcpyAsync") != 0) return;
  auto real_fn = reinterpret_cast<memcpy_async_fn>(*fn);
  memcpy_async_fn expected = nullptr;
  if (g_memcpy_async.compare_exchange_strong(expected, real_fn) || expected == real_fn)
    *fn = reinterpret_cast<void*>(&timed_memcpy_async);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol,
                                                                    void** fn, int version,
                                                                    cuuint64_t flags,
                                                                    int* status) {
  const auto& r = real();
  if (!r.v2) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult res = r.v2(symbol, fn, version, flags, status);
  if (res == CUDA_SUCCESS && (!status || *status == CU_GET_PROC_ADDRESS_SUCCESS))
    swap_in(symbol, fn);
  return res;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** fn,
                                                                 int version, cuuint64_t flags) {
  const auto& r = real();
  if (!r.v1) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult res = r.v1(symbol, fn, version, flags);
  if (res == CUDA_SUCCESS) swap_in(symbol, fn);
  return res;
}

/// The number of timed cuMemcpyAsync calls so far and the steady clock's time (ns since its
/// epoch) at the entry of the last one.
__attribute__((visibility("default"))) void memarea_entry_clock_read(std::uint64_t* calls,
                                                                     std::int64_t* last_ns) {
  *last_ns = g_last_ns.load(std::memory_order_relaxed);
  *calls = g_calls.load(std::memory_order_relaxed);
}

}  // extern "C"
