// memarea — streams: in-order queues of work on one device; `stream` owns one, `stream_view`
// names one (or the default stream) in every stream-ordered call, including native streams
// made outside memarea (stream_view::wrap). Events: memarea/event.hpp. docs/streams.md.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

namespace memarea {

class event;

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
  /// True once all work queued so far has completed; never blocks.
  bool query() const;
  /// Makes work queued from now on wait for e's latest record (stream_view::wait).
  void wait(const event& e) const;
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
/// converts to it implicitly; the view is valid while that stream lives. A native stream made
/// outside memarea (by PyTorch, CuPy, NCCL, the vendor's API) is viewed through wrap(). A
/// stream of the C API converts through memarea/c_interop.hpp (from_c).
class stream_view {
 public:
  /// The default stream.
  constexpr stream_view() noexcept = default;
  /// A view of s (the default stream once s is moved from).
  stream_view(const stream& s) noexcept : handle_(s.handle_) {}  // NOLINT: implicit by design

  /// A view of `native`, a stream of `device` (-1: the calling thread's current device) made
  /// outside memarea: a CUstream or cudaStream_t,
  /// a hipStream_t, torch.cuda.Stream's cuda_stream, CuPy's Stream.ptr; on sim, what
  /// memarea::sim::create_native_stream gives. nullptr and (void*)1 (CU_STREAM_LEGACY) name
  /// device's legacy default stream; (void*)2 (CU_STREAM_PER_THREAD, hipStreamPerThread) the
  /// calling thread's per-thread default stream (per_thread()). Every stream-ordered call takes
  /// the view and queues on `native`. memarea never destroys it, and the view needs no release:
  /// it stays valid for the life of the process, and wrapping the same native stream again
  /// gives an equal view, which pools take for the same stream. The native stream must outlive
  /// memarea's use of it: before its owner destroys it, call forget_stream() (docs/streams.md).
  /// @throws error invalid_device for a device that does not exist; invalid_value where the
  /// driver can tell that `native` is no live stream (the sim and HIP always can; CUDA cannot
  /// tell a garbage pointer, which it may crash on) or is a stream of another device.
  static stream_view wrap(void* native, int device);
  /// The calling thread's per-thread default stream of device: a stream of its own per host
  /// thread, which orders with the legacy default stream like any blocking stream.
  static stream_view per_thread(int device);

  /// True for the default-constructed view (each call picks the device). A wrapped default
  /// stream (wrap(nullptr, d)) names its device, and is not.
  constexpr bool is_default() const noexcept { return handle_ == nullptr; }
  /// True for a view made by wrap() (a stream memarea does not own).
  bool is_wrapped() const noexcept;
  /// The device of the stream; -1 for the default stream (the call decides).
  int device() const noexcept;
  /// The vendor's stream underneath (stream::native_handle); nullptr for the default stream
  /// (and for a wrapped legacy default stream).
  void* native_handle() const noexcept;
  /// Waits until all work queued on the stream so far has completed (the default stream: of
  /// the calling thread's current device).
  void synchronize() const;
  /// True once all work queued on the stream so far has completed (cudaStreamQuery); never
  /// blocks.
  bool query() const;
  /// Makes work queued on this stream from now on wait until the work e's latest record
  /// captured has completed (cudaStreamWaitEvent; e may be another device's). An event never
  /// recorded is complete.
  void wait(const event& e) const;
  /// Views of one stream are equal: the same object, or the same device and native stream (two
  /// wraps of one native stream; a memarea::stream and a wrap of its native handle).
  friend bool operator==(stream_view a, stream_view b) noexcept;

 private:
  friend struct detail::handle_access;
  constexpr explicit stream_view(detail::stream_object* h) noexcept : handle_(h) {}
  detail::stream_object* handle_ = nullptr;
};

/// Declared here too (not only as the friend above), so that the library exports it.
bool operator==(stream_view a, stream_view b) noexcept;

/// Before the owner of a native stream that memarea used through stream_view::wrap destroys
/// it: waits for the work queued on it so far and makes every pool forget it (pieces freed on
/// it become free for every stream), as destroying a memarea::stream does. Without it, a pool
/// may hand a piece freed on the destroyed stream to a new stream that got its handle, while
/// the old stream's work still runs. The view stays valid; nothing happens for a default
/// stream. @throws error what the driver's wait reports.
void forget_stream(stream_view s);

}  // namespace memarea

#pragma GCC visibility pop
