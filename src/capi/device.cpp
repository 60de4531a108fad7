// The C API of device-wide operations beyond the basics in capi.cpp: the device reset.
#include "capi/c_call.hpp"

#include <memarea/device.hpp>
#include <memarea/memarea.h>

using memarea::detail::c_call;

extern "C" {

memarea_status memarea_device_reset(int device) {
  return c_call(__func__, [&] { memarea::device_reset(device); });
}

}  // extern "C"
