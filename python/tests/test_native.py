"""The two paths (the compiled extension memarea._native, and ctypes alone) and the buffer
protocol: which path serves, that the hot path behaves alike on both, and memoryview /
numpy.frombuffer of Buffers and Views with their release rule. ctest runs the whole suite on
each path (python/CMakeLists.txt: python, python_ctypes)."""

import gc
import os
import shutil
import subprocess
import sys
import weakref

import numpy as np
import pytest

import memarea
from conftest import random_bytes

HOST_KINDS = ["host", "mapped", "managed", "host_numa"]
# Python 3.11 has no buffer protocol for classes written in Python (PEP 688 came in 3.12): on
# ctypes alone there, memoryview(buf) is a TypeError and buf.memoryview() the way in.
BUFFER_PROTOCOL = memarea.implementation == "compiled" or sys.version_info >= (3, 12)
needs_buffer_protocol = pytest.mark.skipif(
    not BUFFER_PROTOCOL, reason="ctypes alone on Python < 3.12: no buffer protocol")


def host_buffer(kind, nbytes, pooled=False):
    if kind == "host_numa":
        area = memarea.Area(kind="host_numa")
    else:
        if memarea.device_count() < 1:
            pytest.skip("the active backend has no device")
        if kind == "managed" and not memarea.device_properties(0)["managed_memory"]:
            pytest.skip("device 0 has no managed memory")
        area = memarea.Area(0, kind)
    return memarea.Pool(area).alloc(nbytes) if pooled else area.alloc(nbytes)


# --- which path ------------------------------------------------------------------------------------


def test_the_expected_path_serves():
    # ctest says which path each entry must run on: a build that lost its extension fails here
    # rather than running the suite on ctypes twice.
    expected = os.environ.get("MEMAREA_PYTHON_EXPECT")
    if not expected:
        pytest.skip("MEMAREA_PYTHON_EXPECT not set (ctest sets it)")
    assert memarea.implementation == expected, memarea._ext.reason


def test_implementation_attributes():
    assert memarea.implementation in ("compiled", "ctypes")
    native = sys.modules.get("memarea._native")
    if memarea.implementation == "compiled":
        assert native is memarea._ext.native and memarea._ext.reason == ""
        assert native.__file__.endswith(".abi3.so")
        assert native.LIMITED_API == 0x030B0000  # one binary for CPython 3.11 and later
        assert issubclass(memarea.Buffer, native.BufferCore)
        assert issubclass(memarea.Pool, native.PoolCore)
        assert issubclass(memarea.View, native.ViewCore)
    else:
        assert native is None and memarea._ext.reason


def child_env(package_parent, **extra):
    """The environment of a child Python that imports the package under package_parent with
    this process's library (given as a path, or as the name the system loader found)."""
    lib = memarea.library_path
    return dict(os.environ, PYTHONPATH=str(package_parent),
                MEMAREA_LIBRARY=os.path.abspath(lib) if os.sep in lib else lib, **extra)


