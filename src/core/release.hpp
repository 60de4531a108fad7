// How the owning types (buffer, pool_buffer, mapping, owned_allocation) free: try_reset
// reports the status and keeps the memory on failure; reset and the destructors let go of it
// and hand the failure to the release-failure record (memarea/error.hpp), never lose it.
#pragma once

#include <memarea/error.hpp>

#include <new>
#include <string>

namespace memarea::detail {

/// Runs free(); the status it ended with, and its message in *message when asked for.
template <class Free>
errc try_release(Free&& free, std::string* message) noexcept {
  auto say = [&](const char* m) {
    if (!message) return;
    try {
      *message = m;
    } catch (...) {
    }
  };
  try {
    free();
    return errc::success;
  } catch (const error& e) {
    say(e.message().c_str());
    return e.status();
  } catch (const std::bad_alloc&) {
    say("out of host memory");
    return errc::out_of_memory;
  } catch (const std::exception& e) {
    say(e.what());
    return errc::unknown;
  } catch (...) {
    say("an unknown exception");
    return errc::unknown;
  }
}

/// Runs free(); a failure goes to the release-failure record with ptr and size.
template <class Free>
void release_or_report(const void* ptr, std::size_t size, Free&& free) noexcept {
  try {
    free();
  } catch (const std::exception& e) {
    report_release_failure(ptr, size, e);
  } catch (...) {
    report_release_failure(ptr, size, std::runtime_error("an unknown exception"));
  }
}

}  // namespace memarea::detail
