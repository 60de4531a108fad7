// Shared helpers of the white-box tests (tests/whitebox): the contract suite's helpers
// (api/common.hpp, api/process_util.hpp) and what reaches inside memarea: the testing
// interface's probes, a handle's wire fields and the exporter's segment behind it, and this
// process's lease.
#pragma once

#include "api/common.hpp"
#include "api/process_util.hpp"

#include "base/lease.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/ipc/ipc_wire.hpp"
#include "testing/memarea_testing.hpp"

#include <memarea/ipc.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace memarea::test {

/// Allocations memarea's registry holds now (what a test must leave as it found), not counting
/// other processes' memory that legacy IPC keeps mapped (the testing interface's).
inline std::size_t live_allocations() { return memarea::detail::testing::live_allocations(); }
/// Every registry record, legacy IPC mappings included (tests of IPC that control its cache).
inline std::size_t live_records() { return memarea::detail::testing::live_records(); }

/// The wire fields of a handle (core/ipc/ipc_wire.hpp).
inline memarea::detail::ipc_internal::wire wire_of(const ipc::handle& h) {
  memarea::detail::ipc_internal::wire w;
  std::memcpy(&w, h.bytes.data(), sizeof w);
  return w;
}

/// h with `change` applied to its fields and the checksum made right again (the checksum is
/// public: anyone can recompute it).
template <class Change>
ipc::handle forged(const ipc::handle& h, Change change) {
  memarea::detail::ipc_internal::wire w = wire_of(h);
  change(w);
  w.checksum = memarea::detail::ipc_internal::checksum(w);
  ipc::handle out;
  std::memcpy(out.bytes.data(), &w, sizeof w);
  return out;
}

/// The lease of the process that exported h (who made its objects).
inline std::uint64_t owner_of(const memarea::ipc::handle& h) { return wire_of(h).owner; }

/// The exporter's segment named by h, mapped read-write (any process of the same user can, which
/// is what the forged-segment tests play); nullptr if it cannot be opened. munmap it with
/// sizeof(segment).
inline memarea::detail::ipc_internal::segment* map_segment_of(const memarea::ipc::handle& h) {
  namespace wf = memarea::detail::ipc_internal;
  const wf::wire w = wire_of(h);
  const int fd = shm_open(wf::segment_name(w.owner, w.segment).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, sizeof(wf::segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<wf::segment*>(p);
}

/// This process's IPC segments in /dev/shm (0 or 1).
inline int own_segments() {
  return static_cast<int>(objects_of(memarea::detail::lease::current(), "ipc").size());
}

}  // namespace memarea::test
