// memarea — errors: one enumeration for every backend, a std::error_category and an exception.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace memarea {

/// Every status memarea reports; values equal the C API's memarea_status (MEMAREA_SUCCESS,
/// MEMAREA_ERROR_INVALID_VALUE, ...).
enum class errc : int {
  success = 0,
  invalid_value = 1,                ///< a bad argument (pointer, size, flags)
  invalid_device = 2,               ///< a device ordinal that does not exist or fits not
  out_of_memory = 3,                ///< the allocation did not fit
  not_supported = 4,                ///< the backend or device cannot do this
  no_device = 5,                    ///< no GPU backend has devices
  not_found = 6,                    ///< the pointer or object is not known
  busy = 7,                         ///< the memory is still in use (e.g. imported)
  peer_access_unsupported = 8,      ///< the device cannot reach that peer
  peer_access_already_enabled = 9,  ///< enable was called twice
  peer_access_not_enabled = 10,     ///< disable without enable
  too_many_peers = 11,              ///< the peer-connection budget is spent
  invalid_handle = 12,              ///< an IPC handle that is stale or garbage
  invalid_context = 13,             ///< the driver has no valid context for this
  not_permitted = 14,               ///< the operation is not permitted
  initialization = 15,              ///< the backend failed to initialise
  unknown = 16,                     ///< a driver error memarea does not know
};

/// The category of memarea::errc; its message() is the status name.
const std::error_category& memarea_category() noexcept;

/// Makes a std::error_code from a memarea::errc.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), memarea_category()};
}

/// The exception every C++ entry point throws: a code, the driver's own error name
/// (e.g. "CUDA_ERROR_OUT_OF_MEMORY", empty when memarea itself refused) and a message.
class error : public std::system_error {
 public:
  error(errc code, std::string message, std::string driver_error = {})
      : std::system_error(make_error_code(code), message),
        code_(code),
        driver_error_(std::move(driver_error)),
        message_(std::move(message)) {}

  /// The memarea status.
  errc status() const noexcept { return code_; }
  /// The vendor's name of the error that caused this one, or "" when memarea refused itself.
  const std::string& driver_error() const noexcept { return driver_error_; }
  /// The message without the status prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  errc code_;
  std::string driver_error_;
  std::string message_;
};

/// The status name, e.g. "MEMAREA_ERROR_INVALID_VALUE" (memarea_status_name's); the name of
/// unknown for a value that is none of the above.
const char* to_string(errc e) noexcept;

/// A failure that a destructor or reset() of an owning type (owner.hpp: buffer, pool_buffer,
/// mapping, managed_buffer, host_buffer) could not throw. The memory was not freed: it stays
/// allocated until the cause is gone and the user frees `ptr` by hand (area::munmap,
/// managed::free, ipc::close, pool::deallocate), for example a BUSY free under
/// free_policy::refuse. A stream the driver would not destroy comes with `ptr` its C handle,
/// still valid (c_interop.hpp's from_c makes a stream_view of it; memarea_stream_destroy
/// destroys it); the last scoped_access of a pair that could not disable access
/// comes with `ptr` null, the access still enabled (for peer::disable), and a device_guard that
/// could not make the previous device current again with `ptr` null, the guard's device still
/// current (for set_device).
struct release_failure {
  const void* ptr = nullptr;  ///< what was being freed or closed (null: no memory, see above)
  std::size_t size = 0;       ///< its size as the owner knew it (0 when the owner did not)
  errc status = errc::unknown;
  std::string message;        ///< the library's message, naming the call
};

/// Called with each release failure, on the thread that had it, instead of keeping it in the
/// list below; an empty function restores the list. It must not throw (a throw is dropped).
void set_release_failure_handler(std::function<void(const release_failure&)> handler);

/// The release failures kept since the last call, oldest first, and forgets them. At most
/// 1,024 are kept; `dropped`, when given, receives how many newer ones were counted instead.
std::vector<release_failure> take_release_failures(std::size_t* dropped = nullptr);

/// Reports a release failure as memarea's own owning types do: to the handler, else to the
/// list above. For libraries on top of memarea whose destructors free memarea memory and so
/// cannot throw. The status is e's when e is a memarea::error, else unknown; the message is
/// its text. Never throws.
void report_release_failure(const void* ptr, std::size_t size, const std::exception& e) noexcept;

}  // namespace memarea

template <>
struct std::is_error_code_enum<memarea::errc> : std::true_type {};

#pragma GCC visibility pop
