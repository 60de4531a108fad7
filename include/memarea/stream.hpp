// memarea — streams: in-order queues of work on one device; `stream` owns one, `stream_view`
// names one (or the default stream) in every stream-ordered call.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

namespace memarea {

namespace detail {
/// What a stream is inside memarea (opaque here).
struct stream_object;
/// The C interop's access to handles (memarea/c_interop.hpp).
struct handle_access;
}  // namespace detail

/// An owning, move-only stream on one device.
class stream {
 public:
  /// Creates a stream on `device` (-1: the calling thread's current device).
  explicit stream(int device = -1);
  ~stream();
  stream(stream&& other) noexcept;
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// Waits until all work queued so far has completed.
  void synchronize() const;
  /// The device the stream belongs to (-1 once moved from).
  int device() const noexcept;
  /// The vendor's own stream underneath (CUstream on CUDA, hipStream_t on HIP, an opaque
  /// pointer on sim), like RMM's cuda_stream_view::value(): for queueing vendor calls or
  /// kernels in order with memarea's work on this stream. Valid while this object lives;
  /// memarea still owns it (never destroy it). nullptr once moved from.
  void* native_handle() const noexcept;
  /// True until moved from.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  friend class stream_view;
  detail::stream_object* handle_ = nullptr;
};

/// A non-owning view of a stream, as RMM's cuda_stream_view: what every stream-ordered call
/// takes. Trivially copyable (one pointer): pass it by value. Default-constructed, it is the
/// default stream of the device each call picks (the pointer's device for a copy, the pool's
/// device for a pool, the calling thread's current device otherwise). A `memarea::stream`
/// converts to it implicitly; the view is valid while that stream lives. A stream of the C API
/// converts through memarea/c_interop.hpp (from_c).
class stream_view {
 public:
  /// The default stream.
  constexpr stream_view() noexcept = default;
  /// A view of s (the default stream once s is moved from).
  stream_view(const stream& s) noexcept : handle_(s.handle_) {}  // NOLINT: implicit by design

  /// True for the default stream.
  constexpr bool is_default() const noexcept { return handle_ == nullptr; }
  /// The device of the stream; -1 for the default stream (the call decides).
  int device() const noexcept;
  /// The vendor's stream underneath (stream::native_handle); nullptr for the default stream.
  void* native_handle() const noexcept;
  /// Waits until all work queued on the stream so far has completed (the default stream: of
  /// the calling thread's current device).
  void synchronize() const;
  /// Views of one stream are equal.
  friend constexpr bool operator==(stream_view, stream_view) noexcept = default;

 private:
  friend struct detail::handle_access;
  constexpr explicit stream_view(detail::stream_object* h) noexcept : handle_(h) {}
  detail::stream_object* handle_ = nullptr;
};

}  // namespace memarea

#pragma GCC visibility pop
