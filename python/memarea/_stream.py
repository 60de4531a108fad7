"""Streams made outside memarea (PyTorch's, CuPy's, a native CUstream / hipStream_t as an int),
events, and pool Buffers used on several streams (docs/streams.md).

Every call that takes a stream takes a memarea.Stream, an ExternalStream, an int (the native
stream: 0 or 1 the legacy default stream, 2 the per-thread default stream, else a CUstream or
hipStream_t of the current device), or an object with a ``cuda_stream`` attribute
(torch.cuda.Stream), a ``ptr`` attribute (cupy.cuda.Stream) or a ``__cuda_stream__`` method; its
device comes from its ``device_index``, ``device_id`` or ``device`` where it has one.
"""

from __future__ import annotations

import ctypes

from ._buffer import Buffer, View
from ._device import Stream, _int, _OnDevice, get_device
from ._lib import Status, check, fn, raise_status

__all__ = ["Event", "ExternalStream", "record_stream"]

_EVENT_BLOCKING_SYNC, _EVENT_DISABLE_TIMING, _EVENT_INTERPROCESS = 0x1, 0x2, 0x4


class ExternalStream(Stream):
    """A native stream made outside memarea, as memarea sees it (memarea_stream_wrap): copies,
    fills, pools and prefetches queue their work on it.

    ExternalStream(native, device=None): native is the stream's handle as an int (0 or 1: the
    legacy default stream; 2: the per-thread default stream); device None or -1 is the current
    device. One native stream is one ExternalStream: the same object comes back for the same
    (device, native). memarea never destroys it; its owner must keep it alive while memarea uses
    it, and call close() (memarea_stream_forget) before destroying it."""
    __slots__ = ("native",)
    _made: dict = {}

    def __new__(cls, native, device: int | None = None):
        native = _int(native, "native")
        if native < 0 or native >= 1 << 64:
            raise ValueError(f"native stream {native} is not a pointer")
        if native == 1:  # CU_STREAM_LEGACY: the legacy default stream, as NULL
            native = 0
        dev = get_device() if device is None or device == -1 else _int(device, "device")
        key = (dev, native)
        s = cls._made.get(key)
        if s is not None and s._handle is not None:
            return s
        h = ctypes.c_void_p()
        check(fn.stream_wrap(ctypes.byref(h), native or None, dev))
        s = object.__new__(cls)
        s._handle, s.device, s._keep, s.native = h.value, dev, [], native
        cls._made[key] = s
        return s

    def __init__(self, native, device: int | None = None):
        pass  # made by __new__

    def query(self) -> bool:
        """True once all work queued on the stream has completed (never waits)."""
        self._check()
        return _query(fn.stream_query(self._handle))

    def close(self) -> None:
        """Before the owner destroys the native stream: waits for its work and makes memarea's
        pools forget it (memarea_stream_forget). The native stream itself is never destroyed.
        Closing twice does nothing."""
        h, self._handle = self._handle, None
        if h is not None:
            ExternalStream._made.pop((self.device, self.native), None)
            try:
                check(fn.stream_forget(h))
            finally:
                self._keep.clear()

    def __del__(self):
        pass  # the owner's stream: nothing to give back

    def _prune(self):
        # Copies keep their objects referenced until the stream is synchronized: let them go
        # once its work is done, as the owner synchronizes it by its own means.
        if self._keep and self._handle is not None and fn.stream_query(self._handle) == 0:
            self._keep.clear()

    def __repr__(self):
        state = "closed" if self._handle is None else hex(self.native)
        return f"<memarea.ExternalStream device={self.device} native={state}>"


