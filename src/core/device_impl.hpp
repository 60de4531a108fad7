// Devices' internals shared by core's rooms: what a device can do with managed and pageable
// memory (areas, host memory and managed memory all ask).
#pragma once

namespace memarea::detail {

/// What a device can do with managed and pageable memory; fixed for the life of the process.
struct device_caps {
  bool managed = false;     ///< managed memory can be allocated
  bool concurrent = false;  ///< concurrent managed access: prefetch is more than a hint
  bool pageable = false;    ///< the device reads pageable host memory (advice may name it)
};
/// The capabilities of `device`, read once and cached; invalid_device / no_device for a bad one.
device_caps device_capabilities(int device);

}  // namespace memarea::detail
