// Mappings of files that another process can cut short. A MAP_SHARED mapping of a file in
// /dev/shm (an exporter's IPC segment, the sim's device memory) faults with SIGBUS where the
// file no longer reaches, and a process of the same user can ftruncate such a file at any time:
// without this guard it would kill the process that reads it, in the background thread too.
//
// A watched range is covered by a SIGBUS handler that memarea installs on the first watch: a
// fault inside it maps private zero pages over the rest of the range (the access then reads
// zeros and completes) and marks the range damaged, so that the next memarea call that needs it
// gives a clear error instead. A SIGBUS anywhere else goes to the handler that was installed
// before memarea's (the default action when there was none). A program that installs its own
// SIGBUS handler later replaces this one: it must chain to the one it replaced for the guard to
// keep working (docs/security.md).
#pragma once

#include <cstddef>

namespace memarea::detail::fault_guard {

/// Watches [p, p + len): a fault there no longer kills the process. Returns the watch's id, or
/// -1 when it cannot watch (no memory for the table, or the handler could not be installed);
/// callers then refuse to map what they cannot guard.
int watch(void* p, std::size_t len) noexcept;

/// Stops watching (before the range is unmapped); -1 is ignored.
void unwatch(int id) noexcept;

/// Whether a fault hit the watched range since it was watched (one atomic load); false for -1.
bool damaged(int id) noexcept;

}  // namespace memarea::detail::fault_guard
