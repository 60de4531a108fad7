// HIP error codes -> memarea::errc. Plain int API so that callers (core, tests) need no HIP headers.
#pragma once

#include <memarea/error.hpp>

namespace memarea::detail {

/// memarea's status for a hipError_t value. Every code of ROCm 5.2's hip_runtime_api.h, plus the
/// codes ROCm 6 added, is mapped explicitly; any other value is errc::unknown, never success.
memarea::errc map_hip_error(int code) noexcept;

/// The enumerator's name ("hipErrorInvalidValue"); for codes with two names (deprecated aliases)
/// the current one. A static string; "hipErrorUnrecognized" for values HIP does not define.
const char* hip_error_name(int code) noexcept;

}  // namespace memarea::detail
