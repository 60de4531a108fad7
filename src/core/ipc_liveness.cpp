#include "core/ipc_liveness.hpp"

#include "base/lease.hpp"

#include <unistd.h>

#include <cerrno>

namespace memarea::detail::ipc_internal {

std::uint32_t purge_gone_importers(buffer_slot& b) noexcept {
  std::uint32_t freed = 0;
  for (auto& s : b.who) {
    std::uint64_t owner = at(s.owner).load();
    if (owner == 0 || lease::test_owner(owner) != lease::holder::gone) continue;
    // Only while the slot still names that importer: a new importer may have taken it since.
    if (at(s.owner).compare_exchange_strong(owner, 0)) ++freed;
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
