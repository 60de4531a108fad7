#include "driver/cuda/cuda_errors.hpp"

#include <cuda.h>

#include "driver/error_table.hpp"

namespace memarea::detail {

namespace {

// The rows are those of the one error table (driver/error_table.hpp) that name a CUDA code; the
// switch below has no default label, so -Wswitch (in -Wall, an error under -Werror) fails the
// build if a newer cuda.h adds a code the table lacks, and each name is checked against its
// value here.
#define MEMAREA_CU_CHECK_BOTH(status, name, value, hip_name, hip_value) \
  static_assert(static_cast<int>(name) == (value), #name " changed value in cuda.h");
#define MEMAREA_CU_CHECK(status, name, value) \
  static_assert(static_cast<int>(name) == (value), #name " changed value in cuda.h");
#define MEMAREA_CU_SKIP(...)
MEMAREA_VENDOR_ERRORS(MEMAREA_CU_CHECK_BOTH, MEMAREA_CU_CHECK, MEMAREA_CU_SKIP, MEMAREA_CU_SKIP)
#undef MEMAREA_CU_CHECK_BOTH
#undef MEMAREA_CU_CHECK

/// One row of the table.
struct cu_row {
  const char* name;
  errc code;
};

/// Looks a CUresult up; values outside CUresult's range are rejected before the cast, because
/// converting an out-of-range int to an unscoped enum without a fixed type is undefined.
cu_row lookup(int value) noexcept {
  constexpr cu_row unrecognized{"CUDA_ERROR_UNRECOGNIZED", errc::unknown};
  if (value < 0 || value > static_cast<int>(CUDA_ERROR_UNKNOWN)) return unrecognized;
  switch (static_cast<CUresult>(value)) {
#define MEMAREA_CU_CASE_BOTH(status, name, value, hip_name, hip_value) \
  case name:                                                           \
    return {#name, errc::status};
#define MEMAREA_CU_CASE(status, name, value) \
  case name:                                 \
    return {#name, errc::status};
    MEMAREA_VENDOR_ERRORS(MEMAREA_CU_CASE_BOTH, MEMAREA_CU_CASE, MEMAREA_CU_SKIP, MEMAREA_CU_SKIP)
#undef MEMAREA_CU_CASE_BOTH
#undef MEMAREA_CU_CASE
  }
  return unrecognized;
}
#undef MEMAREA_CU_SKIP

}  // namespace

errc map_cuda_error(int cu_result) noexcept { return lookup(cu_result).code; }

const char* cuda_error_name(int cu_result) noexcept { return lookup(cu_result).name; }

}  // namespace memarea::detail
