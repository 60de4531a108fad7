// How every C entry point turns C++ exceptions into a status and a thread-local message.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <new>
#include <string>

namespace memarea::detail {

/// Records the calling thread's last error message.
void set_last_error(const std::string& message);
/// Clears it (the start of every call).
void clear_last_error();

/// Runs f; success, or the status of the memarea::error it threw (with its message kept).
template <class F>
memarea_status c_call(const char* fn, F&& f) noexcept {
  try {
    f();
    return MEMAREA_SUCCESS;
  } catch (const error& e) {
    set_last_error(std::string(fn) + ": " + e.message());
    return static_cast<memarea_status>(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(fn) + ": out of host memory");
    return MEMAREA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string(fn) + ": " + e.what());
    return MEMAREA_ERROR_UNKNOWN;
  } catch (...) {
    set_last_error(std::string(fn) + ": unknown exception");
    return MEMAREA_ERROR_UNKNOWN;
  }
}

/// Throws invalid_value when an output pointer is NULL.
inline void require(const void* p, const char* name) {
  if (!p) throw error(errc::invalid_value, std::string(name) + " is NULL");
}

}  // namespace memarea::detail
