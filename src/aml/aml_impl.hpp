// Internals shared by libmemarea-aml's sources (src/aml): the AML code of a memarea status and
// the per-thread aml_errno.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>

namespace memarea::aml {

/// The calling thread's aml_errno (what memarea_aml_errno_location points at).
int& thread_errno() noexcept;

/// The AML error code (positive) of a memarea status, as AML's CUDA and HIP areas document
/// their errors. Unknown statuses are AML_FAILURE, never success (AML maps them to success).
int code_of(memarea_status s) noexcept;

/// Sets aml_errno to code_of(s) and returns NULL: the failure path of a pointer-returning call.
void* fail_null(memarea_status s) noexcept;
/// Sets aml_errno to code (positive) and returns NULL.
void* fail_null_code(int code) noexcept;

}  // namespace memarea::aml
