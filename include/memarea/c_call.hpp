// memarea — C functions over C++ code: the status and this thread's last-error message of an
// exception, as memarea's own C API reports a failure. For libraries built on memarea whose C
// functions return memarea_status (libmemarea-aml and libmemarea_mpi use it; docs/addons.md).
// Like c_interop.hpp it meets the C API, so it includes memarea.h; header-only, over the public
// memarea_set_last_error.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <exception>
#include <new>
#include <string>
#include <utility>

namespace memarea {

/// Makes "fn: message" the calling thread's memarea_last_error_message() (message alone when
/// fn is NULL; NULL message: "") and returns status, unchanged. Out of host memory for the
/// text, the message is fn alone.
inline memarea_status c_report(const char* fn, memarea_status status,
                               const char* message) noexcept {
  try {
    std::string text = fn ? std::string(fn) + ": " : std::string();
    text += message ? message : "";
    return memarea_set_last_error(status, text.c_str());
  } catch (...) {
    return memarea_set_last_error(status, fn);
  }
}

/// The status of the exception being handled, with c_report(fn, status, why) as the message:
/// a memarea::error gives its status and message(); std::bad_alloc OUT_OF_MEMORY, "out of host
/// memory"; another std::exception UNKNOWN and its what(); anything else UNKNOWN, "unknown
/// exception". Call it inside a catch handler (`catch (...) { return
/// memarea::c_status_of_exception("my_call"); }`); with no exception being handled it returns
/// MEMAREA_SUCCESS and leaves the message as it was. Out of line and cold: it is a failure path.
[[gnu::cold, gnu::noinline]] inline memarea_status c_status_of_exception(const char* fn) noexcept {
  if (!std::current_exception()) return MEMAREA_SUCCESS;
  try {
    throw;
  } catch (const error& e) {
    return c_report(fn, static_cast<memarea_status>(e.status()), e.message().c_str());
  } catch (const std::bad_alloc&) {
    return c_report(fn, MEMAREA_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return c_report(fn, MEMAREA_ERROR_UNKNOWN, e.what());
  } catch (...) {
    return c_report(fn, MEMAREA_ERROR_UNKNOWN, "unknown exception");
  }
}

/// Runs f(): MEMAREA_SUCCESS when it returns (the message left as it was), else
/// c_status_of_exception(fn) for what it threw. The body of a C function over C++ code:
/// `return memarea::c_call(__func__, [&] { ... });`. Costs nothing over f() when f succeeds.
template <class F>
memarea_status c_call(const char* fn, F&& f) noexcept {
  try {
    std::forward<F>(f)();
    return MEMAREA_SUCCESS;
  } catch (...) {
    return c_status_of_exception(fn);
  }
}

}  // namespace memarea

#pragma GCC visibility pop
