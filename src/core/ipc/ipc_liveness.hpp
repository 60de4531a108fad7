// Whether the other side of an IPC mapping still lives. Every process that exports or imports
// holds a lease (base/lease.hpp); the kernel releases it when the process dies, however it dies,
// and it reads the same from every PID namespace that shares /dev/shm. No pid is trusted: a
// reused pid cannot pass for a dead process.
//
// When it is checked (never by scanning /dev/shm or /proc inside an export, import or close):
// - an importer's first import from an exporter reads the segment's flag of a clean exit only;
//   memarea's background thread (base/housekeeper.hpp) opens the exporter's lease at its next
//   tick and tests it every tick (50 ms); calls read the result, one atomic load. A handle of an
//   exporter killed before that tick is refused by the driver's open, after which the import
//   tests the lease for its message;
// - an exporter tests its importers' leases in the background thread while a deferred free
//   waits for them, and in the calls that must count them exactly (importers(), a free under
//   the refuse policy).
#pragma once

#include "core/ipc/ipc_segment.hpp"

#include <atomic>
#include <cstdint>

namespace memarea::detail::ipc_internal {

/// Frees b's importer slots whose process is gone (its lease unheld, missing, or no lease of
/// this user) and every slot after the first that names the same importer; returns how many
/// it freed. Opens each importer's lease (a few microseconds each): for the background thread,
/// exact counts and an importer that finds every slot taken.
std::uint32_t purge_gone_importers(buffer_slot& b) noexcept;

/// Frees every importer slot of b: for a buffer slot that exports nothing (id 0), where any
/// importer named is someone else's writing. Returns how many it freed.
std::uint32_t clear_importers(buffer_slot& b) noexcept;

/// An exporting process, as its importers watch it: its lease, kept open and tested by check().
class exporter_watch {
 public:
  /// Opens owner's lease and tests it once; gone() tells the result.
  explicit exporter_watch(std::uint64_t owner) noexcept;
  ~exporter_watch();
  exporter_watch(const exporter_watch&) = delete;
  exporter_watch& operator=(const exporter_watch&) = delete;

  /// Whether the exporter is known to be gone (one atomic load).
  bool gone() const noexcept { return gone_.load(std::memory_order_acquire); }
  /// Tests the lease again (one fcntl); returns gone().
  bool check() noexcept;

 private:
  int fd_ = -1;
  std::atomic<bool> gone_{false};
};

}  // namespace memarea::detail::ipc_internal
