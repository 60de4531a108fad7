// Experiment (not part of the library; issue 13): what a process pays the driver to open another
// process's allocation, by its size and by how it was shared. The pool's IPC bench imports 100
// pieces of one 202 MiB block against 100 separate 2 MiB allocations; the one driver open of the
// block (legacy IPC) took 83-174 us medians there, against 40-49 us per 2 MiB. Would sharing the
// block through the driver's virtual memory management (a POSIX file descriptor from
// cuMemExportToShareableHandle, then import, reserve, map and set access) open it faster?
//
// Children are forked before anyone loads libcuda, each with one end of a socket pair. The
// parent then makes, on device 0, a 2 MiB and a 202 MiB allocation of each kind (cuMemAlloc, and
// cuMemCreate with POSIX file descriptor handles), plus one 2 MiB of each kind to warm the paths,
// fills each with its own 32-bit pattern, and sends every child the legacy handles (bytes) and
// the file descriptors (SCM_RIGHTS). Each child (cuInit, primary context, one allocation of its
// own) first opens the two warm-up allocations untimed, then opens the four others, timed, in an
// order that rotates from child to child, checks one word of each at its last 4 bytes, and prints
// the times. The parent prints min-median-max per case over the children.
// Build (CUDA headers only; libcuda is loaded at run time) and run:
//   g++ -std=c++20 -O2 -isystem /usr/local/cuda/include bench/experiments/vmm_import_cost.cpp
//       -ldl -o /tmp/vic && /tmp/vic [children=12]
#include "libcuda_dl.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*IpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*IpcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                        unsigned long long);
  CUresult (*MemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*,
                                          CUmemAllocationGranularity_flags);
  CUresult (*MemExportToShareableHandle)(void*, CUmemGenericAllocationHandle,
                                         CUmemAllocationHandleType, unsigned long long);
  CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*,
                                           CUmemAllocationHandleType);
  CUresult (*MemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                     unsigned long long);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
};

using libcuda_dl::load;
using libcuda_dl::ok;

