// memarea — streams: in-order queues of work on one device.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>

namespace memarea {

/// An owning, move-only stream on one device (the C type memarea_stream_t underneath).
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
  /// The device the stream belongs to.
  int device() const noexcept;
  /// The C handle (valid while this object lives).
  memarea_stream_t get() const noexcept { return handle_; }
  /// The vendor's own stream underneath (CUstream on CUDA, hipStream_t on HIP, an opaque
  /// pointer on sim), like RMM's cuda_stream_view::value(): for queueing vendor calls or
  /// kernels in order with memarea's work on this stream. Valid while this object lives;
  /// memarea still owns it (never destroy it). nullptr once moved from.
  void* native_handle() const noexcept;

 private:
  memarea_stream_t handle_ = nullptr;
};

}  // namespace memarea
