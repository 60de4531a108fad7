"""Copies, managed-memory prefetch and advice, peer access (memarea._core re-exports them)."""

from __future__ import annotations

import ctypes
import threading

from . import _interop as dl
from ._buffer import Buffer, View, _KIND_NAMES
from ._device import (CPU_DEVICE_ID, Stream, _OnDevice, _int, _size, _stream_handle, device_count,
                      synchronize)
from ._lib import AllocationInfoC, Error, Status, check, fn

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
        from ._stream import required_stream  # a foreign one (an int, torch's, cupy's)
        stream = required_stream(stream)
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
          "unset_preferred_location": 4, "accessed_by": 5, "unset_accessed_by": 6,
          "coarse_grain": 100, "unset_coarse_grain": 101}
"""The advice advise() takes, by name, with the C API's values. "coarse_grain" is HIP's (real on
AMD, modelled on sim; CUDA and HIP's NVIDIA platform raise memarea.Error NOT_SUPPORTED)."""

COHERENCY_MODES = ("fine_grain", "coarse_grain", "indeterminate")
"""What coherency_mode() answers, in the order of the C API's values (0, 1, 2)."""

ATTACH_FLAGS = {"global": 0x1, "host": 0x2, "single": 0x4}
"""attach_mem()'s flags by name, with the C API's values (MEMAREA_MEM_ATTACH_*)."""


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
    if stream is not None and not isinstance(stream, Stream):
        from ._stream import as_stream  # a foreign stream: wrapped, kept for the buffer below
        stream = as_stream(stream)
    sh = _stream_handle(stream)
    if node is not None:
        check(fn.mem_prefetch_host_numa_async(ptr, n, node, sh))
    else:
        check(fn.mem_prefetch_async(ptr, n, device, sh))
    if stream is not None and isinstance(buffer, (Buffer, View)):
        buffer._buffer._add_pending(stream)


def advise(buffer, advice: str, device=None, *, numa_node=None, offset=0, nbytes=None):
    """Advice on managed memory: "read_mostly", "preferred_location", "accessed_by",
    "coarse_grain" and their "unset_" forms, for `device` ("cpu" / CPU_DEVICE_ID: the host) or
    host NUMA node `numa_node`. read_mostly and coarse_grain ignore the location (device may be
    omitted)."""
    if advice not in ADVICE:
        raise ValueError(f"advice must be one of {', '.join(ADVICE)}, not {advice!r}")
    if device is None and numa_node is None and ("read_mostly" in advice
                                                 or "coarse_grain" in advice):
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


def coherency_mode(buffer, offset=0, nbytes=None) -> str:
    """HIP's coherency mode of a range: "fine_grain" (the default), "coarse_grain" (after
    advise(buffer, "coarse_grain")) or "indeterminate" (its pages differ). memarea.Error
    NOT_SUPPORTED where coarse-grain advice is (CUDA, HIP's NVIDIA platform); memarea's host
    memory is always "fine_grain"."""
    ptr, n = _range(buffer, offset, nbytes)
    v = ctypes.c_int()
    check(fn.mem_range_get_attribute(ctypes.byref(v), 4, 100, ptr, n))
    return COHERENCY_MODES[v.value]


def attach_mem(memory, flags: str, stream=None, nbytes=None) -> None:
    """Associates memory with `stream` (None: the current device's default stream), queued on
    it: flags "single" (that stream only), "global" (every stream) or "host" (the host only).

    A memarea Buffer of managed memory goes whole (a View must start where it does; nbytes
    None, 0 or its size). Memory memarea did not allocate -- a NumPy array, bytearray,
    memoryview or anything with the buffer protocol or NumPy's array interface -- is taken
    where the stream's device reads pageable memory (device_properties(d)
    ["pageable_memory_access"]), its first nbytes bytes (default: all); elsewhere memarea.Error
    NOT_SUPPORTED. The association lasts while the memory does: keep it alive."""
    if flags not in ATTACH_FLAGS:
        raise ValueError(f"flags must be one of {', '.join(ATTACH_FLAGS)}, not {flags!r}")
    sh = _stream_handle(stream)
    if isinstance(memory, (Buffer, View)):
        memory._buffer._check_open()
        ptr = memory.ptr
        length = 0 if nbytes is None else _size(nbytes, "nbytes", allow_zero=True)
    else:
        e = _endpoint(memory, False)
        length = e.nbytes if nbytes is None else _size(nbytes, "nbytes")
        if length > e.nbytes:
            raise ValueError(f"nbytes {length} exceeds the memory's {e.nbytes} bytes")
        ptr = e.ptr
    check(fn.stream_attach_mem_async(sh, ptr, length, ATTACH_FLAGS[flags]))


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
