// CUDA driver API error codes (CUresult) -> memarea::errc. Plain int API so that callers (core,
// tests) need not include cuda.h.
#pragma once

#include <memarea/error.hpp>

namespace memarea::detail {

/// memarea's status for a CUresult value. Every code of CUDA 13.0's cuda.h is mapped explicitly
/// to the closest errc; any other value (a newer driver's code, garbage) is errc::unknown, never
/// success.
memarea::errc map_cuda_error(int cu_result) noexcept;

/// The enumerator's identifier as text ("CUDA_ERROR_INVALID_VALUE"), from our own table because
/// cuGetErrorName needs the library. A static string; "CUDA_ERROR_UNRECOGNIZED" for values that
/// CUDA 13.0 does not define.
const char* cuda_error_name(int cu_result) noexcept;

}  // namespace memarea::detail
