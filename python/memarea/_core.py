"""Devices, streams, areas, pools, buffers and their zero-copy views, copies, lookup."""

from __future__ import annotations

import ctypes
import json
import sys
import threading
from typing import NamedTuple

from . import _interop as dl
from ._lib import (AllocationInfoC, DeviceProperties, Error, IpcHandle, PoolOptions, PoolStats,
                   Status, check, fn, raise_status)

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
    """Waits for all work on `device` (None: the calling thread's current device)."""
    if device is None:
        check(fn.device_synchronize())
        return
    with _OnDevice(_int(device, "device")):
        check(fn.device_synchronize())


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

    Stream(device=None) creates one on `device` (None: the calling thread's current device).
    Objects handed to copy_async stay referenced by the stream until synchronize() or close(),
    so their memory outlives the queued copy. Use it as a context manager, or close() it; the
    garbage collector closes it otherwise."""
    __slots__ = ("_handle", "device", "_keep", "__weakref__")

    def __init__(self, device: int | None = None):
        self._handle = None
        self._keep = []
        h = ctypes.c_void_p()
        if device is None:
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


def _stream_handle(stream) -> int | None:
    if stream is None:
        return None
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a memarea.Stream or None, not {type(stream).__name__}")
    stream._check()
    return stream._handle


# --- what a pointer is ------------------------------------------------------------------------------

_KIND_NAMES = {0: "unknown", 1: "device", 2: "host", 3: "managed", 4: "mapped", 5: "registered",
               6: "ipc", 7: "host_numa"}
# Memory the host may read and write directly (and so view through NumPy / memoryview).
_HOST_KINDS = frozenset(("host", "mapped", "registered", "managed", "host_numa"))


class AllocationInfo(NamedTuple):
    """The allocation that contains a pointer (memarea_allocation_info). kind is one of
    "device", "host" (pinned), "mapped", "registered", "managed", "ipc" (opened from another
    process), "host_numa" (memarea's pageable host memory) or "unknown"; device is -1 for host
    memory."""
    base: int
    size: int
    kind: str
    device: int


def lookup(obj) -> AllocationInfo:
    """The allocation that contains obj: an int address, a Buffer or a View (memarea's own
    records first, then the driver's)."""
    if isinstance(obj, (Buffer, View)):
        ptr = obj.ptr
    else:
        ptr = _int(obj, "pointer")
    i = AllocationInfoC()
    check(fn.pointer_get_info(ctypes.byref(i), ptr))
    return AllocationInfo(i.base or 0, i.size, _KIND_NAMES.get(i.kind, "unknown"), i.device)


# --- DLPack device of memarea memory ------------------------------------------------------------


def dlpack_device(backend_name: str, kind: str, device: int) -> tuple[int, int]:
    """The DLPack (device_type, device_id) of memarea memory of `kind` on `device` under a
    backend. The sim backend's device memory is kDLExtDev (a simulated device: no consumer
    mistakes it for CUDA memory); everything of sim the host can touch is kDLCPU."""
    if kind == "host_numa":
        return (dl.kDLCPU, 0)
    if backend_name == "cuda":
        if kind in ("device", "ipc"):
            return (dl.kDLCUDA, device)
        if kind == "managed":
            return (dl.kDLCUDAManaged, device)
        return (dl.kDLCUDAHost, 0)
    if backend_name == "hip":
        # DLPack has no ROCm managed type: HIP's managed memory is device memory the host can
        # also reach, which consumers handle as kDLROCM.
        if kind in ("device", "ipc", "managed"):
            return (dl.kDLROCM, device)
        return (dl.kDLROCMHost, 0)
    if kind in ("device", "ipc"):
        return (dl.kDLExtDev, device)
    return (dl.kDLCPU, 0)


# --- arrays: what Buffer and View share -----------------------------------------------------------


class _Array:
    """Exports of a C-contiguous array over memarea memory: DLPack, the CUDA array interface
    (CUDA backend), the NumPy array interface and memoryview (memory the host can touch)."""
    __slots__ = ()

    # Subclasses give: _buffer (the owning Buffer), ptr, nbytes, device, kind, _dtype, _shape.

    @property
    def shape(self) -> tuple:
        """The array's shape."""
        return self._shape

    @property
    def dtype(self) -> dl.DType:
        """The element type (a memarea.DType with .name and .itemsize)."""
        return self._dtype

    @property
    def host_accessible(self) -> bool:
        """Whether the host can read and write this memory directly (pinned, mapped, managed,
        pageable host memory): NumPy and memoryview views need it."""
        return self.kind in _HOST_KINDS

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device: kDLCUDA / kDLCUDAHost / kDLCUDAManaged on CUDA, kDLROCM /
        kDLROCMHost on HIP, kDLCPU for host memory, kDLExtDev for sim device memory."""
        return dlpack_device(_backend(), self.kind, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this memory without a copy (the DLPack / array API
        protocol).

        stream: the consumer's stream as an int (CUDA: 1 legacy default, 2 per-thread default,
        -1 no synchronization). Unless -1, memarea streams with copy_async work queued on this
        buffer are waited for first. memarea cannot enqueue a wait on a foreign stream, so it
        waits on the host, which orders the work before every stream alike: the protocol's
        ambiguous CUDA stream 0 is accepted, since it makes no difference here. max_version: with (1, x) or later
        the capsule is a versioned "dltensor_versioned" (DLPack 1.0), else a legacy "dltensor".
        dl_device: must be this memory's device (no cross-device export). copy=True is refused:
        memarea exports only views (copy with memarea.copy into another Buffer)."""
        buf = self._buffer
        buf._check_open()
        dev = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != dev:
            raise BufferError(f"memarea memory is on DLPack device {dev}, not {tuple(dl_device)};"
                              " it is exported without a copy only")
        if copy:
            raise BufferError("memarea exports views only (copy=True): copy into another "
                              "memarea Buffer with memarea.copy, then export that")
        if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
            raise TypeError(f"stream must be an int or None, not {type(stream).__name__}")
        if stream != -1:
            buf._sync_pending()
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dl.make_capsule(self, buf, self.ptr, dev, self._dtype, self._shape, versioned)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface (v3), on the CUDA backend, for memory the device can
        address: device, imported, managed and mapped memory (mapped: its device pointer).
        Pending memarea stream work on it is waited for first, so "stream" is None."""
        if _backend() != "cuda":
            raise AttributeError("__cuda_array_interface__: only on the CUDA backend (active: "
                                 f"{_backend()})")
        kind = self.kind
        if kind not in ("device", "ipc", "managed", "mapped", "registered"):
            raise AttributeError(f"__cuda_array_interface__: {kind} memory is not mapped on a "
                                 "device (use kind='mapped', or DLPack's kDLCUDAHost)")
        buf = self._buffer
        buf._check_open()
        buf._sync_pending()
        ptr = self.ptr
        if kind in ("mapped", "registered"):
            ptr = buf.device_ptr + (ptr - buf.ptr)
        if self._dtype.typestr is None:
            raise AttributeError(f"__cuda_array_interface__: {self._dtype.name} has no typestr")
        return {"shape": self._shape, "typestr": self._dtype.typestr, "data": (ptr, False),
                "version": 3, "strides": None, "stream": None}

    @property
    def __array_interface__(self) -> dict:
        """NumPy's array interface (v3), for memory the host can touch: numpy.asarray(x) is a
        view, no copy, and keeps x (and so the memory) alive."""
        if not self.host_accessible:
            raise AttributeError(f"__array_interface__: {self.kind} memory is not host memory")
        if self._dtype.typestr is None:
            raise AttributeError(f"__array_interface__: {self._dtype.name} has no NumPy type")
        buf = self._buffer
        buf._check_open()
        buf._sync_pending()
        return {"shape": self._shape, "typestr": self._dtype.typestr, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __array__(self, dtype=None, copy=None):
        # NumPy reaches this only when __array_interface__ was refused: say why, rather than
        # let NumPy wrap the object in a 0-d object array.
        if not self.host_accessible:
            raise TypeError(f"memarea {self.kind} memory is not host memory: NumPy cannot view "
                            "it; copy it to host memory with memarea.copy, or use DLPack")
        raise TypeError(f"{self._dtype.name} has no NumPy type: view the buffer with another "
                        "dtype")

    def memoryview(self) -> memoryview:
        """A writable memoryview of host-touchable memory, shaped and typed as the array
        where the struct module has a format for its dtype (else bytes). Zero-copy; it keeps
        the memory alive."""
        if not self.host_accessible:
            raise TypeError(f"memarea {self.kind} memory is not host memory: the host cannot "
                            "view it (copy it with memarea.copy)")
        buf = self._buffer
        buf._check_open()
        buf._sync_pending()
        raw = (ctypes.c_ubyte * self.nbytes).from_address(self.ptr)
        raw._memarea_owner = self  # the ctypes array keeps the memory's owner alive
        mv = memoryview(raw).cast("B")
        fmt = self._dtype.format
        if fmt is None or self._dtype is dl.UINT8 and len(self._shape) == 1:
            return mv
        return mv.cast(fmt, self._shape)

    if sys.version_info >= (3, 12):
        def __buffer__(self, flags):
            """The buffer protocol (PEP 688, Python 3.12+): memoryview(x), bytes(x)."""
            return self.memoryview()

    def tobytes(self) -> bytes:
        """A copy of the memory in a bytes object (through memarea.copy: any kind)."""
        out = bytearray(self.nbytes)
        copy(out, self)
        return bytes(out)

    def view(self, dtype="uint8", shape=None, offset: int = 0) -> "View":
        """A zero-copy typed view: `shape` (None: as many items as fit; an int: 1-D) of
        `dtype` (a name like "float32", a NumPy or torch dtype), from byte `offset`, which must
        be a multiple of the item size. The view keeps the memory alive."""
        return View(self._buffer, self.ptr - self._buffer.ptr + _int(offset, "offset"),
                    dtype, shape, limit=self.ptr - self._buffer.ptr + self.nbytes)


class Buffer(_Array):
    """Memory memarea allocated: an Area's or a Pool's allocation, or memory of another process
    opened through IPC. A 1-D array of bytes (view() gives typed views).

    Freed deterministically by free() or a with-block, or by the garbage collector once nothing
    refers to it (views, NumPy arrays and DLPack tensors made from it refer to it). Pickling it
    (multiprocessing, concurrent.futures) sends an IPC handle: the receiver opens the same
    device memory, under memarea's IPC lifetime rules (docs/ipc.md)."""
    __slots__ = ("_ptr", "_nbytes", "device", "kind", "_owner", "_mode", "_stream", "_exports",
                 "_pending", "__weakref__")

    # How the memory goes back (fixed at creation; _owner is the Area, Pool or None).
    _AREA, _POOL, _FREE, _IPC = range(4)

    def __init__(self):
        raise TypeError("Buffers come from Area.alloc, Pool.alloc or memarea.ipc.open")

    @classmethod
    def _make(cls, ptr, nbytes, device, kind, owner, mode, stream=None):
        b = object.__new__(cls)
        b._ptr, b._nbytes, b.device, b.kind = ptr, nbytes, device, kind
        b._owner, b._mode, b._stream = owner, mode, stream
        b._exports = b._pending = None
        return b

    # -- the _Array fields
    @property
    def _buffer(self):
        return self

    @property
    def _dtype(self):
        return dl.UINT8

    @property
    def _shape(self):
        return (self._nbytes,)

    @property
    def ptr(self) -> int:
        """The address (for device memory: the device address). Raises once freed."""
        self._check_open()
        return self._ptr

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self._nbytes

    def __len__(self) -> int:
        return self._nbytes

    @property
    def closed(self) -> bool:
        """True once freed."""
        return self._ptr is None

    @property
    def device_ptr(self) -> int:
        """The address the device uses: for mapped host memory its device pointer, otherwise
        ptr."""
        self._check_open()
        if self.kind not in ("mapped", "registered"):
            return self._ptr
        p = ctypes.c_void_p()
        check(fn.host_get_device_pointer(ctypes.byref(p), self._ptr))
        return p.value or 0

    def _check_open(self):
        if self._ptr is None:
            raise ValueError("the memarea Buffer was freed")

    # -- stream-ordered work and exports
    def _add_pending(self, stream):
        if self._pending is None:
            self._pending = []
        if stream not in self._pending:
            self._pending.append(stream)

    def _sync_pending(self):
        p = self._pending
        if p:
            self._pending = None
            for s in p:
                if s._handle is not None:
                    check(fn.stream_synchronize(s._handle))

    def _export_begun(self, address):
        if self._exports is None:
            self._exports = set()
        self._exports.add(address)

    def _export_done(self, address):
        if self._exports is not None:
            self._exports.discard(address)

    # -- freeing
    def free(self) -> None:
        """Frees the memory now (after memarea stream work queued on it completes). Raises
        BufferError while a DLPack consumer still holds it. Freeing twice does nothing."""
        if self._ptr is None:
            return
        if self._exports:
            raise BufferError(f"the buffer is still held by {len(self._exports)} DLPack "
                              "consumer(s) (torch/cupy/jax tensors made from it): drop them first")
        self._sync_pending()
        ptr, self._ptr = self._ptr, None
        mode = self._mode
        if mode == Buffer._POOL:
            st = fn.pool_free(self._owner._handle, ptr,
                              self._stream._handle if self._stream is not None else None)
        elif mode == Buffer._AREA and self._owner._handle is not None:
            st = fn.area_munmap(self._owner._handle, ptr, self._nbytes)
        elif mode == Buffer._IPC:
            st = fn.ipc_close_mem_handle(ptr)
        else:  # host_numa memory, or an area closed before its buffers
            st = fn.free(ptr)
        if st:
            self._ptr = ptr  # nothing changed: the buffer is still live
            raise_status(st)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        # At interpreter exit module globals may already be gone: the process exits anyway.
        if getattr(self, "_ptr", None) is not None and fn is not None:
            self.free()

    # -- IPC
    def ipc_handle(self) -> bytes:
        """The 128-byte IPC handle of this device memory (plain bytes: send them anywhere;
        memarea.ipc.open opens them in another process). The Buffer must stay alive until the
        other process opened it; freeing it while opened elsewhere is deferred until they all
        closed it (docs/ipc.md). NOT_SUPPORTED for memory legacy IPC cannot share (host,
        managed, imported)."""
        h = IpcHandle()
        check(fn.ipc_get_mem_handle(ctypes.byref(h), self.ptr))
        return bytes(h.bytes)

    def __reduce__(self):
        from . import ipc
        return (ipc._rebuild, (self.ipc_handle(), self._nbytes))

    # -- managed memory
    def prefetch(self, device=None, *, numa_node=None, stream=None):
        """memarea.prefetch(self, ...)."""
        prefetch(self, device, numa_node=numa_node, stream=stream)

    def advise(self, advice, device=None, *, numa_node=None):
        """memarea.advise(self, ...)."""
        advise(self, advice, device, numa_node=numa_node)

    def range_attributes(self) -> dict:
        """memarea.range_attributes(self)."""
        return range_attributes(self)

    def __repr__(self):
        where = "freed" if self._ptr is None else hex(self._ptr)
        return (f"<memarea.Buffer {self.kind} device={self.device} nbytes={self._nbytes} "
                f"{where}>")


class View(_Array):
    """A zero-copy typed view of part of a Buffer (Buffer.view): shape, dtype, and every export
    a Buffer has (DLPack, CUDA array interface, NumPy, memoryview). It keeps the Buffer alive."""
    __slots__ = ("_buffer", "_offset", "_dtype", "_shape", "__weakref__")

    def __init__(self, buffer: Buffer, offset: int, dtype="uint8", shape=None, *, limit=None):
        if not isinstance(buffer, Buffer):
            raise TypeError("a View is made from a memarea Buffer")
        buffer._check_open()
        dt = dl.dtype(dtype)
        limit = buffer.nbytes if limit is None else limit
        if offset < 0 or offset > limit:
            raise ValueError(f"offset {offset} is outside the buffer's {limit} bytes")
        if offset % dt.itemsize:
            raise ValueError(f"offset {offset} is not a multiple of {dt.name}'s size "
                             f"{dt.itemsize}")
        if shape is None:
            if (limit - offset) % dt.itemsize:
                raise ValueError(f"{limit - offset} bytes are not a whole number of "
                                 f"{dt.name} items: give a shape")
            shape = ((limit - offset) // dt.itemsize,)
        elif hasattr(shape, "__index__"):
            shape = (_int(shape, "shape"),)
        else:
            shape = tuple(_int(s, "shape") for s in shape)
        count = 1
        for s in shape:
            if s < 0:
                raise ValueError(f"negative dimension in shape {shape}")
            count *= s
        if offset + count * dt.itemsize > limit:
            raise ValueError(f"shape {shape} of {dt.name} needs {count * dt.itemsize} bytes; "
                             f"{limit - offset} are left after offset {offset}")
        self._buffer, self._offset, self._dtype, self._shape = buffer, offset, dt, shape

    @property
    def buffer(self) -> Buffer:
        """The Buffer viewed."""
        return self._buffer

    @property
    def offset(self) -> int:
        """Byte offset into the buffer."""
        return self._offset

    @property
    def ptr(self) -> int:
        """Address of the first item."""
        return self._buffer.ptr + self._offset

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        n = self._dtype.itemsize
        for s in self._shape:
            n *= s
        return n

    @property
    def device(self) -> int:
        """The Buffer's device (-1 for host memory)."""
        return self._buffer.device

    @property
    def kind(self) -> str:
        """The Buffer's kind ("device", "host", "mapped", "managed", "host_numa", "ipc")."""
        return self._buffer.kind

    def __reduce__(self):
        return (View, (self._buffer, self._offset, self._dtype.name, self._shape))

    def __repr__(self):
        return (f"<memarea.View {self._dtype.name}{list(self._shape)} offset={self._offset} of "
                f"{self._buffer!r}>")


# --- areas and pools ----------------------------------------------------------------------------

_AREA_FLAGS = {"device": 0, "host": 1 << 0, "managed": 1 << 1, "mapped": (1 << 0) | (1 << 2)}
_GLOBAL = 1 << 3
KINDS = ("device", "host", "mapped", "managed", "host_numa")


class Area:
    """Where memory lives and who sees it (memarea_area_t).

    kind: "device" (device memory), "host" (pinned host memory), "mapped" (pinned host memory
    mapped on the device), "managed" (managed / unified memory), "host_numa" (pageable host
    memory bound to `numa_node`, -1 for none; no GPU needed). device: an ordinal, or None for
    the calling thread's current device at each alloc. all_devices: make the memory visible to
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
        self.flags = _AREA_FLAGS[kind] | (_GLOBAL if all_devices else 0)
        h = ctypes.c_void_p()
        check(fn.area_create(ctypes.byref(h), -1 if device is None else self._device, self.flags))
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


class Pool:
    """A stream-ordered pool of memory drawn from an Area (memarea_pool_t; docs/pools.md):
    allocations after the first come from memory the pool already holds, without a driver call.

    Pool(area) pools the area's memory; Pool(None, host_node=n) or Pool(Area(kind="host_numa"))
    pools pageable host memory. The options are memarea_pool_options': initial_size,
    maximum_size (0: no limit), release_threshold (None: keep everything), alignment (a power
    of two, 16 to 4096).

    Buffers keep their pool alive. close() (or a with-block) destroys it, and raises
    memarea.Error with status BUSY while Buffers of it are live."""
    __slots__ = ("_handle", "area", "device", "kind", "__weakref__")

    def __init__(self, area: Area | None = None, *, initial_size: int = 0, maximum_size: int = 0,
                 release_threshold: int | None = None, alignment: int = 256,
                 host_node: int = -1):
        self._handle = None
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
        st = fn.pool_alloc(h, ctypes.byref(p), nbytes,
                           None if stream is None else _stream_handle(stream))
        if st:
            raise_status(st)
        return Buffer._make(p.value, nbytes, self.device, self.kind, self, Buffer._POOL, stream)

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
        # Buffers hold their pool, so none of this pool's is live here (IPC-held pieces are
        # not live allocations: the pool keeps them until the importers close them).
        if getattr(self, "_handle", None) is not None and fn is not None:
            self.close()

    def __repr__(self):
        return f"<memarea.Pool {self.kind} device={self.device}>"


# --- copies -------------------------------------------------------------------------------------


def _endpoint(obj, writable: bool) -> dl.Endpoint:
    if isinstance(obj, (Buffer, View)):
        buf = obj._buffer
        buf._check_open()
        return dl.Endpoint(obj.ptr, obj.nbytes, pin=obj, buffer=buf)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        e = dl.from_array_interface(obj, cai, writable, cuda=True)
        if e is not None:
            e.gpu_device = _device_of(e.ptr)
            return e
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        e = dl.from_array_interface(obj, ai, writable, cuda=False)
        if e is not None:
            return e
    if hasattr(obj, "__dlpack__"):
        e = dl.from_dlpack(obj, writable)
        if e.memarea_only:
            i = AllocationInfoC()
            if fn.pointer_get_info(ctypes.byref(i), e.ptr) or _KIND_NAMES.get(i.kind) not in (
                    "device", "ipc"):
                raise ValueError(f"{type(obj).__name__} is on DLPack's kDLExtDev but not memarea "
                                 "device memory: memarea cannot copy it")
        return e
    try:
        return dl.from_buffer_protocol(obj, writable)
    except TypeError:
        raise TypeError(f"memarea cannot copy {'to' if writable else 'from'} a "
                        f"{type(obj).__name__}: it has no DLPack, CUDA array interface, NumPy "
                        "array interface or buffer protocol") from None


def _device_of(ptr: int) -> int | None:
    """The device of foreign GPU memory, as the driver reports it (None when it cannot say)."""
    i = AllocationInfoC()
    if fn.pointer_get_info(ctypes.byref(i), ptr):
        return None
    return i.device if i.device >= 0 else None


def _prepare(dst, src, nbytes):
    d = _endpoint(dst, True)
    s = _endpoint(src, False)
    if nbytes is None:
        if d.nbytes != s.nbytes:
            raise ValueError(f"destination has {d.nbytes} bytes, source {s.nbytes}: pass "
                             "nbytes to copy part of them")
        n = d.nbytes
    else:
        n = _size(nbytes, "nbytes", allow_zero=True)
        if n > d.nbytes or n > s.nbytes:
            raise ValueError(f"nbytes {n} exceeds the destination ({d.nbytes}) or the source "
                             f"({s.nbytes})")
    # Foreign GPU arrays may still be written by work their producer queued on its own
    # streams, which memarea cannot join: wait for their device.
    waited = set()
    for e in (d, s):
        if e.buffer is not None:
            e.buffer._sync_pending()
        elif e.gpu_device is not None and e.gpu_device not in waited:
            synchronize(e.gpu_device)
            waited.add(e.gpu_device)
    return d, s, n


def copy(dst, src, nbytes: int | None = None) -> None:
    """Copies src into dst and returns when the copy is done (the GIL is released meanwhile).

    Either may be a memarea Buffer or View, or any C-contiguous array with DLPack, the CUDA
    array interface, NumPy's array interface or the buffer protocol (a torch / cupy / jax /
    numpy array, bytes, bytearray, memoryview), on any device or the host. Their sizes must
    match unless nbytes says how many bytes to copy."""
    d, s, n = _prepare(dst, src, nbytes)
    if n:
        check(fn.memcpy(d.ptr, s.ptr, n))
    del d, s  # releases the pins (DLPack deleters, buffer views) only now


def copy_async(dst, src, stream: Stream, nbytes: int | None = None) -> None:
    """Queues the copy of src into dst on a memarea Stream and returns. dst and src (any
    object copy() takes) stay referenced by the stream until stream.synchronize() or close(),
    so their memory outlives the copy; memarea Buffers also wait for it before they are freed
    or exported (DLPack, NumPy, memoryview)."""
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a memarea.Stream, not {type(stream).__name__}")
    stream._check()
    d, s, n = _prepare(dst, src, nbytes)
    if n:
        check(fn.memcpy_async(d.ptr, s.ptr, n, stream._handle))
    stream._keep.append((d, s))
    for e in (d, s):
        if e.buffer is not None:
            e.buffer._add_pending(stream)


# --- managed memory -----------------------------------------------------------------------------

ADVICE = {"read_mostly": 1, "unset_read_mostly": 2, "preferred_location": 3,
          "unset_preferred_location": 4, "accessed_by": 5, "unset_accessed_by": 6}


def _range(obj, offset, nbytes):
    if isinstance(obj, (Buffer, View)):
        base, size = obj.ptr, obj.nbytes
    else:
        raise TypeError(f"expected a memarea Buffer or View, not {type(obj).__name__}")
    offset = _size(offset, "offset", allow_zero=True)
    n = size - offset if nbytes is None else _size(nbytes, "nbytes")
    if offset + n > size:
        raise ValueError(f"range [{offset}, +{n}) runs past the {size} bytes")
    return base + offset, n


def _location(device, numa_node):
    if (device is None) == (numa_node is None):
        raise ValueError("give exactly one of device (an ordinal, or 'cpu' / CPU_DEVICE_ID) "
                         "and numa_node")
    if device == "cpu":
        return CPU_DEVICE_ID, None
    return (None if device is None else _int(device, "device"),
            None if numa_node is None else _int(numa_node, "numa_node"))


def prefetch(buffer, device=None, *, numa_node=None, stream=None, offset=0, nbytes=None):
    """Migrates managed (or memarea's pageable host) memory to `device` ("cpu" or
    CPU_DEVICE_ID: the host) or to host NUMA node `numa_node`, ordered on stream (None: the
    default stream). offset / nbytes select part of the buffer."""
    ptr, n = _range(buffer, offset, nbytes)
    device, node = _location(device, numa_node)
    sh = _stream_handle(stream)
    if node is not None:
        check(fn.mem_prefetch_host_numa_async(ptr, n, node, sh))
    else:
        check(fn.mem_prefetch_async(ptr, n, device, sh))
    if stream is not None and isinstance(buffer, (Buffer, View)):
        buffer._buffer._add_pending(stream)


def advise(buffer, advice: str, device=None, *, numa_node=None, offset=0, nbytes=None):
    """Advice on managed memory: "read_mostly", "preferred_location", "accessed_by" and their
    "unset_" forms, for `device` ("cpu" / CPU_DEVICE_ID: the host) or host NUMA node
    `numa_node`. read_mostly ignores the location (device may be omitted)."""
    if advice not in ADVICE:
        raise ValueError(f"advice must be one of {', '.join(ADVICE)}, not {advice!r}")
    if device is None and numa_node is None and "read_mostly" in advice:
        device = CPU_DEVICE_ID
    ptr, n = _range(buffer, offset, nbytes)
    device, node = _location(device, numa_node)
    if node is not None:
        check(fn.mem_advise_host_numa(ptr, n, ADVICE[advice], node))
    else:
        check(fn.mem_advise(ptr, n, ADVICE[advice], device))


def range_attributes(buffer, offset=0, nbytes=None) -> dict:
    """The managed-memory attributes of a range: read_mostly (bool), preferred_location and
    last_prefetch_location (a device, CPU_DEVICE_ID for the host, -2 for none or mixed) and
    accessed_by (the devices set by "accessed_by" advice)."""
    ptr, n = _range(buffer, offset, nbytes)
    out = {}
    one = ctypes.c_int()
    for name, attr in (("read_mostly", 1), ("preferred_location", 2),
                       ("last_prefetch_location", 4)):
        check(fn.mem_range_get_attribute(ctypes.byref(one), 4, attr, ptr, n))
        out[name] = bool(one.value) if name == "read_mostly" else one.value
    slots = max(device_count(), 1) + 1  # every device and the host
    many = (ctypes.c_int * slots)()
    check(fn.mem_range_get_attribute(many, 4 * slots, 3, ptr, n))
    out["accessed_by"] = [d for d in many if d != -2]
    return out


# --- peer access --------------------------------------------------------------------------------


def can_access_peer(device: int, peer: int) -> bool:
    """Whether `device` can be given access to `peer`'s memory (False for a device and
    itself)."""
    v = ctypes.c_int()
    check(fn.device_can_access_peer(ctypes.byref(v), _int(device, "device"), _int(peer, "peer")))
    return bool(v.value)


def enable_peer_access(device: int, peer: int) -> None:
    """Lets `device` read and write `peer`'s memory (process-wide, one direction).
    memarea.Error PEER_ACCESS_ALREADY_ENABLED when it already can."""
    with _OnDevice(_int(device, "device")):
        check(fn.device_enable_peer_access(_int(peer, "peer"), 0))


def disable_peer_access(device: int, peer: int) -> None:
    """Undoes enable_peer_access. memarea.Error PEER_ACCESS_NOT_ENABLED when it was not
    enabled."""
    with _OnDevice(_int(device, "device")):
        check(fn.device_disable_peer_access(_int(peer, "peer")))


_scopes: dict[tuple[int, int], list] = {}  # (device, peer) -> [live scopes, this round enabled]
_scopes_lock = threading.Lock()


class peer_access:
    """Access from `device` to `peer`'s memory for a with-block, reference-counted across the
    process as memarea's C++ scoped_access: the first live scope of a pair enables access, the
    last one out disables it, unless access was already enabled when the first one began (then
    no scope of that round disables it)."""

    def __init__(self, device: int, peer: int):
        self.pair = (_int(device, "device"), _int(peer, "peer"))
        self._entered = False

    def __enter__(self):
        with _scopes_lock:
            state = _scopes.get(self.pair)
            if state is None:
                enabled = True
                try:
                    enable_peer_access(*self.pair)
                except Error as e:
                    if e.status != Status.PEER_ACCESS_ALREADY_ENABLED:
                        raise
                    enabled = False
                state = _scopes[self.pair] = [0, enabled]
            state[0] += 1
        self._entered = True
        return self

    def __exit__(self, *exc):
        if not self._entered:
            return
        self._entered = False
        with _scopes_lock:
            state = _scopes[self.pair]
            state[0] -= 1
            if state[0] == 0:
                del _scopes[self.pair]
                if state[1]:
                    disable_peer_access(*self.pair)

    @staticmethod
    def count(device: int, peer: int) -> int:
        """Live scopes of the pair in this process."""
        with _scopes_lock:
            s = _scopes.get((device, peer))
            return s[0] if s else 0
