"""A stand-in for the parts of CuPy that memarea.cupy uses, with CuPy's names and signatures
(CuPy 14: cupy.cuda.set_allocator, get_allocator, using_allocator, get_current_stream,
UnownedMemory(ptr, size, owner, device_id), MemoryPointer(mem, offset)), for the tests on
machines without CuPy. empty(nbytes) asks the thread's allocator (using_allocator), else the
process's (set_allocator), else its own (host bytes memarea does not know), as CuPy does; its
arrays hold their MemoryPointer, so the allocation lives exactly as long as the array."""

import contextlib
import ctypes
import threading
import types

__version__ = "14.2.0+stand-in"

_tls = threading.local()
_global = [None]  # set_allocator's


class UnownedMemory:
    """cupy.cuda.UnownedMemory: memory CuPy does not own; `owner` is kept alive by it."""

    def __init__(self, ptr, size, owner, device_id=-1):
        self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id


class MemoryPointer:
    """cupy.cuda.MemoryPointer(mem, offset)."""

    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset
        self.device_id = getattr(mem, "device_id", 0)


class _HostMemory:
    def __init__(self, size):
        self._block = ctypes.create_string_buffer(max(size, 1))
        self.ptr, self.size, self.device_id = ctypes.addressof(self._block), size, 0


class Stream:
    """cupy.cuda.Stream as memarea reads it: ptr and device_id; a context manager that makes
    it the thread's current stream."""

    def __init__(self, ptr=0, device_id=0):
        self.ptr, self.device_id = ptr, device_id

    def __enter__(self):
        _tls.__dict__.setdefault("streams", []).append(self)
        return self

    def __exit__(self, *exc):
        _tls.streams.pop()


def get_current_stream():
    streams = _tls.__dict__.get("streams")
    return streams[-1] if streams else Stream(0, 0)


def set_allocator(allocator=None):
    _global[0] = allocator


def get_allocator():
    a = _tls.__dict__.get("allocator")
    return a if a is not None else _global[0]


@contextlib.contextmanager
def using_allocator(allocator=None):
    """The calling thread's allocator within the block."""
    old = _tls.__dict__.get("allocator")
    _tls.allocator = allocator
    try:
        yield
    finally:
        _tls.allocator = old


class ndarray:
    """Bytes: .data (a MemoryPointer), nbytes, __cuda_array_interface__."""

    def __init__(self, data, nbytes):
        self.data, self.nbytes = data, nbytes

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.data.ptr, False), "shape": (self.nbytes,), "typestr": "|u1",
                "strides": None, "version": 3}


def empty(nbytes):
    a = get_allocator()
    data = a(nbytes) if a is not None else MemoryPointer(_HostMemory(nbytes), 0)
    return ndarray(data, nbytes)


cuda = types.SimpleNamespace(set_allocator=set_allocator, get_allocator=get_allocator,
                             using_allocator=using_allocator,
                             get_current_stream=get_current_stream, Stream=Stream,
                             UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer)
