// The raw CUDA driver for the benches' baselines: memarea's loader, with no memarea in between.
#pragma once

#include <memarea/device.hpp>

#ifdef MEMAREA_HAVE_CUDA
#include "driver/cuda/cuda_api.hpp"
#endif

namespace memarea::cli {

#ifdef MEMAREA_HAVE_CUDA
/// The CUDA driver's entry points when the active backend is CUDA, else nullptr.
inline const detail::cuda::api* raw_cuda() {
  static detail::cuda::api table;
  static const bool ok = backend_name() == "cuda" && detail::cuda::load(&table).ok;
  return ok ? &table : nullptr;
}

/// Makes device's primary context current on the calling thread (raw baseline set-up).
inline bool raw_cuda_use_device(const detail::cuda::api& a, int device) {
  CUdevice dev;
  CUcontext ctx;
  if (a.DeviceGet(&dev, device) != CUDA_SUCCESS) return false;
  if (a.DevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return false;
  return a.CtxSetCurrent(ctx) == CUDA_SUCCESS;
}
#endif

}  // namespace memarea::cli
