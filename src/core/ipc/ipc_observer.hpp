// IPC as the registry's observer of frees and lookups (core/memory/memory_observer.hpp): the
// rooms below IPC tell it of frees through the registry, never by calling IPC.
#pragma once

namespace memarea::detail::ipc_internal {

/// Sets IPC as the registry's observer (once; later calls do nothing): called when IPC makes
/// its state, and before it records memory of its own (shareable memory), which only IPC's
/// own calls may free. Not under a lock of memarea's (it may make the registry).
void observe_memory() noexcept;
/// IPC's observer: the owner of the registry records of other processes' memory it mapped, so
/// that lookup() asks it about them (and only them).
const void* observer_tag() noexcept;

}  // namespace memarea::detail::ipc_internal
