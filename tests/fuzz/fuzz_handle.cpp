// libFuzzer harness: IPC handles from another process. Each input is either 128 raw bytes, or
// (first byte odd) a list of field edits applied to a real handle of this process or of an
// exporting child, with the checksum recomputed (an attacker can). Every open must return a
// pointer inside the real allocation, or fail with a memarea status; nothing may crash, and
// every open is closed.
#include "core/ipc/ipc_impl.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/pointer.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

namespace wf = memarea::detail::ipc_internal;
constexpr std::size_t kBytes = 3 * 4096 + 100;

struct real_buffer {
  memarea::ipc::handle handle;
  const char* base = nullptr;  ///< where this process sees it (the child's: after an open)
};
real_buffer g_own, g_foreign;
memarea::buffer* g_own_memory = nullptr;

/// A child that exports a buffer, prints its handle and lives as long as the fuzzer.
memarea::ipc::handle start_exporter() {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(fds[0]);
    memarea::area a(0);
    void* p = a.mmap(kBytes);
    const auto h = memarea::ipc::export_handle(p);
    if (write(fds[1], h.bytes.data(), h.bytes.size()) != 128) _exit(1);
    for (;;) pause();
  }
  close(fds[1]);
  memarea::ipc::handle h;
  std::size_t got = 0;
  while (got < 128) {
    const ssize_t n = read(fds[0], h.bytes.data() + got, 128 - got);
    if (n <= 0) std::abort();
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  return h;
}

void try_open(const memarea::ipc::handle& h) {
  void* p = nullptr;
  try {
    p = memarea::ipc::open(h);
  } catch (const memarea::error&) {
    return;
  }
  // Whatever opened must lie inside one of the two real allocations as this process maps them.
  const auto info = memarea::lookup(p);
  const char* c = static_cast<const char*>(p);
  const char* b = static_cast<const char*>(info.base);
  if (!info.base || c < b || c >= b + info.size || info.size > kBytes + (std::size_t{2} << 20)) {
    std::fprintf(stderr, "open returned %p outside its mapping (base %p, size %zu)\n", p,
                 info.base, info.size);
    std::abort();
  }
  unsigned char byte = 0;
  memarea::copy(&byte, p, 1);  // readable
  memarea::ipc::close(p);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("MEMAREA_BACKEND", "sim", 1);
  setenv("MEMAREA_SIM_DEVICES", "2", 1);
  g_foreign.handle = start_exporter();
  g_own_memory = new memarea::buffer(memarea::area(0).allocate(kBytes));
  g_own.handle = memarea::ipc::export_handle(g_own_memory->data());
  memarea::ipc::set_cache_limit(2);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 1) == 0) {
    memarea::ipc::handle h;
    std::memset(h.bytes.data(), 0, h.bytes.size());
    std::memcpy(h.bytes.data(), data + 1, std::min<std::size_t>(size - 1, 128));
    try_open(h);
    return 0;
  }
  // Field edits on a real handle: (field, 8 bytes) pairs.
  const real_buffer& real = (data[0] & 2) ? g_foreign : g_own;
  wf::wire w;
  std::memcpy(&w, real.handle.bytes.data(), sizeof w);
  for (std::size_t i = 1; i + 9 <= size; i += 9) {
    std::uint64_t v;
    std::memcpy(&v, data + i + 1, 8);
    switch (data[i] % 10) {
      case 0: w.offset = v; break;
      case 1: w.owner = v; break;
      case 2: w.buffer_id = v; break;
      case 3: w.slot = static_cast<std::uint32_t>(v); break;
      case 4: w.pid = static_cast<std::int32_t>(v); break;
      case 5: w.segment = v; break;
      case 6: std::memcpy(w.native + (v % 57), &v, 8); break;
      case 7: w.device = static_cast<std::int32_t>(v); break;
      case 8: w.version = static_cast<std::uint16_t>(v); break;
      case 9: {  // the other real handle's driver handle
        const real_buffer& other = (&real == &g_own) ? g_foreign : g_own;
        std::memcpy(w.native, other.handle.bytes.data() + offsetof(wf::wire, native), 64);
        break;
      }
    }
  }
  if ((data[0] & 4) == 0) w.checksum = wf::checksum(w);
  memarea::ipc::handle h;
  std::memcpy(h.bytes.data(), &w, sizeof w);
  try_open(h);
  return 0;
}