def _foreign_device(obj):
    for name in ("device_index", "device_id"):
        v = getattr(obj, name, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    dev = getattr(obj, "device", None)
    if isinstance(dev, int) and not isinstance(dev, bool):
        return dev
    index = getattr(dev, "index", None)  # torch.device, cupy.cuda.Device.id below
    if isinstance(index, int):
        return index
    index = getattr(dev, "id", None)
    return index if isinstance(index, int) else None


def as_stream(stream):
    """stream as a memarea.Stream (None stays None); see the module's words for what is taken."""
    if stream is None or type(stream) is Stream:
        return stream
    if isinstance(stream, ExternalStream):
        stream._prune()
        return stream
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        s = ExternalStream(stream)
    else:
        native = getattr(stream, "cuda_stream", None)
        if native is None:
            native = getattr(stream, "ptr", None)
        if native is None and hasattr(stream, "__cuda_stream__"):
            native = stream.__cuda_stream__()[1]
        if not isinstance(native, int) or isinstance(native, bool):
            raise TypeError("stream must be a memarea.Stream, an int (a native stream) or an "
                            "object with a cuda_stream or ptr attribute (torch, cupy), not "
                            f"{type(stream).__name__}")
        s = ExternalStream(native, _foreign_device(stream))
    s._prune()
    return s


def required_stream(stream):
    """as_stream for the calls that need a stream (copy_async, memset_async, copy_2d_async):
    None is a TypeError there."""
    if stream is None:
        raise TypeError("stream must be a memarea.Stream, an int (a native stream) or an object "
                        "with a cuda_stream or ptr attribute (torch, cupy), not NoneType")
    return as_stream(stream)


def _query(status: int) -> bool:
    if status == Status.BUSY:
        return False
    check(status)
    return True


class Event:
    """A marker in a stream's work (memarea_event_t), as torch.cuda.Event and cupy.cuda.Event.

    Event(device=None, *, timing=True, blocking=False): timing=False makes a cheaper event
    that elapsed_time refuses; blocking=True makes a waiting thread block instead of spin.
    close() (or a with-block) destroys it; the garbage collector does otherwise."""
    __slots__ = ("_handle", "device", "__weakref__")

    def __init__(self, device: int | None = None, *, timing: bool = True,
                 blocking: bool = False, interprocess: bool = False):
        self._handle = None
        flags = ((0 if timing else _EVENT_DISABLE_TIMING) | (_EVENT_BLOCKING_SYNC if blocking
                                                               else 0)
                 | (_EVENT_INTERPROCESS if interprocess else 0))
        h = ctypes.c_void_p()
        if device is None or device == -1:
            self.device = get_device()
            check(fn.event_create(ctypes.byref(h), flags))
        else:
            self.device = _int(device, "device")
            with _OnDevice(self.device):
                check(fn.event_create(ctypes.byref(h), flags))
        self._handle = h.value

    @property
    def handle(self) -> int:
        """The memarea_event_t, as an int."""
        self._check()
        return self._handle

    def _check(self):
        if self._handle is None:
            raise ValueError("the event is closed")

    def record(self, stream=None) -> None:
        """Captures the work queued on stream so far (None: the default stream of the event's
        device)."""
        self._check()
        s = as_stream(stream)
        check(fn.event_record(self._handle, None if s is None else s._handle))

    def query(self) -> bool:
        """True once the work of the latest record has completed (or it was never recorded)."""
        self._check()
        return _query(fn.event_query(self._handle))

    def synchronize(self) -> None:
        """Waits until the work of the latest record has completed (the GIL is released)."""
        self._check()
        check(fn.event_synchronize(self._handle))

    def wait(self, stream=None) -> None:
        """Makes work queued on stream from now on (None: the current device's default stream)
        wait for this event's latest record."""
        self._check()
        s = as_stream(stream)
        check(fn.stream_wait_event(None if s is None else s._handle, self._handle))

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event's latest record to end's (both complete and timed)."""
        self._check()
        if not isinstance(end, Event):
            raise TypeError(f"end must be a memarea.Event, not {type(end).__name__}")
        end._check()
        ms = ctypes.c_float()
        check(fn.event_elapsed(ctypes.byref(ms), self._handle, end._handle))
        return ms.value

    def close(self) -> None:
        """Destroys the event. Closing twice does nothing."""
        h, self._handle = self._handle, None
        if h is not None:
            check(fn.event_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and fn is not None:
            st = fn.event_destroy(self._handle)
            self._handle = None
            if st:
                raise_status(st)

    def __repr__(self):
        state = "closed" if self._handle is None else hex(self._handle)
        return f"<memarea.Event device={self.device} {state}>"


def record_stream(buffer, stream) -> None:
    """A Pool's Buffer (or a View of one) is used on stream too, as torch's
    Tensor.record_stream: its free then waits for the work queued on stream up to the free
    before any stream gets the memory again (memarea_pool_record_stream)."""
    if not isinstance(buffer, (Buffer, View)):
        raise TypeError(f"expected a memarea Buffer or View, not {type(buffer).__name__}")
    b = buffer._buffer
    if b._mode != Buffer._POOL:
        raise ValueError("record_stream takes a Buffer of a Pool (Pool.alloc)")
    s = as_stream(stream)
    if s is None:
        raise TypeError("stream must not be None: name the stream that uses the buffer")
    s._check()
    check(fn.pool_record_stream(b._owner._handle, buffer.ptr, s._handle))
