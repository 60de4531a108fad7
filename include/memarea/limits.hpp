// memarea — memory caps per device and out-of-memory handlers (docs/usage.md, "Limits and
// out-of-memory handlers").
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace memarea {

/// Why an allocation was refused (the C API's MEMAREA_OOM_* values).
enum class oom_reason : int {
  limit = 0,   ///< it would take the device's reserved bytes past the cap set on it
  driver = 1,  ///< the driver answered OUT_OF_MEMORY
};

/// What an out-of-memory handler is told.
struct oom_info {
  int device = 0;                          ///< the device whose memory was asked for
  std::size_t bytes = 0;                   ///< the bytes asked of the driver
  oom_reason reason = oom_reason::limit;   ///< cap or driver
  std::size_t limit = 0;                   ///< the device's cap (0: none)
  std::size_t reserved = 0;                ///< the device's reserved bytes when it was refused
};

/// Caps what this process reserves (takes from the driver) on device at `bytes`; 0 removes the
/// cap. device: an ordinal, or -1 for the calling thread's current device.
/// @throws error invalid_device for any other device.
void set_memory_limit(int device, std::size_t bytes);

/// The cap of device (0: none); device as set_memory_limit. @throws error invalid_device.
std::size_t memory_limit(int device);

/// A handler: may free memory; returns true to have the allocation retried once.
using oom_handler = std::function<bool(const oom_info&)>;

/// Identifies an added handler; 0 is never one.
using oom_handler_id = std::uint64_t;

/// Adds a handler, run after the device's pools were trimmed and the allocation still failed,
/// in the order added. A handler that throws ends the handlers: the exception is caught, its
/// text added to the message, and the allocation fails with out_of_memory.
/// @throws error invalid_value for an empty function.
oom_handler_id add_oom_handler(oom_handler handler);

/// Removes a handler; a call already running in another thread finishes.
/// @throws error invalid_value for an id that names no handler.
void remove_oom_handler(oom_handler_id id);

/// A handler that is removed when this goes.
class scoped_oom_handler {
 public:
  /// Adds handler (as add_oom_handler).
  explicit scoped_oom_handler(oom_handler handler) : id_(add_oom_handler(std::move(handler))) {}
  scoped_oom_handler(const scoped_oom_handler&) = delete;
  scoped_oom_handler& operator=(const scoped_oom_handler&) = delete;
  ~scoped_oom_handler() {
    try {
      remove_oom_handler(id_);
    } catch (...) {  // already removed by id: nothing left to do
    }
  }
  /// The handler's id.
  oom_handler_id id() const noexcept { return id_; }

 private:
  oom_handler_id id_;
};

}  // namespace memarea

#pragma GCC visibility pop
