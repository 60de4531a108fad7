#include "core/ipc/ipc_liveness.hpp"

#include "base/lease.hpp"

#include <unistd.h>

#include <cerrno>

namespace memarea::detail::ipc_internal {

namespace {

/// Whether owner's lease says nobody holds it: no lease of that name, or a file that is no
/// lease of this user (another user's, open to others, a link or a FIFO), which no importer of
/// ours can hold.
bool no_live_importer(std::uint64_t owner) noexcept {
  const int fd = lease::open(owner);
  if (fd == -ENOENT || fd == -EPERM || fd == -ELOOP) return true;
  if (fd < 0) return false;  // cannot tell (out of descriptors): kept
  const bool gone = lease::test(fd) == lease::holder::gone;
  ::close(fd);
  return gone;
}

}  // namespace

std::uint32_t purge_gone_importers(buffer_slot& b) noexcept {
  std::uint32_t freed = 0;
  for (std::uint32_t i = 0; i < kImporterSlots; ++i) {
    importer_slot& s = b.who[i];
    std::uint64_t owner = at(s.owner).load();
    if (owner == 0) continue;
    // An importer takes one slot of a buffer: a lease written into more is someone else's
    // writing, and holds no more than its first.
    bool duplicate = false;
    for (std::uint32_t j = 0; j < i && !duplicate; ++j) duplicate = at(b.who[j].owner).load() == owner;
    if (!duplicate && !no_live_importer(owner)) continue;
    // Only while the slot still names that importer: a new importer may have taken it since.
    if (at(s.owner).compare_exchange_strong(owner, 0)) ++freed;
  }
  return freed;
}

std::uint32_t clear_importers(buffer_slot& b) noexcept {
  std::uint32_t freed = 0;
  for (auto& s : b.who) {
    std::uint64_t owner = at(s.owner).load();
    if (owner != 0 && at(s.owner).compare_exchange_strong(owner, 0)) ++freed;
  }
  return freed;
}

exporter_watch::exporter_watch(std::uint64_t owner) noexcept : fd_(lease::open(owner)) {
  if (fd_ < 0) {
    // No lease of that name: its owner has gone (or never was). Another error (not ours to
    // read) leaves it unknown, which is treated as alive: the segment's own flag still tells a
    // clean exit.
    gone_.store(fd_ == -ENOENT);
    return;
  }
  (void)check();
}

exporter_watch::~exporter_watch() {
  if (fd_ >= 0) ::close(fd_);
}

bool exporter_watch::check() noexcept {
  if (fd_ >= 0 && !gone_.load() && lease::test(fd_) == lease::holder::gone)
    gone_.store(true, std::memory_order_release);
  return gone();
}

}  // namespace memarea::detail::ipc_internal
