// What the IPC bench (bench_ipc.cpp) and the child processes it starts (bench_ipc_roles.cpp)
// share: how a child is told its role, the exported buffers' size and contents, and the
// baseline's calls (raw_ipc).
#pragma once

#include "bench/src/bench.hpp"
#include "bench/src/raw_cudart.hpp"
#include "bench/src/raw_driver.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace memarea::cli::bench::ipc_case {

inline constexpr const char* kRoleEnv = "MEMAREA_BENCH_IPC_ROLE";
inline constexpr const char* kArgEnv = "MEMAREA_BENCH_IPC_ARG";
/// Each exported buffer is a whole 2 MiB page of the driver's. With 1 MiB buffers two of them
/// could share one, and the second import of such a pair costs the driver little (a tenth of
/// what a buffer on a page not yet mapped costs), so a cold row's two sides were not importing
/// alike.
inline constexpr std::size_t kBytes = std::size_t{2} << 20;
/// Bytes of each mapping compared with the pattern.
inline constexpr std::size_t kChecked = 4096;
/// The baseline's buffer i holds pattern(kRawBase + i): no two buffers of either side alike.
inline constexpr std::size_t kRawBase = std::size_t{1} << 32;
using clock_type = std::chrono::steady_clock;

/// Buffer i's first kChecked bytes.
std::vector<unsigned char> pattern(std::size_t i);

/// Whether the mapping at p holds buffer i's pattern (read back through `via`, untimed).
/// MEMAREA_BENCH_TEST_CORRUPT=1 (tests of the bench only) makes every check fail.
bool holds(const void* p, std::size_t i, const host_copy& via);
/// holds, read back through memarea::copy.
bool holds(const void* p, std::size_t i);

/// How long f takes (microseconds).
template <class F>
double time_us(F&& f) {
  const auto a = clock_type::now();
  f();
  return std::chrono::duration<double, std::micro>(clock_type::now() - a).count();
}

/// The baseline's IPC handle: the vendor's 64 bytes (cudaIpcMemHandle_t; the sim's payload).
struct raw_handle {
  unsigned char bytes[64];
  std::string hex() const {
    std::string h;
    for (unsigned char c : bytes) h += fmt::format("{:02x}", c);
    return h;
  }
  static raw_handle from_hex(const std::string& h) {
    if (h.size() != 128) throw error(errc::invalid_value, "bench ipc: a raw handle is 128 hex digits");
    raw_handle r;
    for (std::size_t i = 0; i < 64; ++i)
      r.bytes[i] = static_cast<unsigned char>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
    return r;
  }
};

/// What "the raw call" is on this backend: the CUDA runtime where the backend is CUDA and
/// libcudart loads, else the driver layer on a driver of its own (a table lookup on sim).
struct raw_ipc {
  const cudart_api* rt = nullptr;
  decltype(raw_driver()) gpu = nullptr;

  raw_ipc() {
#ifdef MEMAREA_HAVE_CUDA
    std::string why;
    if (backend_name() == "cuda") rt = raw_cudart(&why);
    if (backend_name() == "cuda" && !rt) std::cerr << "bench ipc: " << why << "\n";
    if (rt && rt->SetDevice(0) != 0) rt = nullptr;
#endif
    if (!rt) gpu = raw_driver();
  }
  bool available() const { return rt || gpu; }
  std::string name(const char* what) const {
    return rt ? fmt::format("cuda{} (runtime)", what) : raw_driver_name(what);
  }
  void* malloc(std::size_t n = kBytes) const {
    void* p = nullptr;
    if (rt) {
      if (rt->Malloc(&p, n) != 0) throw error(errc::out_of_memory, "raw cudaMalloc failed");
    } else {
      detail::check(gpu->malloc_device(0, n, &p), "raw malloc");
    }
    return p;
  }
  void free(void* p) const {
    if (rt) (void)rt->Free(p);
    else (void)gpu->free_device(p);
  }
  /// The baseline's own copies, for filling and checking its buffers.
  host_copy copier() const {
    if (rt)
      return [rt = rt](void* d, const void* s, std::size_t n) {
        if (rt->Memcpy(d, s, n, 4 /* cudaMemcpyDefault */) != 0)
          throw error(errc::unknown, "bench ipc: raw cudaMemcpy failed");
      };
    return [g = gpu](void* d, const void* s, std::size_t n) {
      detail::check(g->memcpy_async(d, s, n, 0, nullptr), "bench ipc: raw copy");
      detail::check(g->stream_synchronize(0, nullptr), "bench ipc: raw sync");
    };
  }
  raw_handle get_handle(void* p) const {
    raw_handle h;
    if (rt) {
      cudart_ipc_handle c;
      if (rt->IpcGetMemHandle(&c, p) != 0) throw error(errc::unknown, "raw get handle failed");
      std::memcpy(h.bytes, c.reserved, sizeof h.bytes);
    } else {
      detail::ipc_native_handle n;
      detail::check(gpu->ipc_get_handle(p, &n), "raw get handle");
      std::memcpy(h.bytes, n.bytes, sizeof h.bytes);
    }
    return h;
  }
  void* open(const raw_handle& h) const {
    void* p = nullptr;
    if (rt) {
      cudart_ipc_handle c;
      std::memcpy(c.reserved, h.bytes, sizeof c.reserved);
      if (rt->IpcOpenMemHandle(&p, c, 1 /* cudaIpcMemLazyEnablePeerAccess */) != 0)
        throw error(errc::unknown, "raw open failed");
    } else {
      detail::ipc_native_handle n;
      std::memcpy(n.bytes, h.bytes, sizeof n.bytes);
      detail::check(gpu->ipc_open_handle(0, n, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &p),
                    "raw open");
    }
    return p;
  }
  void close(void* p) const {
    if (rt) (void)rt->IpcCloseMemHandle(p);
    else (void)gpu->ipc_close_handle(p);
  }
};

}  // namespace memarea::cli::bench::ipc_case
