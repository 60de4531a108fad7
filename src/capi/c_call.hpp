// How every C entry point turns C++ exceptions into a status and a thread-local message.
#pragma once

#include <memarea/c_call.hpp>
#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <cstring>
#include <new>
#include <string>
#include <utility>

/// The object behind memarea_area_t: an area's value.
struct memarea_area {
  int device;
  unsigned flags;
  memarea_pool_t pool = nullptr;  ///< memarea_area_create_pooled: mmap and munmap go to it
};

namespace memarea::detail {

/// Runs f; success, or the status of what it threw, with "fn: <its message>" kept as the
/// thread's message (the public helper add-ons use too, <memarea/c_call.hpp>).
template <class F>
memarea_status c_call(const char* fn, F&& f) noexcept {
  return memarea::c_call(fn, std::forward<F>(f));
}

/// c_call for the hot paths (an import hit, export, lookup, copies: there the C API should cost
/// no more than a few nanoseconds over C++). Success runs f in the caller's frame; only a
/// failure leaves it, for the out-of-line c_status_of_exception.
template <class F>
[[gnu::always_inline]] inline memarea_status c_call_hot(const char* fn, F&& f) noexcept {
  try {
    f();
    return MEMAREA_SUCCESS;
  } catch (...) {
    return memarea::c_status_of_exception(fn);
  }
}

/// The integer a C caller passed for an enum parameter. C may pass any int; reading it as the
/// enum type when it is out of range is undefined in C++, so it is read through its bytes.
template <class E>
int enum_bits(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// Throws invalid_value unless lo <= v <= hi (an enum value a C caller passed).
inline void require_enum(int v, int lo, int hi, const char* name) {
  if (v < lo || v > hi)
    throw error(errc::invalid_value, std::string(name) + " " + std::to_string(v) +
                                         " is not a valid value");
}

/// Throws invalid_value when an output pointer is NULL.
inline void require(const void* p, const char* name) {
  if (!p) throw error(errc::invalid_value, std::string(name) + " is NULL");
}

}  // namespace memarea::detail
