"""memarea as CuPy's allocator (docs/python.md, "PyTorch and CuPy").

    with memarea.cupy.use_pool(pool):
        x = cupy.empty(n)        # a piece of `pool`, owned by x's memory object

Each allocation is a Buffer of the pool, made on CuPy's current stream and wrapped in
cupy.cuda.UnownedMemory with the Buffer as its owner: the piece lives exactly as long as CuPy's
memory object, and goes back to the pool (on its stream) when CuPy drops it. The arrays are
memarea memory: memarea.lookup(x.data.ptr), memarea.copy and memarea.ipc.handle(x) work on
them. cupy is imported when use_pool is called, never by ``import memarea``.
"""

from __future__ import annotations

import contextlib
import importlib

from ._area import Pool

__all__ = ["allocator", "use_pool"]


def _cupy():
    # Looked up at each call (sys.modules first): the tests' stand-in takes the real one's place.
    return importlib.import_module("cupy")


def allocator(pool: Pool):
    """The function cupy.cuda.set_allocator takes: nbytes -> cupy.cuda.MemoryPointer of a
    piece of `pool`, ordered on CuPy's current stream."""
    if not isinstance(pool, Pool):
        raise TypeError(f"pool must be a memarea.Pool, not {type(pool).__name__}")
    cp = _cupy()
    cuda = cp.cuda
    device = pool.device
    streams = {}  # native stream -> the stream object memarea allocates on (None: default)

    def alloc(nbytes: int):
        native = cuda.get_current_stream().ptr
        s = streams.get(native, False)
        if s is False:
            from ._stream import ExternalStream
            s = None if native == 0 else ExternalStream(native, device)
            streams[native] = s
        # CuPy asks for 0 bytes too (an empty array): a piece of one byte keeps every pointer
        # distinct and memarea's own.
        buf = pool.alloc(nbytes or 1, s)
        mem = cuda.UnownedMemory(buf.ptr, nbytes, buf, device)
        return cuda.MemoryPointer(mem, 0)

    return alloc


@contextlib.contextmanager
def use_pool(pool: Pool):
    """Within the block, CuPy allocates from `pool` (cupy.cuda.using_allocator where CuPy has
    it, which is per thread; else cupy.cuda.set_allocator, restored at the end, also on an
    exception). Blocks nest."""
    cuda = _cupy().cuda
    alloc = allocator(pool)
    using = getattr(cuda, "using_allocator", None)
    if using is not None:
        with using(alloc):
            yield alloc
        return
    previous = cuda.get_allocator()
    cuda.set_allocator(alloc)
    try:
        yield alloc
    finally:
        cuda.set_allocator(previous)
