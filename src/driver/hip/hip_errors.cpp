#include "driver/hip/hip_errors.hpp"

#include "driver/error_table.hpp"

namespace memarea::detail {

namespace {

/// One row of the table: a hipError_t value's name and memarea's status for it.
struct hip_error_row {
  const char* name;
  errc code;
};

/// The rows of the one error table (driver/error_table.hpp) that name a HIP code. By number, not
/// by the headers' enumerators: ROCm 6 added codes our 5.2 headers lack, and the table covers
/// both (tests/hip_errors_test.cpp checks it against the headers that are installed).
hip_error_row lookup(int code) noexcept {
  switch (code) {
#define MEMAREA_HIP_CASE_BOTH(status, cuda_name, cuda_value, name, value) \
  case value:                                                            \
    return {#name, errc::status};
#define MEMAREA_HIP_CASE(status, name, value) \
  case value:                                 \
    return {#name, errc::status};
#define MEMAREA_HIP_SKIP(...)
    MEMAREA_VENDOR_ERRORS(MEMAREA_HIP_CASE_BOTH, MEMAREA_HIP_SKIP, MEMAREA_HIP_CASE,
                          MEMAREA_HIP_SKIP)
#undef MEMAREA_HIP_CASE_BOTH
#undef MEMAREA_HIP_CASE
#undef MEMAREA_HIP_SKIP
    default:
      return {"hipErrorUnrecognized", errc::unknown};
  }
}

}  // namespace

errc map_hip_error(int code) noexcept { return lookup(code).code; }

const char* hip_error_name(int code) noexcept { return lookup(code).name; }

}  // namespace memarea::detail
