"""A stand-in for the parts of PyTorch that memarea.torch uses, with torch's names and
signatures (torch 2.11: torch.cuda.memory.CUDAPluggableAllocator, change_current_allocator,
torch.cuda.MemPool(allocator), torch.cuda.use_mem_pool(pool, device)), for the tests on machines
without torch. Like torch's C++, it loads the allocator pair from the shared library by name
and calls it through function pointers of the pluggable types (ssize_t, int, cudaStream_t),
and keeps each pointer's size, device and stream to pass back at the free.

Tensors (``empty(nbytes, device)``) are untyped bytes with data_ptr() and
__cuda_array_interface__. Under use_mem_pool the MemPool caches freed segments, as torch's
caching allocator does, until empty_cache() or the MemPool goes; after
change_current_allocator every tensor calls the pair; otherwise the stand-in's own allocator
serves host memory (bytes memarea does not know) and marks the allocator initialised."""

import contextlib
import ctypes
import threading
import types
import weakref

__version__ = "2.11.0+stand-in"

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)


class _CUDAAllocator:
    """torch._C._cuda_CUDAAllocator: the C++ allocator behind a CUDAPluggableAllocator."""

    def __init__(self, malloc, free):
        self._malloc, self._free = malloc, free
        self._meta = {}
        self._lock = threading.Lock()

    def raw_alloc(self, size, device, stream):
        r = self._malloc(size, device, stream) or 0
        with self._lock:
            self._meta[r] = (size, device, stream)
        return r

    def raw_delete(self, ptr):
        with self._lock:
            if ptr not in self._meta:
                raise RuntimeError("Trying to free a pointer not allocated here")
            size, device, stream = self._meta.pop(ptr)
        self._free(ptr, size, device, stream)


class _Memory:
    """torch.cuda.memory: the pluggable allocator and its installation."""

    class CUDAPluggableAllocator:
        def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
            lib = ctypes.CDLL(path_to_so_file)
            alloc = ctypes.cast(getattr(lib, alloc_fn_name), ctypes.c_void_p).value
            free = ctypes.cast(getattr(lib, free_fn_name), ctypes.c_void_p).value
            self._allocator = _CUDAAllocator(_MALLOC(alloc), _FREE(free))

        def allocator(self):
            return self._allocator

    current = None       # the pluggable allocator installed, None: the caching allocator
    initialized = False  # the caching allocator has served an allocation

    @classmethod
    def change_current_allocator(cls, allocator):
        if cls.initialized:
            raise RuntimeError("Can't swap an already initialized allocator")
        cls.current = allocator._allocator


class MemPool:
    """torch.cuda.MemPool(allocator=None, use_on_oom=False, no_split=False)."""

    def __init__(self, allocator=None, use_on_oom=False, no_split=False):
        self._allocator = allocator
        self.cached = []  # freed segments: (ptr, size, device)
        self.segments = 0

    @property
    def allocator(self):
        return self._allocator

    def release(self):
        """What torch does when a MemPool goes: its cached segments go back."""
        for ptr, _, _ in self.cached:
            self._allocator.raw_delete(ptr)
        self.segments -= len(self.cached)
        self.cached = []

    def __del__(self):
        if self._allocator is not None:
            self.release()


_tls = threading.local()


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    """torch.cuda.use_mem_pool: the calling thread's allocations on device go to pool."""
    stack = _tls.__dict__.setdefault("pools", [])
    stack.append((pool, device))
    try:
        yield
    finally:
        stack.pop()


class Stream:
    """torch.cuda.Stream as memarea reads it: cuda_stream and device_index."""

    def __init__(self, cuda_stream=0, device_index=0):
        self.cuda_stream, self.device_index = cuda_stream, device_index


def current_stream(device=None):
    s = _tls.__dict__.get("stream")
    return s if s is not None else Stream(0, device or 0)


@contextlib.contextmanager
def stream(s):
    """torch.cuda.stream(s): s is the thread's current stream in the block."""
    old = _tls.__dict__.get("stream")
    _tls.stream = s
    try:
        yield
    finally:
        _tls.stream = old


def synchronize(device=None):
    """torch.cuda.synchronize: nothing is queued by the stand-in."""


def max_memory_reserved(device=None):
    """The caching allocator's peak: the stand-in's own allocator keeps no segments."""
    return 0


def empty_cache():
    """Gives back what the MemPools of this thread cache (torch.cuda.empty_cache)."""
    for pool, _ in _tls.__dict__.get("pools", []):
        pool.release()


class Tensor:
    """Bytes on a device: data_ptr(), nbytes, device, __cuda_array_interface__."""

    def __init__(self, ptr, nbytes, device, keep=None):
        self._ptr, self.nbytes, self.device, self._keep = ptr, nbytes, device, keep

    def data_ptr(self):
        return self._ptr

    @property
    def __cuda_array_interface__(self):
        return {"data": (self._ptr, False), "shape": (self.nbytes,), "typestr": "|u1",
                "strides": None, "version": 3}


uint8 = "uint8"


def _ordinal(device):
    if isinstance(device, str):  # "cuda", "cuda:1"
        return int(device.partition(":")[2] or 0)
    return int(device)


def empty(nbytes, dtype=uint8, device=0):
    """An uninitialised tensor of nbytes (uint8 only) on device (an ordinal, "cuda" or
    "cuda:N"), from whichever allocator serves now."""
    device = _ordinal(device)
    stack = _tls.__dict__.get("pools", [])
    mine = [p for p, d in stack if d is None or d == device]
    stream_ = current_stream(device).cuda_stream
    if mine and mine[-1].allocator is not None:
        pool = mine[-1]
        size = (max(nbytes, 1) + 511) // 512 * 512
        hit = next((c for c in pool.cached if c[1] >= size and c[2] == device), None)
        if hit is not None:
            pool.cached.remove(hit)
            ptr, size = hit[0], hit[1]
        else:
            ptr = pool.allocator.raw_alloc(size, device, stream_)
            if not ptr:
                raise OutOfMemoryError(f"CUDA out of memory (MemPool): {size} bytes")
            pool.segments += 1
        t = Tensor(ptr, nbytes, device, pool)
        weakref.finalize(t, pool.cached.append, (ptr, size, device))
        return t
    if _Memory.current is not None:
        a = _Memory.current
        ptr = a.raw_alloc(nbytes, device, stream_)
        if not ptr and nbytes:
            raise OutOfMemoryError(f"CUDA out of memory: {nbytes} bytes")
        t = Tensor(ptr, nbytes, device)
        if ptr:
            weakref.finalize(t, a.raw_delete, ptr)
        return t
    _Memory.initialized = True
    block = ctypes.create_string_buffer(max(nbytes, 1))
    return Tensor(ctypes.addressof(block), nbytes, device, block)


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError."""


cuda = types.SimpleNamespace(memory=_Memory, MemPool=MemPool, use_mem_pool=use_mem_pool,
                             Stream=Stream, current_stream=current_stream, stream=stream,
                             empty_cache=empty_cache, OutOfMemoryError=OutOfMemoryError,
                             synchronize=synchronize, max_memory_reserved=max_memory_reserved,
                             is_available=lambda: True)
