"""Buffers and their zero-copy views: what a pointer is, DLPack devices, the array protocol
(memarea._core re-exports them)."""

from __future__ import annotations

import ctypes
import sys
from typing import NamedTuple

from . import _interop as dl
from ._device import _address, _backend, _int, _size, _stream_object
from ._ext import native
from ._lib import AllocationInfoC, IpcHandle, check, fn, raise_status

# --- what a pointer is ------------------------------------------------------------------------------

_KIND_NAMES = {0: "unknown", 1: "device", 2: "host", 3: "managed", 4: "mapped", 5: "registered",
               6: "ipc", 7: "host_numa"}
# Memory the host may read and write directly (and so view through NumPy / memoryview).
_HOST_KINDS = frozenset(("host", "mapped", "registered", "managed", "host_numa"))


class AllocationInfo(NamedTuple):
    """The allocation that contains a pointer (memarea_allocation_info). kind is one of
    "device", "host" (pinned), "mapped", "registered", "managed", "ipc" (opened from another
    process), "host_numa" (memarea's pageable host memory) or "unknown". size is what was asked
    for (a pool piece's allocation size; "ipc": the buffer the other process exported). device
    is where the memory lives ("ipc": the exporter's device), -1 for host memory. capacity is
    the bytes usable from base: a pool piece's rounded size, else equal to size."""
    base: int
    size: int
    kind: str
    device: int
    capacity: int


