"""The backend, devices, argument checks and streams (memarea._core re-exports them)."""

from __future__ import annotations

import ctypes
import json

from ._lib import DeviceProperties, Error, Status, check, fn, lib, library_path

CPU_DEVICE_ID = -1
"""The device id of the host (MEMAREA_CPU_DEVICE_ID), e.g. for prefetch(buffer, device=CPU_DEVICE_ID)."""

# --- backend and devices ------------------------------------------------------------------------


def backend() -> str:
    """The active GPU backend: "cuda", "hip", "sim", or "none" when no backend has devices."""
    name = ctypes.c_char_p()
    check(fn.backend_name(ctypes.byref(name)))
    return name.value.decode()


_backend_cache: str | None = None


def _backend() -> str:
    # One backend is active per process, chosen at first use: ask once.
    global _backend_cache
    if _backend_cache is None:
        _backend_cache = backend()
    return _backend_cache


def device_count() -> int:
    """Number of devices of the active GPU backend (0 when there is none)."""
    n = ctypes.c_int()
    check(fn.get_device_count(ctypes.byref(n)))
    return n.value


def get_device() -> int:
    """The calling thread's current device (0 until set)."""
    d = ctypes.c_int()
    check(fn.get_device(ctypes.byref(d)))
    return d.value


def set_device(device: int) -> None:
    """Makes `device` the calling thread's current device."""
    check(fn.set_device(_int(device, "device")))


class _OnDevice:
    """Makes a device current for a block and restores the previous one (the C API's peer
    and stream calls act on the calling thread's current device)."""
    __slots__ = ("device", "previous")

    def __init__(self, device: int):
        self.device = device

    def __enter__(self):
        if self.device < -1:
            # Never a device: the library refuses it (INVALID_DEVICE, naming the id and the
            # count) before the current device is read, which fails where there is none.
            set_device(self.device)
        self.previous = get_device()
        if self.device != self.previous:
            set_device(self.device)

    def __exit__(self, *exc):
        if self.device != self.previous:
            set_device(self.previous)


def device_properties(device: int = 0) -> dict:
    """Properties of one device as a dict (the fields of memarea_device_properties; the flags
    as bools, the compute capability as "major.minor")."""
    p = DeviceProperties()
    check(fn.get_device_properties(ctypes.byref(p), _int(device, "device")))
    out = {}
    for name, _ in DeviceProperties._fields_:
        v = getattr(p, name)
        out[name] = v.decode() if isinstance(v, bytes) else v
    for flag in ("unified_addressing", "managed_memory", "concurrent_managed_access",
                 "pageable_memory_access", "can_map_host_memory", "virtual_memory_management",
                 "ipc"):
        out[flag] = bool(out[flag])
    out["compute_capability"] = f"{out.pop('compute_major')}.{out.pop('compute_minor')}"
    return out


def synchronize(device: int | None = None) -> None:
    """Waits for all work on `device` (None or -1: the calling thread's current device)."""
    if device is None or device == -1:
        check(fn.device_synchronize())
        return
    with _OnDevice(_int(device, "device")):
        check(fn.device_synchronize())


try:
    _device_reset = lib.memarea_device_reset
except AttributeError as _e:
    raise ImportError(f"memarea: {library_path} lacks memarea_device_reset: it is older than "
                      "this package; rebuild it from the same checkout") from _e
_device_reset.restype = ctypes.c_int
_device_reset.argtypes = [ctypes.c_int]


def device_reset(device: int | None = None) -> None:
    """Resets `device` (None or -1: the calling thread's current device), as cudaDeviceReset
    does: the driver destroys everything the device's context holds and makes it anew at its
    next use. Raises Error with status BUSY, changing nothing, while memarea holds anything
    there (buffers and pool pieces of the device, pinned, mapped and managed memory made on it,
    IPC mappings open on it, streams made on it): the message lists them. Otherwise it
    disables peer access to and from the device, gives its pools' blocks back (the pools stay
    usable) and resets. No other thread may use the device meanwhile (docs/areas.md,
    "Resetting a device")."""
    device = -1 if device is None else _int(device, "device")
    # memarea.peer_access scopes are this package's own (the C API has none): held like the C++
    # API's scoped_access, they refuse a reset of either device of their pair alike.
    from ._ops import _scopes, _scopes_lock
    target = get_device() if device == -1 and device_count() > 0 else device
    with _scopes_lock:
        held = [(pair, state[0]) for pair, state in _scopes.items() if target in pair]
    if held:
        (a, b), n = held[0]
        raise Error(Status.BUSY,
                    f"device_reset: device {target} is in use: peer access {a} -> {b} held by "
                    f"{n} memarea.peer_access scope{'s' if n != 1 else ''}; leave them first")
    check(_device_reset(device))


