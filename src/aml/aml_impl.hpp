// Internals shared by libmemarea-aml's sources (src/aml): the AML code of a memarea status and
// the per-thread aml_errno. A call of memarea's C++ API reports a failure through memarea::c_call
// (<memarea/c_call.hpp>), as memarea's own C calls do. libmemarea-aml uses memarea's public API
// only (include/memarea), as any program would.
#pragma once

#include <memarea/c_call.hpp>
#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <cstring>

struct aml_area_data;

namespace memarea::aml {

/// The calling thread's aml_errno (what memarea_aml_errno_location points at).
int& thread_errno() noexcept;

/// The AML error code (positive) of a memarea status, as AML's CUDA and HIP areas document
/// their errors. Unknown statuses are AML_FAILURE, never success (AML maps them to success).
int code_of(memarea_status s) noexcept;

/// Sets aml_errno to code_of(s) and returns NULL: the failure path of a pointer-returning call.
/// memarea's message for the failure (memarea_last_error_message) becomes the reason that
/// aml_strerror and aml_perror add to the code's text.
void* fail_null(memarea_status s) noexcept;
/// As fail_null, for an int call: returns -code_of(s).
int fail_status(memarea_status s) noexcept;
/// Sets aml_errno to code (positive) and returns NULL: a failure AML judged itself, so no
/// reason of memarea's goes with it (an earlier one is dropped).
void* fail_null_code(int code) noexcept;
/// As fail_null_code, for an int call: returns -code.
int fail_code(int code) noexcept;

/// The integer a C caller stored in an enum. C may store any int; reading it as the enum type
/// when it is out of range is undefined in C++, so it is read through its bytes.
template <class E>
int enum_bits(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// Whether a pool of pageable host memory places pages as AML's linux area with this data
/// does (src/aml/linux_area.cpp reads it): the DEFAULT policy (*node -1), or BIND to exactly one
/// node (*node). False for other policies, several nodes, or data the area would refuse.
bool linux_area_pool_node(const struct aml_area_data* data, int* node) noexcept;

}  // namespace memarea::aml
