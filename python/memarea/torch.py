"""memarea as PyTorch's CUDA allocator (docs/python.md, "PyTorch and CuPy").

libmemarea exports memarea_torch_malloc and memarea_torch_free with the signatures
torch.cuda.memory.CUDAPluggableAllocator loads (include/memarea/torch.h): they draw from one
memarea pool per device, ordered on the stream torch passes, so the tensors are memarea memory:
memarea.lookup(t.data_ptr()), memarea.copy(t, ...) and memarea.ipc.handle(t) work on them.

Two ways in:

    with memarea.torch.use_pool(pool):          # torch.cuda.MemPool over memarea's allocator
        t = torch.empty(n, device="cuda")       # torch caches blocks it took from `pool`

    memarea.torch.install()                      # before torch's first CUDA allocation
    t = torch.empty(n, device="cuda")            # every tensor of the process from memarea

use_pool needs a torch with torch.cuda.MemPool(allocator) (2.5 and later) unless install() ran;
install() replaces torch's caching allocator for the whole process and must come before torch
allocates CUDA memory (torch refuses to swap an allocator in use). torch is imported when these
are called, never by ``import memarea``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import threading

from ._area import Pool
from ._device import get_device
from ._lib import TorchStats, check, fn, library_path

__all__ = ["MALLOC", "FREE", "allocator", "install", "installed", "use_pool", "set_pool",
           "get_pool", "stats"]

MALLOC = "memarea_torch_malloc"
"""The allocation entry point's name in libmemarea (memarea.library_path)."""
FREE = "memarea_torch_free"
"""The free entry point's name in libmemarea."""

_lock = threading.RLock()
_allocator = None            # the CUDAPluggableAllocator, made once
_installed = False
_set: dict[int, Pool | None] = {}   # the Pool set per device by this module (None: the default)
_kept: dict[int, Pool] = {}  # handle -> Pool: set somewhere, or pieces of it still live


def _torch():
    # Looked up at each call (sys.modules first): the tests' stand-in takes the real one's place.
    return importlib.import_module("torch")


def allocator():
    """torch.cuda.memory.CUDAPluggableAllocator over libmemarea's pair (made once per process:
    torch keeps the function pointers it loaded)."""
    global _allocator
    with _lock:
        if _allocator is None:
            _allocator = _torch().cuda.memory.CUDAPluggableAllocator(library_path, MALLOC, FREE)
        return _allocator


def install() -> None:
    """Makes memarea the allocator of every CUDA tensor of this process
    (torch.cuda.memory.change_current_allocator). Call it before torch's first CUDA
    allocation: torch raises RuntimeError once its caching allocator is in use. Each device
    draws from its default pool (get_pool) or the one use_pool / set_pool chose. torch's
    memory statistics (memory_reserved, max_memory_allocated) and snapshot() do not cover a
    pluggable allocator: read memarea's (stats(), Pool.stats())."""
    global _installed
    with _lock:
        if _installed:
            return
        _torch().cuda.memory.change_current_allocator(allocator())
        _installed = True


def installed() -> bool:
    """Whether install() made memarea torch's allocator in this process."""
    return _installed


def _device_of(device) -> int:
    if device is None:
        return get_device()
    if hasattr(device, "index"):  # a torch.device
        device = device.index if device.index is not None else get_device()
    if type(device) is not int:
        raise TypeError(f"device must be an int or a torch.device, not {type(device).__name__}")
    return device


def _handle(pool: Pool | None):
    if pool is None:
        return None
    if pool._handle is None:
        raise ValueError("the pool is closed")
    return pool._handle


def _sweep() -> None:
    """Lets go of pools set by no device whose pieces all came back (the caller holds _lock)."""
    in_use = {id(p) for p in _set.values() if p is not None}
    for h, p in list(_kept.items()):
        if id(p) in in_use:
            continue
        if p._handle is None or stats(p)["live_pieces"] == 0:  # closed: nothing of it lives
            del _kept[h]


def set_pool(pool: Pool | None, device=None) -> Pool | None:
    """Sets the pool memarea_torch_malloc draws from on `device` (None: the pool's own device;
    None as pool: the current device's default pool) and returns the Pool set before (None:
    the default). Process-wide for the device, not per thread. The pool must be one of device
    (or managed) memory of that device. The package keeps a pool alive while it is set or while
    tensors of it live."""
    if pool is not None and not isinstance(pool, Pool):
        raise TypeError(f"pool must be a memarea.Pool or None, not {type(pool).__name__}")
    if device is None:
        device = pool.device if pool is not None else get_device()
    device = _device_of(device)
    with _lock:
        check(fn.torch_set_pool(device, _handle(pool)))
        previous = _set.get(device)
        _set[device] = pool
        if pool is not None:
            _kept[pool._handle] = pool
        _sweep()
        return previous


def get_pool(device=None) -> int:
    """The C handle (an int) of the pool allocations on `device` draw from now: the one set,
    else the device's default pool, made at first use and kept for the process."""
    h = ctypes.c_void_p()
    check(fn.torch_get_pool(ctypes.byref(h), _device_of(device)))
    return h.value


def stats(pool: Pool | None = None) -> dict:
    """What memarea_torch_malloc handed out and has not had back, from `pool` (None: from every
    pool): live_pieces, live_bytes, and refused_frees (frees of pointers it never handed out,
    in the whole process)."""
    s = TorchStats()
    check(fn.torch_get_stats(ctypes.byref(s), _handle(pool)))
    return {n: getattr(s, n) for n, _ in TorchStats._fields_}


def _mem_pool_api(torch):
    """torch.cuda.MemPool and use_mem_pool where MemPool takes an allocator, else None."""
    cuda = torch.cuda
    mem_pool = getattr(cuda, "MemPool", None) or getattr(cuda.memory, "MemPool", None)
    use = getattr(cuda, "use_mem_pool", None) or getattr(cuda.memory, "use_mem_pool", None)
    if mem_pool is None or use is None:
        return None
    return mem_pool, use


@contextlib.contextmanager
def use_pool(pool: Pool, device=None):
    """Within the block, torch's CUDA tensors on the pool's device come from `pool`.

    Without install(): a torch.cuda.MemPool over memarea's allocator, entered with
    torch.cuda.use_mem_pool for the block (the calling thread's allocations, as torch's
    use_mem_pool does); torch caches the blocks it took from the pool and gives them back when
    the MemPool (yielded by the block) and its tensors are gone. After install(): every
    allocation on the device, no MemPool (None is yielded). Either way the pool is memarea's
    torch pool for the device during the block (set_pool), restored at its end, also on an
    exception; blocks nest."""
    if not isinstance(pool, Pool):
        raise TypeError(f"pool must be a memarea.Pool, not {type(pool).__name__}")
    d = _device_of(pool.device if device is None else device)
    torch = _torch()
    api = None if _installed else _mem_pool_api(torch)
    if api is None and not _installed:
        raise RuntimeError("this torch has no torch.cuda.MemPool(allocator) (PyTorch 2.5 and "
                           "later): call memarea.torch.install() before torch's first CUDA "
                           "allocation instead")
    previous = set_pool(pool, d)
    try:
        if api is None:
            yield None
        else:
            mem_pool_type, use_mem_pool = api
            mp = mem_pool_type(allocator().allocator())
            with use_mem_pool(mp, device=d):
                yield mp
    finally:
        set_pool(previous, d)