def _json_call(f, *args) -> dict:
    s = ctypes.c_char_p()
    check(f(ctypes.byref(s), *args))
    try:
        return json.loads(s.value.decode())
    finally:
        fn.string_free(s)


def info() -> dict:
    """What `memarea info --json` prints: version, backends (found or not, and why), devices and
    their properties, host NUMA nodes."""
    return _json_call(fn.info_json)


def topo(size: int = 0, reps: int = 0) -> dict:
    """What `memarea topo --json` prints: peer access, links, and the bandwidth and latency of
    memarea's copies between every ordered pair of devices, measured now (seconds on a GPU; the
    GIL is released meanwhile). size 0 and reps 0 take the CLI's defaults."""
    return _json_call(fn.topo_json, _size(size, "size", allow_zero=True), _int(reps, "reps"))


# --- argument checks ------------------------------------------------------------------------------


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    return v.__index__()


def _address(v, what: str) -> int:
    v = _int(v, what)
    if not 0 <= v < 1 << 64:
        raise ValueError(f"{what} {v} is not an address (0 to 2**64 - 1)")
    return v


def _size(v, what: str, allow_zero: bool = False) -> int:
    v = _int(v, what)
    if v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'>= 0' if allow_zero else '> 0'}, not {v}")
    if v >= 1 << 64:
        raise ValueError(f"{what} {v} does not fit in size_t")
    return v


# --- streams --------------------------------------------------------------------------------------


class Stream:
    """An in-order queue of work on one device (memarea_stream_t).

    Stream(device=None) creates one on `device` (None or -1: the calling thread's current
    device).
    Objects handed to copy_async stay referenced by the stream until synchronize() or close(),
    so their memory outlives the queued copy. Use it as a context manager, or close() it; the
    garbage collector closes it otherwise."""
    __slots__ = ("_handle", "device", "_keep", "__weakref__")

    def __init__(self, device: int | None = None):
        self._handle = None
        self._keep = []
        h = ctypes.c_void_p()
        if device is None or device == -1:  # -1 is the current device, as in the C API
            self.device = get_device()
            check(fn.stream_create(ctypes.byref(h)))
        else:
            self.device = _int(device, "device")
            with _OnDevice(self.device):
                check(fn.stream_create(ctypes.byref(h)))
        self._handle = h.value

    @property
    def handle(self) -> int:
        """The memarea_stream_t, as an int (for C code sharing this stream)."""
        self._check()
        return self._handle

    @property
    def cuda_stream(self) -> int:
        """The vendor's stream underneath (CUstream, hipStream_t; sim: an opaque pointer), as an
        int, for torch.cuda.ExternalStream or cupy.cuda.ExternalStream (0: the default
        stream)."""
        self._check()
        p = ctypes.c_void_p()
        check(fn.stream_get_native(ctypes.byref(p), self._handle))
        return p.value or 0

    def _check(self):
        if self._handle is None:
            raise ValueError("the stream is closed")

    def synchronize(self) -> None:
        """Waits for all work queued on the stream (the GIL is released meanwhile)."""
        self._check()
        check(fn.stream_synchronize(self._handle))
        self._keep.clear()

    def close(self) -> None:
        """Destroys the stream after its work completes. Closing twice does nothing."""
        h, self._handle = self._handle, None
        if h is not None:
            try:
                check(fn.stream_synchronize(h))
            finally:
                check(fn.stream_destroy(h))
                self._keep.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and fn is not None:
            self.close()

    def __repr__(self):
        state = "closed" if self._handle is None else hex(self._handle)
        return f"<memarea.Stream device={self.device} {state}>"


def _stream_object(stream) -> Stream:
    """The open memarea Stream that a stream argument (not None) names: a foreign one (an int,
    torch's, cupy's) wrapped. What Pool.alloc's compiled path keeps in the Buffer, which is
    freed on it."""
    if not isinstance(stream, Stream):
        from ._stream import as_stream
        stream = as_stream(stream)
    stream._check()
    return stream


def _stream_handle(stream) -> int | None:
    if stream is None:
        return None
    if not isinstance(stream, Stream):
        from ._stream import as_stream  # a foreign stream (an int, torch's, cupy's): wrapped
        stream = as_stream(stream)
    stream._check()
    return stream._handle