def lookup(obj) -> AllocationInfo:
    """The allocation that contains obj: an int address, a Buffer or a View, or the first byte
    of an array with data_ptr() (torch) or __cuda_array_interface__ (CuPy) (memarea's own
    records first, then the driver's)."""
    if isinstance(obj, (Buffer, View)):
        ptr = obj.ptr
    elif isinstance(obj, int) or not (hasattr(obj, "data_ptr") or
                                      hasattr(obj, "__cuda_array_interface__")):
        ptr = _address(obj, "pointer")
    else:
        from .ipc import _foreign_pointer
        ptr = _address(_foreign_pointer(obj), "pointer")
    if native is not None:
        base, size, kind, device, capacity = native.pointer_info(ptr)
        return AllocationInfo(base, size, _KIND_NAMES.get(kind, "unknown"), device, capacity)
    i = AllocationInfoC()
    check(fn.pointer_get_info(ctypes.byref(i), ptr))
    return AllocationInfo(i.base or 0, i.size, _KIND_NAMES.get(i.kind, "unknown"), i.device,
                          i.capacity)


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
        the memory alive (with the compiled extension it is a buffer-protocol export of the
        Buffer: free() raises BufferError until it is released)."""
        if not self.host_accessible:
            raise TypeError(f"memarea {self.kind} memory is not host memory: the host cannot "
                            "view it (copy it with memarea.copy)")
        buf = self._buffer
        buf._check_open()
        buf._sync_pending()
        mv = buf._host_bytes()
        start, n = self.ptr - buf.ptr, self.nbytes
        if start or n != len(mv):
            mv = mv[start:start + n]
        fmt = self._dtype.format
        if fmt is None or self._dtype is dl.UINT8 and len(self._shape) == 1:
            return mv
        return mv.cast(fmt, self._shape)

    def _exported_view(self) -> memoryview:
        # What the buffer protocol exports (memoryview(x), numpy.frombuffer(x)): refused with
        # BufferError, which NumPy and memoryview expect, where there is nothing to export --
        # memory the host cannot touch, or a dtype the struct module has no format for (NumPy
        # then reads __array_interface__, which has one).
        if not self.host_accessible:
            raise BufferError(f"memarea {self.kind} memory is not host memory: the host cannot "
                              "view it through the buffer protocol (copy it to host memory with "
                              "memarea.copy, or use DLPack)")
        if self._dtype.format is None:
            raise BufferError(f"{self._dtype.name} has no buffer-protocol format: view the bytes "
                              "(x.view('uint8')), or use numpy.asarray or DLPack")
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


class _PureBufferCore:
    """Buffer's state and hot path in Python (ctypes), where the compiled extension's
    BufferCore is absent (memarea/_ext.py): the same attributes and behaviour."""
    __slots__ = ("_ptr", "_nbytes", "device", "kind", "_owner", "_mode", "_stream", "_exports",
                 "_pending", "_buffer_views", "__weakref__")

    @classmethod
    def _make(cls, ptr, nbytes, device, kind, owner, mode, stream=None):
        b = object.__new__(cls)
        b._ptr, b._nbytes, b.device, b.kind = ptr, nbytes, device, kind
        b._owner, b._mode, b._stream = owner, mode, stream
        b._exports = b._pending = None
        b._buffer_views = 0
        return b

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

    def _check_open(self):
        if self._ptr is None:
            raise ValueError("the memarea Buffer was freed")

    def _host_bytes(self) -> memoryview:
        # The whole buffer as bytes, counted as an export until the memoryviews made from it
        # are all released (the ctypes array they share is then dropped, and its pin with it).
        raw = (ctypes.c_ubyte * self._nbytes).from_address(self._ptr)
        raw._memarea_pin = _ViewPin(self)
        return memoryview(raw).cast("B")

    if sys.version_info >= (3, 12):
        def __buffer__(self, flags):
            """The buffer protocol (PEP 688): memoryview(x), numpy.frombuffer(x)."""
            return self._exported_view()

        def __release_buffer__(self, view):
            # Its presence matters as much as its work: NumPy holds a buffer-protocol export
            # (and so the count free() checks) only of types that release buffers; of others
            # it keeps the object and drops the export at once.
            view.release()

    def free(self) -> None:
        """Frees the memory now (after memarea stream work queued on it completes). Raises
        BufferError while a DLPack consumer or a buffer-protocol export (a memoryview, a NumPy
        array made through the buffer protocol) still holds it. Freeing twice does nothing."""
        if self._ptr is None:
            return
        if self._exports:
            raise BufferError(f"the buffer is still held by {len(self._exports)} DLPack "
                              "consumer(s) (torch/cupy/jax tensors made from it): drop them first")
        if self._buffer_views:
            raise BufferError("the buffer is still viewed through the buffer protocol by "
                              f"{self._buffer_views} export(s) (memoryview(buffer), "
                              "numpy.frombuffer, numpy.asarray): release them first")
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
        if mode == Buffer._POOL and getattr(self._owner, "_orphaned", False):
            self._owner._close_orphaned()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        # At interpreter exit module globals may already be gone: the process exits anyway.
        if getattr(self, "_ptr", None) is not None and fn is not None:
            self.free()


class _ViewPin:
    """Counts one buffer-protocol export of a Buffer (pure path) while it lives."""
    __slots__ = ("buffer",)

    def __init__(self, buffer):
        self.buffer = buffer
        buffer._buffer_views += 1

    def __del__(self):
        self.buffer._buffer_views -= 1


if native is not None:
    _BufferCore, _ViewCore = native.BufferCore, native.ViewCore
else:
    class _PureViewCore:
        """View's buffer protocol where there is no compiled extension: Python 3.12+ only
        (PEP 688)."""
        __slots__ = ()

        if sys.version_info >= (3, 12):
            def __buffer__(self, flags):
                """The buffer protocol (PEP 688): memoryview(x), numpy.frombuffer(x)."""
                return self._exported_view()

            def __release_buffer__(self, view):
                view.release()  # as _PureBufferCore's

    _BufferCore, _ViewCore = _PureBufferCore, _PureViewCore


class Buffer(_BufferCore, _Array):
    """Memory memarea allocated: an Area's or a Pool's allocation, or memory of another process
    opened through IPC. A 1-D array of bytes (view() gives typed views). Memory the host can
    touch has the buffer protocol (memoryview(buf), numpy.frombuffer(buf)).

    Freed deterministically by free() or a with-block, or by the garbage collector once nothing
    refers to it (views, NumPy arrays and DLPack tensors made from it refer to it). Pickling it
    (multiprocessing, concurrent.futures) sends an IPC handle: the receiver opens the same
    device memory, under memarea's IPC lifetime rules (docs/ipc.md)."""
    __slots__ = ()

    # How the memory goes back (fixed at creation; _owner is the Area, Pool or None).
    _AREA, _POOL, _FREE, _IPC = range(4)

    def __init__(self):
        raise TypeError("Buffers come from Area.alloc, Pool.alloc or memarea.ipc.open")

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
    def device_ptr(self) -> int:
        """The address the device uses: for mapped host memory its device pointer, otherwise
        ptr."""
        self._check_open()
        if self.kind not in ("mapped", "registered"):
            return self._ptr
        p = ctypes.c_void_p()
        check(fn.host_get_device_pointer(ctypes.byref(p), self._ptr))
        return p.value or 0

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

    # -- IPC
    def ipc_handle(self) -> bytes:
        """The 128-byte IPC handle of this device memory (plain bytes: send them anywhere;
        memarea.ipc.open opens them in another process). The Buffer must stay alive until the
        other process opened it; freeing it while opened elsewhere is deferred until they all
        closed it (docs/ipc.md). NOT_SUPPORTED for memory legacy IPC cannot share (host,
        managed, imported)."""
        if native is not None:
            return native.ipc_handle(self.ptr)
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


class View(_ViewCore, _Array):
    """A zero-copy typed view of part of a Buffer (Buffer.view): shape, dtype, and every export
    a Buffer has (DLPack, CUDA array interface, NumPy, memoryview, the buffer protocol typed and
    shaped as the view). It keeps the Buffer alive."""
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


if native is not None:
    native.setup(Buffer, raise_status, _size, _stream_object)

# The buffer methods call these module functions, which take buffers: imported last, once
# Buffer and View exist, so that the two modules can name each other (memarea._core imports
# this module first).
from ._ops import advise, copy, prefetch, range_attributes  # noqa: E402
