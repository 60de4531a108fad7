// memarea — events: markers in a stream's work, for ordering work across streams (one stream
// waits for another's event), for asking whether work has completed, and for timing it, as
// CUDA's and HIP's events. docs/streams.md.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>
#include <memarea/stream.hpp>

namespace memarea {

namespace detail {
/// What an event is inside memarea (opaque here).
struct event_object;
}  // namespace detail

/// How an event is made (the C API's MEMAREA_EVENT_*, CUDA's CU_EVENT_* values).
enum class event_flags : unsigned {
  none = 0,            ///< timed; a host thread waiting for it may spin
  blocking_sync = 1,   ///< a host thread waiting for it blocks instead of spinning
  disable_timing = 2,  ///< keeps no time (cheaper to record); elapsed_ms refuses it
  interprocess = 4,    ///< for other processes: not supported (memarea shares no events)
};
/// Both sets of flags.
constexpr event_flags operator|(event_flags a, event_flags b) noexcept {
  return static_cast<event_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

/// An owning, move-only event of one device.
class event {
 public:
  /// An event on `device` (-1: the calling thread's current device).
  /// @throws error invalid_device for a device that does not exist; invalid_value for unknown
  /// flags; not_supported for event_flags::interprocess.
  explicit event(int device = -1, event_flags flags = event_flags::none);
  ~event();
  event(event&& other) noexcept;
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Captures the work queued on s so far (the default view: the default stream of the event's
  /// device); a later record replaces the capture. @throws error invalid_value for a stream of
  /// another device.
  void record(stream_view s = {});
  /// True once the work of the latest record has completed (or the event was never recorded).
  /// Never blocks.
  bool query() const;
  /// Waits until the work of the latest record has completed.
  void synchronize() const;
  /// The event's device (-1 once moved from).
  int device() const noexcept;
  /// The vendor's event underneath (CUevent, hipEvent_t; an opaque pointer on sim): valid while
  /// this object lives, still memarea's. nullptr once moved from.
  void* native_handle() const noexcept;
  /// True until moved from.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  friend class stream_view;
  friend struct detail::handle_access;
  friend float elapsed_ms(const event& start, const event& end);
  detail::event_object* handle_ = nullptr;
};

/// Milliseconds between the latest records of start and end, both complete (cudaEventElapsedTime).
/// @throws error invalid_handle when either was made with event_flags::disable_timing or was
/// never recorded; busy while either record's work has not completed.
float elapsed_ms(const event& start, const event& end);

}  // namespace memarea

#pragma GCC visibility pop
