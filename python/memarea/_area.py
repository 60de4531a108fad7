"""Areas and pools (memarea._core re-exports them)."""

from __future__ import annotations

import ctypes

from ._buffer import Buffer
from ._ext import native
from ._device import CPU_DEVICE_ID, Stream, _int, _size, _stream_handle, get_device
from ._lib import Error, PoolOptions, PoolStats, Status, check, fn, raise_status

# --- areas and pools ----------------------------------------------------------------------------

_AREA_FLAGS = {"device": 0, "host": 1 << 0, "managed": 1 << 1, "mapped": (1 << 0) | (1 << 2)}
_GLOBAL = 1 << 3
KINDS = ("device", "host", "mapped", "managed", "host_numa")


class Area:
    """Where memory lives and who sees it (memarea_area_t).

    kind: "device" (device memory), "host" (pinned host memory), "mapped" (pinned host memory
    mapped on the device), "managed" (managed / unified memory), "host_numa" (pageable host
    memory bound to `numa_node`, -1 for none; no GPU needed). device: an ordinal, or None (or
    -1) for the calling thread's current device at each alloc; any other id is INVALID_DEVICE. all_devices: make the memory visible to
    every device (portable pinned memory, managed memory attached globally).

    close() (or a with-block) destroys the area; its live Buffers stay valid."""
    __slots__ = ("_handle", "kind", "_device", "numa_node", "flags", "__weakref__")

    def __init__(self, device: int | None = None, kind: str = "device", *,
                 all_devices: bool = False, numa_node: int = -1):
        self._handle = None
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind
        self.numa_node = _int(numa_node, "numa_node")
        if kind == "host_numa":
            if device is not None:
                raise ValueError("a host_numa area is host memory: it takes numa_node, not "
                                 "device")
            if all_devices:
                raise ValueError("all_devices applies to GPU areas, not host_numa")
            self._device, self.flags = None, 0
            return
        if numa_node != -1:
            raise ValueError("numa_node applies to kind='host_numa' only")
        self._device = None if device is None else _int(device, "device")
        if self._device == -1:  # -1 is the current device, as in the C API
            self._device = None
        self.flags = _AREA_FLAGS[kind] | (_GLOBAL if all_devices else 0)
        h = ctypes.c_void_p()
        check(fn.area_create(ctypes.byref(h), -1 if self._device is None else self._device, self.flags))
        self._handle = h.value

    @property
    def device(self) -> int | None:
        """The area's device, or None (the current device at each alloc; host_numa)."""
        return self._device

    def alloc(self, nbytes: int) -> Buffer:
        """Allocates nbytes (> 0) and returns the Buffer; the thread's device is unchanged."""
        nbytes = _size(nbytes, "nbytes")
        p = ctypes.c_void_p()
        if self.kind == "host_numa":
            st = fn.host_malloc(ctypes.byref(p), nbytes, self.numa_node)
            if st:
                raise_status(st)
            return Buffer._make(p.value, nbytes, CPU_DEVICE_ID, "host_numa", self, Buffer._FREE)
        if self._handle is None:
            raise ValueError("the area is closed")
        st = fn.area_mmap(self._handle, ctypes.byref(p), nbytes, None)
        if st:
            raise_status(st)
        device = self._device if self._device is not None else get_device()
        return Buffer._make(p.value, nbytes, device, self.kind, self, Buffer._AREA)

    def close(self) -> None:
        """Destroys the area (no more alloc); its live Buffers stay valid and are freed as
        usual. Closing twice does nothing."""
        h, self._handle = self._handle, None
        if h is not None:
            check(fn.area_destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None and fn is not None:
            self.close()

    def __repr__(self):
        return f"<memarea.Area {self.kind} device={self._device}>"


class _PurePoolCore:
    """Pool's state and hot path in Python (ctypes), where the compiled extension's PoolCore is
    absent (memarea/_ext.py): the same attributes and behaviour."""
    __slots__ = ("_handle", "_orphaned", "area", "device", "kind", "__weakref__")

    def alloc(self, nbytes: int, stream: Stream | None = None) -> Buffer:
        """Allocates nbytes, ordered on stream (None: the device's default stream): memory
        freed on that stream is reused at once. The Buffer is freed on the same stream."""
        # The common case checked inline (this is the hot path); _size raises the precise error.
        if type(nbytes) is not int or not 0 < nbytes < 1 << 64:
            nbytes = _size(nbytes, "nbytes")
        h = self._handle
        if h is None:
            raise ValueError("the pool is closed")
        p = ctypes.c_void_p()
        if stream is not None and not isinstance(stream, Stream):
            from ._stream import as_stream  # a foreign stream: the Buffer frees on it
            stream = as_stream(stream)
        st = fn.pool_alloc(h, ctypes.byref(p), nbytes,
                           None if stream is None else _stream_handle(stream))
        if st:
            raise_status(st)
        return Buffer._make(p.value, nbytes, self.device, self.kind, self, Buffer._POOL, stream)

    def _close_orphaned(self):
        """Destroys the pool once idle after its finalizer ran (Pool.__del__); BUSY while
        pieces of it live: it stays, and the next free tries again."""
        if self._handle is not None and fn.pool_destroy(self._handle) == 0:
            self._handle = None
            self._orphaned = False


class Pool(native.PoolCore if native is not None else _PurePoolCore):
    """A stream-ordered pool of memory drawn from an Area (memarea_pool_t; docs/pools.md):
    allocations after the first come from memory the pool already holds, without a driver call.

    Pool(area) pools the area's memory; Pool(None, host_node=n) or Pool(Area(kind="host_numa"))
    pools pageable host memory. The options are memarea_pool_options': initial_size,
    maximum_size (0: no limit), release_threshold (None: keep everything), alignment (a power
    of two, 16 to 4096).

    Buffers keep their pool alive. close() (or a with-block) destroys it, and raises
    memarea.Error with status BUSY while Buffers of it are live."""
    __slots__ = ()

    def __init__(self, area: Area | None = None, *, initial_size: int = 0, maximum_size: int = 0,
                 release_threshold: int | None = None, alignment: int = 256,
                 host_node: int = -1):
        self._handle = None
        self._orphaned = False
        o = PoolOptions(_size(initial_size, "initial_size", True),
                        _size(maximum_size, "maximum_size", True),
                        (1 << 64) - 1 if release_threshold is None
                        else _size(release_threshold, "release_threshold", True),
                        _size(alignment, "alignment"), _int(host_node, "host_node"), 0)
        c_area = None
        if area is not None and not isinstance(area, Area):
            raise TypeError(f"area must be a memarea.Area or None, not {type(area).__name__}")
        if area is None or area.kind == "host_numa":
            if area is not None:
                if host_node != -1:
                    raise ValueError("give the NUMA node by the area or by host_node, not both")
                o.host_node = area.numa_node
            self.device, self.kind = CPU_DEVICE_ID, "host_numa"
        else:
            if area._handle is None:
                raise ValueError("the area is closed")
            if host_node != -1:
                raise ValueError("host_node applies to pools of host_numa memory only")
            c_area = area._handle
            self.device = area.device if area.device is not None else get_device()
            self.kind = area.kind
        self.area = area
        h = ctypes.c_void_p()
        check(fn.pool_create(ctypes.byref(h), c_area, ctypes.byref(o)))
        self._handle = h.value

    def stats(self) -> dict:
        """The pool's counters now (memarea_pool_stats as a dict)."""
        self._check()
        s = PoolStats()
        check(fn.pool_get_stats(self._handle, ctypes.byref(s)))
        return {n: getattr(s, n) for n, _ in PoolStats._fields_}

    def trim(self, keep_bytes: int = 0) -> None:
        """Gives free blocks back to the driver until at most keep_bytes stay reserved."""
        self._check()
        check(fn.pool_trim(self._handle, _size(keep_bytes, "keep_bytes", True)))

    def _check(self):
        if self._handle is None:
            raise ValueError("the pool is closed")

    def close(self) -> None:
        """Destroys the pool and gives its memory back; memarea.Error (BUSY), and nothing
        changes, while Buffers of it are live. Closing twice does nothing."""
        h = self._handle
        if h is not None:
            check(fn.pool_destroy(h))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Buffers hold their pool: one of them is live here only when the collector finalizes
        # both together (a reference cycle), in an order of its own; then the last of them to
        # be freed closes the pool (Buffer.free). Pieces that framework tensors hold
        # (memarea.torch, memarea.cupy) keep it, unreachable, until the process exits, rather
        # than raise from a finalizer. (IPC-held pieces are not live allocations: the pool
        # keeps them until the importers close them.)
        if getattr(self, "_handle", None) is not None and fn is not None:
            try:
                self.close()
            except Error as e:
                if e.status != Status.BUSY:
                    raise
                self._orphaned = True  # the last Buffer's free closes it (above)

    def __repr__(self):
        return f"<memarea.Pool {self.kind} device={self.device}>"
