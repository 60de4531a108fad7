// Internals of inter-process sharing shared by src/core/ipc*.cpp, the C API and the bench (the
// tests' hooks and probes are testing/memarea_testing.hpp's). The IPC code is split by concept:
// ipc_wire (the handle's bytes), ipc_segment (the exporter's shared table), ipc_liveness (who is
// alive), ipc_exporter, ipc_importer, and ipc_lifecycle (the process's state, fork(), exit, the
// public calls); ipc_fd is shareable memory over file descriptors.
#pragma once

#include "core/ipc/ipc_wire.hpp"
#include "core/memory/device_uses.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace memarea::detail::ipc_internal {

/// Registry records that IPC inserts carry these as area_device and kNoAreaFlags as
/// area_flags, so no area's munmap matches them and free_record's hook refuses them.
constexpr int kImportedSentinel = -1000;           ///< a legacy IPC mapping
constexpr int kShareableSentinel = -1001;          ///< shareable memory created here
constexpr int kShareableImportedSentinel = -1002;  ///< shareable memory imported from an fd
constexpr unsigned kNoAreaFlags = 0xffffffffu;

/// Asks the background thread (starting it) to make this process's lease, IPC state and
/// segment, once per process: the first device allocation calls it, so that the first export
/// finds them made (making them takes about 100 us, more than the export itself).
void prepare_in_background() noexcept;

/// ipc::open of the C API's handle bytes (no copy into an ipc::handle on the way).
void* open_bytes(const unsigned char (&bytes)[128], int device, unsigned flags);

/// What memarea's background thread does for IPC every tick: tests the exporters' leases,
/// drops cached mappings of gone exporters and freed buffers, and finishes deferred frees
/// whose importers are gone.
void liveness_tick() noexcept;

/// Publishes this process's usage figures in its lease (ipc_publish.cpp): a task of the
/// background thread, registered with IPC's own; does nothing until the lease exists.
void publish_usage() noexcept;

/// What lookup() reports of IPC-imported memory: the buffer the exporter shared.
struct imported_buffer {
  void* base = nullptr;
  std::size_t size = 0;
  int device = 0;  ///< the exporter's device, where the memory lives
};
/// The buffer open now that holds p, inside the imported driver mapping at mapping_base (its
/// registry record's base); the whole mapping when no open buffer holds p; nullopt when
/// mapping_base is not an imported mapping.
std::optional<imported_buffer> imported_buffer_at(const void* mapping_base, const void* p);

/// What IPC holds in device's context, for a device reset: other processes' buffers open now
/// in mappings made on device, and memory of device freed while another process had it open,
/// still waiting for it to close (those whose importers are gone are finished first).
void device_uses(int device, detail::device_uses& out);
/// Closes the cached (closed) imports mapped on device: a reset would unmap them under the
/// cache.
void drop_device(int device);

}  // namespace memarea::detail::ipc_internal
