// A device reset (docs/areas.md, "Resetting a device"): memarea refuses while anything of its
// own lives in the device's context; otherwise it lets go of what it caches there, ends peer
// access to and from the device, gives its pools' blocks back, and has the driver destroy the
// context, which is made anew at its next use. A room above the rooms it reaches (memory, pool,
// ipc, peer, copy): each of them offers the check and the release it needs, and none of them
// knows of this one.
#include "core/copy/copy_impl.hpp"
#include "core/ipc/ipc_impl.hpp"
#include "core/memory/device_uses.hpp"
#include "core/memory/registry.hpp"
#include "core/peer/peer_impl.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/device.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <string>

namespace memarea {
namespace detail {
namespace {

/// The registry's allocations in device's context, which their owners must free: area and
/// managed memory (device, pinned, mapped, registered: each lives in the context that made it,
/// pinned memory made portable included) and shareable memory. Pool blocks are their pools'
/// (pool_device_uses reports the pieces), imported mappings IPC's, pageable host memory no
/// device's.
void allocation_uses(int device, device_uses& out) {
  const auto live = allocations().select([device](const record& r) {
    return r.context_device == device && r.kind != MEMAREA_MEMORY_HOST &&
           r.made_by != origin::pool && r.area_device != ipc_internal::kImportedSentinel;
  });
  for (const record& r : live)
    out.add([&] {
      return fmt::format("{} memory at {} ({} bytes)",
                         to_string(static_cast<memory_kind>(r.kind)), r.base, r.requested);
    });
}

[[noreturn]] void refuse(int device, const device_uses& uses) {
  std::string list;
  for (const std::string& s : uses.shown()) {
    if (!list.empty()) list += "; ";
    list += s;
  }
  if (uses.count() > uses.shown().size())
    list += fmt::format("; and {} more", uses.count() - uses.shown().size());
  throw error(errc::busy,
              fmt::format("device_reset: device {} is in use: memarea holds {} allocation{} or "
                          "object{} in its context ({}); free them first",
                          device, uses.count(), uses.count() == 1 ? "" : "s",
                          uses.count() == 1 ? "" : "s", list));
}

[[noreturn]] void refuse_objects(int device, long streams, long events) {
  throw error(errc::busy,
              fmt::format("device_reset: device {} is in use: {} stream{} and {} event{} made "
                          "through memarea live on it, which the reset would destroy under "
                          "their owners; destroy them first",
                          device, streams, streams == 1 ? "" : "s", events,
                          events == 1 ? "" : "s"));
}

}  // namespace
}  // namespace detail

void device_reset(int device) {
  auto& sys = detail::system::get();
  if (device == -1) device = detail::current_device();
  sys.check_device(device, "device_reset");

  // 1. What the caller holds there (allocations, pieces, peer scopes, streams, events): refused,
  // and nothing changed but threads' pool caches flushed and IPC's finished frees (what the
  // background thread does anyway).
  // IPC first: frees that waited for importers now gone finish there, pool pieces included.
  detail::device_uses uses;
  detail::ipc_internal::device_uses(device, uses);
  detail::allocation_uses(device, uses);
  detail::pool_device_uses(device, uses);
  detail::peer_device_uses(device, uses);
  if (!uses.empty()) detail::refuse(device, uses);
  const auto user = detail::user_objects_on(device);
  if (user.streams > 0 || user.events > 0) detail::refuse_objects(device, user.streams, user.events);

  // 2. memarea's caches of the device's driver objects: staging buffers, closed IPC mappings,
  // pools' events. Then every stream and event the driver front still counts is someone's
  // (a sim native stream made for a test, one made while this reset ran): refused as above.
  detail::drop_staging(device);
  detail::ipc_internal::drop_device(device);
  detail::pool_forget_device_events(device);
  auto& gpu = sys.gpu();
  const long streams = gpu.live_streams(device), events = gpu.live_events(device);
  if (streams > 0 || events > 0) detail::refuse_objects(device, streams, events);

  // 3. Peer access to and from the device, then the pools' blocks, then the context.
  detail::peer_disable_device(device);
  detail::pool_release_device(device);
  detail::check(gpu.device_reset(device),
                [&] { return fmt::format("device_reset: the driver's reset of device {}", device); });
}

}  // namespace memarea