api load_api() {
  void* lib = libcuda_dl::open();
  api a{};
  load(lib, a.Init, "cuInit");
  load(lib, a.DeviceGet, "cuDeviceGet");
  load(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(lib, a.CtxSetCurrent, "cuCtxSetCurrent");
  load(lib, a.MemAlloc, "cuMemAlloc_v2");
  load(lib, a.MemsetD32, "cuMemsetD32_v2");
  load(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2");
  load(lib, a.IpcGetMemHandle, "cuIpcGetMemHandle");
  load(lib, a.IpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
  load(lib, a.MemCreate, "cuMemCreate");
  load(lib, a.MemGetAllocationGranularity, "cuMemGetAllocationGranularity");
  load(lib, a.MemExportToShareableHandle, "cuMemExportToShareableHandle");
  load(lib, a.MemImportFromShareableHandle, "cuMemImportFromShareableHandle");
  load(lib, a.MemAddressReserve, "cuMemAddressReserve");
  load(lib, a.MemMap, "cuMemMap");
  load(lib, a.MemSetAccess, "cuMemSetAccess");
  return a;
}

constexpr std::size_t kSmall = std::size_t{2} << 20;
constexpr std::size_t kBig = std::size_t{202} << 20;
// Allocations, in message order: warm legacy, warm vmm, then the four timed cases.
constexpr int kCases = 4;
const char* const kCaseName[kCases] = {"legacy 2 MiB", "legacy 202 MiB", "vmm 2 MiB",
                                       "vmm 202 MiB"};
const std::size_t kCaseSize[kCases] = {kSmall, kBig, kSmall, kBig};
const bool kCaseVmm[kCases] = {false, false, true, true};
unsigned pattern(int i) { return 0xA5000000u + static_cast<unsigned>(i) * 0x010203u; }

struct message {
  CUipcMemHandle legacy[3];  // warm, 2 MiB, 202 MiB
};

CUmemAllocationProp vmm_prop() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

CUdeviceptr map_all(const api& cu, CUmemGenericAllocationHandle h, std::size_t n) {
  CUdeviceptr p = 0;
  ok(cu.MemAddressReserve(&p, n, 0, 0, 0), "cuMemAddressReserve");
  ok(cu.MemMap(p, n, 0, h, 0), "cuMemMap");
  CUmemAccessDesc d{};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ok(cu.MemSetAccess(p, n, &d, 1), "cuMemSetAccess");
  return p;
}

CUcontext ready(const api& cu) {
  ok(cu.Init(0), "cuInit");
  CUdevice d;
  ok(cu.DeviceGet(&d, 0), "cuDeviceGet");
  CUcontext c;
  ok(cu.DevicePrimaryCtxRetain(&c, d), "cuDevicePrimaryCtxRetain");
  ok(cu.CtxSetCurrent(c), "cuCtxSetCurrent");
  CUdeviceptr own;
  ok(cu.MemAlloc(&own, 1 << 20), "cuMemAlloc");
  return c;
}

void send_all(int sock, const message& m, const int (&fds)[3]) {
  iovec io{const_cast<message*>(&m), sizeof m};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr h{};
  h.msg_iov = &io;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (sendmsg(sock, &h, 0) != static_cast<ssize_t>(sizeof m)) {
    std::perror("sendmsg");
    std::exit(4);
  }
}

void receive_all(int sock, message* m, int (&fds)[3]) {
  iovec io{m, sizeof *m};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr h{};
  h.msg_iov = &io;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  if (recvmsg(sock, &h, MSG_WAITALL) != static_cast<ssize_t>(sizeof *m)) std::exit(5);
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof fds)) std::exit(6);
  std::memcpy(fds, CMSG_DATA(c), sizeof fds);
}

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

int child(int sock, int index) {
  message m{};
  int fds[3];
  receive_all(sock, &m, fds);
  const api cu = load_api();
  (void)ready(cu);
  // Warm both paths: the driver's IPC open and its VMM import, on allocations not timed.
  CUdeviceptr p;
  ok(cu.IpcOpenMemHandle(&p, m.legacy[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "warm open");
  CUmemGenericAllocationHandle h;
  ok(cu.MemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[0])),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
     "warm import");
  (void)map_all(cu, h, kSmall);
  double t[kCases] = {};
  double import_us[kCases] = {};
  for (int k = 0; k < kCases; ++k) {
    const int c = (k + index) % kCases;
    const auto t0 = std::chrono::steady_clock::now();
    CUdeviceptr q = 0;
    if (!kCaseVmm[c]) {
      ok(cu.IpcOpenMemHandle(&q, m.legacy[1 + c], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
         "cuIpcOpenMemHandle");
    } else {
      CUmemGenericAllocationHandle g;
      ok(cu.MemImportFromShareableHandle(
             &g, reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[c - 1])),
             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
         "cuMemImportFromShareableHandle");
      import_us[c] = us_since(t0);
      q = map_all(cu, g, kCaseSize[c]);
    }
    t[c] = us_since(t0);
    unsigned word = 0;
    ok(cu.MemcpyDtoH(&word, q + kCaseSize[c] - 4, 4), "cuMemcpyDtoH");
    if (word != pattern(2 + c)) {
      std::printf("wrong bytes in %s\n", kCaseName[c]);
      return 7;
    }
  }
  std::printf("%.2f %.2f %.2f %.2f %.2f %.2f\n", t[0], t[1], t[2], t[3], import_us[2],
              import_us[3]);
  return 0;
}

void summary(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%-34s %8.1f %8.1f %8.1f us (min median max, %zu processes)\n", name, v.front(),
              v[v.size() / 2], v.back(), v.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int children = argc > 1 ? std::atoi(argv[1]) : 12;
  std::vector<int> socks;
  std::vector<int> outs;
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    int sv[2], out[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(out) != 0) return 4;
    const pid_t pid = fork();
    if (pid == 0) {
      close(sv[0]);
      close(out[0]);
      dup2(out[1], 1);
      std::exit(child(sv[1], i));
    }
    close(sv[1]);
    close(out[1]);
    socks.push_back(sv[0]);
    outs.push_back(out[0]);
    pids.push_back(pid);
  }
  const api cu = load_api();
  (void)ready(cu);
  message m{};
  int fds[3];
  // Legacy: warm 2 MiB, 2 MiB, 202 MiB (patterns 0, 2, 3).
  const std::size_t legacy_size[3] = {kSmall, kSmall, kBig};
  const int legacy_pattern[3] = {0, 2, 3};
  for (int i = 0; i < 3; ++i) {
    CUdeviceptr p;
    ok(cu.MemAlloc(&p, legacy_size[i]), "cuMemAlloc");
    ok(cu.MemsetD32(p, pattern(legacy_pattern[i]), legacy_size[i] / 4), "cuMemsetD32");
    ok(cu.IpcGetMemHandle(&m.legacy[i], p), "cuIpcGetMemHandle");
  }
  // VMM: warm 2 MiB, 2 MiB, 202 MiB (patterns 1, 4, 5).
  const CUmemAllocationProp prop = vmm_prop();
  std::size_t gran = 0;
  ok(cu.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
     "cuMemGetAllocationGranularity");
  if (kBig % gran || kSmall % gran) {
    std::fprintf(stderr, "granularity %zu does not divide the sizes\n", gran);
    return 2;
  }
  const std::size_t vmm_size[3] = {kSmall, kSmall, kBig};
  const int vmm_pattern[3] = {1, 4, 5};
  for (int i = 0; i < 3; ++i) {
    CUmemGenericAllocationHandle h;
    ok(cu.MemCreate(&h, vmm_size[i], &prop, 0), "cuMemCreate");
    const CUdeviceptr p = map_all(cu, h, vmm_size[i]);
    ok(cu.MemsetD32(p, pattern(vmm_pattern[i]), vmm_size[i] / 4), "cuMemsetD32");
    ok(cu.MemExportToShareableHandle(&fds[i], h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       "cuMemExportToShareableHandle");
  }
  std::vector<double> t[kCases], imp[2];
  int failed = 0;
  for (int i = 0; i < children; ++i) {
    send_all(socks[i], m, fds);
    int status = 0;
    waitpid(pids[i], &status, 0);
    char line[256] = {};
    const ssize_t n = read(outs[i], line, sizeof line - 1);
    double a[6];
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n <= 0 ||
        std::sscanf(line, "%lf %lf %lf %lf %lf %lf", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5]) !=
            6) {
      std::printf("child %d failed (status %d): %s\n", i, status, line);
      ++failed;
      continue;
    }
    for (int c = 0; c < kCases; ++c) t[c].push_back(a[c]);
    imp[0].push_back(a[4]);
    imp[1].push_back(a[5]);
  }
  if (t[0].empty()) return 1;
  std::printf("first open of another process's allocation, after warming both paths:\n");
  for (int c = 0; c < kCases; ++c)
    summary((std::string(kCaseName[c]) + (kCaseVmm[c] ? " (import+map+access)" : "")).c_str(),
            t[c]);
  summary("vmm 2 MiB: the import alone", imp[0]);
  summary("vmm 202 MiB: the import alone", imp[1]);
  return failed ? 1 : 0;
}
