// memarea — ownership: the one vocabulary of every type that owns memory (buffer, pool_buffer,
// ipc::mapping, managed::managed_buffer, host::host_buffer), as std::unique_ptr and RMM's
// device_buffer spell it: data(), size(), explicit operator bool, reset(), try_reset(), release().
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

#include <cstddef>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace memarea {

namespace detail {

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

/// Runs free(); a failure goes to the release-failure record (error.hpp) with ptr and size.
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

}  // namespace detail

/// Owns one piece of memory and gives it back through `Releaser`, a small copyable value that
/// knows where the memory came from (an area, a pool and stream, ...) and whose
/// `void free(void* ptr, std::size_t size) const` gives it back or throws memarea::error.
/// Move-only; every owning type of memarea is this template with its own releaser, so the
/// calls below mean the same on each of them.
///
/// Failures are never lost: try_reset() returns the status and keeps the memory, so that the
/// caller may try again; reset() and the destructor cannot throw, so a failure goes to the
/// release-failure record (take_release_failures, set_release_failure_handler in error.hpp)
/// and the owner lets go of the memory, which stays allocated until the user frees it by hand.
template <class Releaser>
class owner {
 public:
  /// Empty: owns nothing.
  owner() = default;
  /// Gives the memory back (reset()).
  ~owner() { reset(); }
  /// Takes o's memory; o ends empty.
  owner(owner&& o) noexcept
      : releaser_(o.releaser_),
        ptr_(std::exchange(o.ptr_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  /// Gives this owner's memory back (reset()), then takes o's; o ends empty. Moving an owner
  /// into itself changes nothing.
  owner& operator=(owner&& o) noexcept {
    if (this != &o) {
      reset();
      releaser_ = o.releaser_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  owner(const owner&) = delete;
  owner& operator=(const owner&) = delete;

  /// The memory (nullptr when empty).
  void* data() const noexcept { return ptr_; }
  /// Its size in bytes as the owning type defines it (0 when empty).
  std::size_t size() const noexcept { return size_; }
  /// True while memory is owned.
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

  /// Gives the memory back now and becomes empty; no-op when empty. It cannot throw: a failure
  /// (busy under ipc::free_policy::refuse, a pool piece freed behind the owner's back) goes to
  /// the release-failure record with data() and size(), and the owner lets go of the memory,
  /// which stays allocated.
  void reset() noexcept {
    if (!ptr_) return;
    detail::release_or_report(ptr_, size_, [&] { releaser_.free(ptr_, size_); });
    ptr_ = nullptr;
    size_ = 0;
  }
  /// Gives the memory back now and becomes empty; on failure returns the status (its message
  /// in *message when given), keeps owning the memory and changes nothing, so that the caller
  /// may try again. Success when empty.
  errc try_reset(std::string* message = nullptr) noexcept {
    if (!ptr_) return errc::success;
    const errc e = detail::try_release([&] { releaser_.free(ptr_, size_); }, message);
    if (e == errc::success) {
      ptr_ = nullptr;
      size_ = 0;
    }
    return e;
  }
  /// Gives up ownership and becomes empty: the caller frees the memory returned (how depends
  /// on the type: read size() and what the type's source is first).
  void* release() noexcept {
    size_ = 0;
    return std::exchange(ptr_, nullptr);
  }

 protected:
  /// Takes ownership of ptr, `size` bytes that `releaser` gives back.
  owner(void* ptr, std::size_t size, Releaser releaser) noexcept
      : releaser_(releaser), ptr_(ptr), size_(size) {}
  /// Where the memory goes back to.
  const Releaser& releaser() const noexcept { return releaser_; }

 private:
  [[no_unique_address]] Releaser releaser_{};
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace memarea

#pragma GCC visibility pop