def test_pure_forced_by_the_environment(tmp_path):
    env = child_env(os.path.dirname(os.path.dirname(memarea.__file__)), MEMAREA_PYTHON_PURE="1")
    out = subprocess.run([sys.executable, "-c", "import memarea; print(memarea.implementation)"],
                         env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "ctypes"


def test_a_broken_extension_falls_back_with_a_warning(tmp_path):
    # A copy of the package whose extension is not a loadable module: it warns and runs on ctypes.
    pkg = tmp_path / "memarea"
    shutil.copytree(os.path.dirname(memarea.__file__), pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "_native*"))
    (pkg / "_native.abi3.so").write_bytes(b"not an ELF file")
    env = child_env(tmp_path)
    env.pop("MEMAREA_PYTHON_PURE", None)
    code = ("import warnings; warnings.simplefilter('always')\n"
            "import memarea, os\n"
            "assert memarea.__file__.startswith(os.environ['PYTHONPATH']), memarea.__file__\n"
            "b = memarea.Pool(None).alloc(64); b.free()\n"
            "print(memarea.implementation)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ctypes"
    assert "RuntimeWarning" in out.stderr and "cannot be loaded" in out.stderr


# --- the hot path behaves alike on both paths ----------------------------------------------------


def test_pool_alloc_buffer_fields(no_leak):
    with memarea.Pool(None) as pool:
        buf = pool.alloc(100)
        assert (buf.nbytes, len(buf), buf.device, buf.kind) == (100, 100, -1, "host_numa")
        assert buf._owner is pool and buf._mode == memarea.Buffer._POOL and buf._stream is None
        assert buf._exports is None and buf._pending is None and not buf.closed
        assert memarea.lookup(buf).base == buf.ptr == buf._ptr
        ref = weakref.ref(buf)
        assert pool.alloc(nbytes=8, stream=None).nbytes == 8
        buf.free()
        assert buf.closed and buf._ptr is None
        with pytest.raises(ValueError, match="the memarea Buffer was freed"):
            buf.ptr
        buf.free()  # twice: nothing
        del buf
        assert ref() is None
        assert pool.stats()["live_allocations"] == 0
        assert weakref.ref(pool)() is pool


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_lookup_answers_alike(kind, no_leak):
    # memarea.lookup: every field, from the first byte and from inside, on either path.
    buf = host_buffer(kind, 5000, pooled=True)
    for at in (buf.ptr, buf.ptr + 4999):
        info = memarea.lookup(at)
        assert isinstance(info, memarea.AllocationInfo)
        assert (info.base, info.size, info.kind) == (buf.ptr, 5000, kind)
        assert info.capacity >= 5000
        assert all(type(v) is int for v in (info.base, info.size, info.device, info.capacity))
    buf.free()


@pytest.mark.parametrize("pointer, error, message", [
    (-1, ValueError, "pointer -1 is not an address"),
    (1 << 64, ValueError, "is not an address"),
    ("0x1000", TypeError, "pointer must be an int, not str"),
    (1.5, TypeError, "pointer must be an int, not float"),
])
def test_lookup_argument_errors(pointer, error, message):
    with pytest.raises(error, match=message):
        memarea.lookup(pointer)


def test_lookup_of_an_address_nobody_allocated_is_not_found():
    for address in (0, 4096):
        with pytest.raises(memarea.Error) as e:
            memarea.lookup(address)
        assert e.value.status == memarea.Status.NOT_FOUND
        assert "is in no memarea allocation" in e.value.message


@pytest.mark.parametrize("nbytes, error, message", [
    (0, ValueError, "nbytes must be > 0, not 0"),
    (-1, ValueError, "nbytes must be > 0, not -1"),
    (1 << 64, ValueError, "does not fit in size_t"),
    (True, TypeError, "nbytes must be an int, not bool"),
    (1.0, TypeError, "nbytes must be an int, not float"),
    (None, TypeError, "nbytes must be an int, not NoneType"),
])
def test_pool_alloc_argument_errors(nbytes, error, message, no_leak):
    with memarea.Pool(None) as pool:
        with pytest.raises(error, match=message):
            pool.alloc(nbytes)
        assert pool.stats()["live_allocations"] == 0


def test_pool_alloc_other_errors(need_device, no_leak):
    pool = memarea.Pool(memarea.Area(0))
    assert pool.alloc(np.uint32(16)).nbytes == 16  # any __index__
    with pytest.raises(TypeError, match="stream must be a memarea.Stream, an int"):
        pool.alloc(16, "0")
    b = pool.alloc(16, 0)  # an int is a native stream: 0, the legacy default stream
    assert isinstance(b._stream, memarea.ExternalStream) and b._stream.native == 0
    b.free()
    s = memarea.Stream(0)
    s.close()
    with pytest.raises(ValueError, match="the stream is closed"):
        pool.alloc(16, stream=s)
    with pytest.raises(TypeError):
        pool.alloc(16, bogus=1)
    with pytest.raises(TypeError):
        pool.alloc()
    with memarea.Stream(0) as s:
        buf = pool.alloc(16, s)
        assert buf._stream is s
        buf.free()
    pool.close()
    with pytest.raises(ValueError, match="the pool is closed"):
        pool.alloc(16)
    with pytest.raises(TypeError, match="Buffers come from"):
        memarea.Buffer()


def test_with_block_and_gc_free(need_device, no_leak):
    pool = memarea.Pool(memarea.Area(0))
    with pool.alloc(4096) as buf:
        assert not buf.closed
    assert buf.closed
    for _ in range(100):
        pool.alloc(4096)  # dropped at once: the garbage collector's free
    assert pool.stats()["live_allocations"] == 0
    pool.close()


def test_a_reference_cycle_through_a_stream_is_collected(need_device, no_leak):
    # buf -> its pending stream -> the copy the stream keeps -> buf: only the cycle collector
    # finds it; it frees the memory after the stream's work.
    pool = memarea.Pool(memarea.Area(0))
    s = memarea.Stream(0)
    buf = pool.alloc(4096)
    memarea.copy_async(buf, random_bytes(4096), s)
    ref = weakref.ref(buf)
    del buf, s
    gc.collect()
    assert ref() is None
    assert pool.stats()["live_allocations"] == 0
    pool.close()


# --- the buffer protocol -------------------------------------------------------------------------


@needs_buffer_protocol
@pytest.mark.parametrize("pooled", [False, True])
@pytest.mark.parametrize("kind", HOST_KINDS)
def test_memoryview_of_a_buffer(kind, pooled, no_leak):
    buf = host_buffer(kind, 1000, pooled)
    mv = memoryview(buf)
    assert (mv.format, mv.itemsize, mv.ndim, mv.shape, mv.nbytes) == ("B", 1, 1, (1000,), 1000)
    assert not mv.readonly and mv.c_contiguous
    data = random_bytes(1000)
    mv[:] = data.tobytes()
    assert buf.tobytes() == data.tobytes()
    assert bytes(buf) == data.tobytes()
    mv.release()
    buf.free()


@needs_buffer_protocol
@pytest.mark.parametrize("kind", HOST_KINDS)
def test_numpy_frombuffer(kind, no_leak):
    buf = host_buffer(kind, 4096)
    arr = np.frombuffer(buf, np.uint8)
    assert arr.ctypes.data == buf.ptr and arr.nbytes == 4096 and arr.flags.writeable
    data = random_bytes(4096)
    arr[:] = data
    assert buf.tobytes() == data.tobytes()
    as_f32 = np.frombuffer(buf, np.float32)
    assert as_f32.shape == (1024,) and as_f32.tobytes() == data.tobytes()
    del arr, as_f32
    buf.free()


@needs_buffer_protocol
def test_free_refused_while_an_export_lives(no_leak):
    buf = memarea.Pool(None).alloc(256)
    mv = memoryview(buf)
    with pytest.raises(BufferError, match="buffer protocol by 1 export"):
        buf.free()
    assert not buf.closed and memarea.lookup(buf).base == buf.ptr  # still live
    arr = np.frombuffer(buf, np.uint8)  # NumPy keeps its export while the array lives
    with pytest.raises(BufferError, match="by 2 export"):
        buf.free()
    mv.release()
    del arr
    buf.free()
    assert buf.closed


@needs_buffer_protocol
def test_with_block_refuses_to_free_under_a_live_export(no_leak):
    buf = memarea.Area(kind="host_numa").alloc(64)
    with pytest.raises(BufferError, match="release them first"):
        with buf:
            mv = memoryview(buf)
    assert not buf.closed
    mv.release()
    buf.free()


def test_memoryview_method_counts_as_an_export(no_leak):
    # buf.memoryview() and View.memoryview() on either path and Python version.
    buf = memarea.Area(kind="host_numa").alloc(64)
    typed = buf.view("float32", (4, 4)).memoryview()
    assert typed.format == "f" and typed.shape == (4, 4)
    with pytest.raises(BufferError):
        buf.free()
    typed.release()
    gc.collect()
    buf.free()


@needs_buffer_protocol
def test_an_export_keeps_the_buffer_alive(no_leak):
    buf = memarea.Area(kind="host_numa").alloc(64)
    memarea.copy(buf, b"x" * 64)
    ref = weakref.ref(buf)
    mv = memoryview(buf)
    del buf
    gc.collect()
    assert ref() is not None and bytes(mv) == b"x" * 64
    mv.release()
    del mv
    gc.collect()
    assert ref() is None


@needs_buffer_protocol
def test_device_memory_refuses_the_buffer_protocol(need_device, no_leak):
    buf = memarea.Area(0).alloc(64)
    with pytest.raises(BufferError, match="memarea device memory is not host memory"):
        memoryview(buf)
    with pytest.raises(BufferError, match="not host memory"):
        np.frombuffer(buf, np.uint8)
    with pytest.raises(BufferError, match="not host memory"):
        memoryview(buf.view("float32"))
    with pytest.raises(TypeError, match="not host memory"):
        np.asarray(buf)  # NumPy tries the protocols in turn and says why at the end
    buf.free()


@needs_buffer_protocol
def test_a_freed_buffer_has_nothing_to_export():
    buf = memarea.Area(kind="host_numa").alloc(64)
    buf.free()
    with pytest.raises(ValueError, match="freed"):
        memoryview(buf)


@needs_buffer_protocol
def test_views_export_typed_and_shaped(no_leak):
    buf = memarea.Area(kind="host_numa").alloc(128)
    data = random_bytes(128)
    memarea.copy(buf, data)
    mv = memoryview(buf.view("float32", (4, 4), offset=64))
    assert (mv.format, mv.shape, mv.nbytes) == ("f", (4, 4), 64)
    assert mv.tobytes() == data[64:].tobytes()
    arr = np.frombuffer(buf.view("int16", offset=32), np.int16)
    assert arr.ctypes.data == buf.ptr + 32 and arr.shape == (48,)
    with pytest.raises(BufferError):
        buf.free()  # the views' exports are the Buffer's
    del mv, arr
    # A dtype the struct module cannot spell has no buffer-protocol format; NumPy then reads
    # the array interface, with the right dtype.
    with pytest.raises(BufferError, match="complex64 has no buffer-protocol format"):
        memoryview(buf.view("complex64"))
    c = np.asarray(buf.view("complex64"))
    assert c.dtype == np.complex64 and c.ctypes.data == buf.ptr
    del c
    buf.free()


def test_numpy_asarray_of_host_memory(no_leak):
    # Through the buffer protocol where there is one, else the array interface: a view either
    # way, with the Buffer's dtype and size.
    buf = memarea.Area(kind="host_numa").alloc(64)
    arr = np.asarray(buf)
    assert arr.dtype == np.uint8 and arr.shape == (64,) and arr.ctypes.data == buf.ptr
    arr[:] = 5
    assert buf.tobytes() == b"\x05" * 64
    del arr
    buf.free()


# --- a pool and its buffers collected together ---------------------------------------------------


class _Holder:
    """Keeps a pool and a buffer of it in a reference cycle (through itself), as a program's
    objects often do: the garbage collector finalizes them together, in an order of its own."""


@pytest.mark.parametrize("buffer_first", [False, True])
def test_a_pool_and_its_buffers_in_a_cycle_are_collected_quietly(buffer_first, need_device,
                                                                  no_leak):
    # Whichever finalizer runs first, nothing is raised from a finalizer and the pool goes
    # (no_leak: on sim every byte of device 0 comes back).
    unraised = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraised.append
    try:
        for _ in range(4):
            h = _Holder()
            pool = memarea.Pool(memarea.Area(0))
            if buffer_first:
                h.buf = pool.alloc(4096)
                h.pool = pool
            else:
                h.pool = pool
                h.buf = pool.alloc(4096)
            h.more = [pool.alloc(64) for _ in range(3)]
            h.cycle = h
            del h, pool
            gc.collect()
    finally:
        sys.unraisablehook = old_hook
    assert [str(u.exc_value) for u in unraised] == []
