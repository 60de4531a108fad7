"""Sharing device memory between processes (docs/ipc.md).

buffer.ipc_handle() gives 128 plain bytes; open(handle) in another process returns a Buffer of
the same device memory (kind "ipc"), closed by free(), a with-block or the garbage collector.
Buffers pickle as their handle, so multiprocessing (spawn, forkserver) and concurrent.futures
pass device memory, not copies.

memarea's lifetime rules apply: the exporter's Buffer must stay alive until the importer has
opened it (a handle names an allocation, not an address: once freed it is stale, and open
raises memarea.Error INVALID_HANDLE); freeing it while another process has it open is deferred
until the last importer closes it or dies. A fork()ed child without exec cannot use its
parent's CUDA or HIP state: use the spawn or forkserver start methods.
"""

from __future__ import annotations

import ctypes

from ._core import Buffer, _size
from ._lib import IPC_HANDLE_SIZE, AllocationInfoC, IpcHandle, check, fn, raise_status

__all__ = ["handle", "open", "remove_stale_objects", "HANDLE_SIZE"]

HANDLE_SIZE = IPC_HANDLE_SIZE
"""Bytes in an IPC handle (128)."""


def handle(buffer) -> bytes:
    """buffer.ipc_handle() of a Buffer or View; of a framework's array whose memory memarea
    allocated (a torch tensor made under memarea.torch, a CuPy array under memarea.cupy: any
    object with data_ptr() or __cuda_array_interface__), the handle of its first byte, which
    opens (memarea.ipc.open(h, nbytes)) at that byte in the other process.
    memarea.Error INVALID_VALUE where memarea did not allocate the memory."""
    if isinstance(buffer, Buffer):
        return buffer.ipc_handle()
    ptr = _foreign_pointer(buffer)
    h = IpcHandle()
    check(fn.ipc_get_mem_handle(ctypes.byref(h), ptr))
    return bytes(h.bytes)


def _foreign_pointer(obj) -> int:
    """The address of the first byte of a View or a framework's array."""
    from ._core import View
    if isinstance(obj, View):
        return obj.ptr
    data_ptr = getattr(obj, "data_ptr", None)
    if callable(data_ptr):  # torch.Tensor
        return int(data_ptr())
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and "data" in cai:  # CuPy, Numba, JAX
        return int(cai["data"][0])
    raise TypeError("expected a memarea Buffer or View, or an array with data_ptr() or "
                    f"__cuda_array_interface__, not {type(obj).__name__}")


def open(handle: bytes, nbytes: int | None = None, *,  # noqa: A001 (the module's verb)
         lazy_enable_peer_access: bool = False) -> Buffer:
    """Opens a handle another process exported and returns a Buffer of that memory.

    nbytes: the size the Buffer covers (None: the rest of the buffer the handle names, from
    its pointer: exactly what the other process exported, e.g. a pool piece and not the rest
    of its block; a pickled Buffer carries its own). The Buffer's device is the one the memory
    lives on (the exporter's). lazy_enable_peer_access: the current device may differ from
    the memory's; peer access is enabled as needed."""
    if isinstance(handle, (bytearray, memoryview)):
        handle = bytes(handle)
    if not isinstance(handle, bytes):
        raise TypeError(f"an IPC handle is bytes, not {type(handle).__name__}")
    if len(handle) != HANDLE_SIZE:
        raise ValueError(f"an IPC handle has {HANDLE_SIZE} bytes, not {len(handle)}")
    h = IpcHandle()
    ctypes.memmove(h.bytes, handle, HANDLE_SIZE)
    p = ctypes.c_void_p()
    st = fn.ipc_open_mem_handle(ctypes.byref(p), h, 1 if lazy_enable_peer_access else 0)
    if st:
        raise_status(st)
    ptr = p.value
    try:
        info = AllocationInfoC()
        check(fn.pointer_get_info(ctypes.byref(info), ptr))
        available = info.base + info.size - ptr
        if nbytes is None:
            nbytes = available
        else:
            nbytes = _size(nbytes, "nbytes")
            if nbytes > available:
                raise ValueError(f"nbytes {nbytes} exceeds the {available} bytes the handle's "
                                 "buffer has from its pointer")
    except BaseException:
        fn.ipc_close_mem_handle(ptr)  # nothing may stay open when open fails
        raise
    return Buffer._make(ptr, nbytes, info.device, "ipc", None, Buffer._IPC)


def _rebuild(handle: bytes, nbytes: int) -> Buffer:
    """Unpickles a Buffer: opens its handle in this process."""
    return open(handle, nbytes)


def remove_stale_objects() -> int:
    """Removes from /dev/shm what processes that died without cleaning up left (never a live
    process's or another user's); returns how many. memarea's background thread does it too."""
    n = ctypes.c_size_t()
    check(fn.ipc_remove_stale_objects(ctypes.byref(n)))
    return n.value

