"""Pools: allocation, reuse, stats, trim, BUSY, streams, host pools."""

import gc

import numpy as np
import pytest

import memarea
from conftest import random_bytes


def test_pool_reuses_memory(need_device, no_leak):
    with memarea.Pool(memarea.Area(0)) as pool:
        a = pool.alloc(1 << 20)
        assert a.kind == "device" and a.device == 0
        data = random_bytes(1 << 20)
        memarea.copy(a, data)
        assert a.tobytes() == data.tobytes()
        ptr = a.ptr
        a.free()
        b = pool.alloc(1 << 20)  # same stream: reused at once
        assert b.ptr == ptr
        s = pool.stats()
        assert s["live_allocations"] == 1 and s["driver_allocations"] >= 1
        assert s["bytes_in_use"] >= 1 << 20 and s["bytes_reserved"] >= s["bytes_in_use"]
        assert memarea.lookup(b).base == b.ptr  # pieces are looked up as allocations
        del b
        gc.collect()
        assert pool.stats()["live_allocations"] == 0
        pool.trim(0)
        assert pool.stats()["bytes_reserved"] == 0


def test_pool_busy_changes_nothing(need_device, no_leak):
    pool = memarea.Pool(memarea.Area(0))
    buf = pool.alloc(4096)
    with pytest.raises(memarea.Error) as e:
        pool.close()
    assert e.value.status == memarea.Status.BUSY and "live" in e.value.message
    other = pool.alloc(10)  # still usable
    del other
    buf.free()
    pool.close()
    pool.close()
    with pytest.raises(ValueError, match="closed"):
        pool.alloc(10)
    with pytest.raises(ValueError, match="closed"):
        pool.stats()


def test_pool_keeps_itself_alive(need_device, no_leak):
    buf = memarea.Pool(memarea.Area(0)).alloc(4096)  # the pool object is dropped at once
    gc.collect()
    data = random_bytes(4096)
    memarea.copy(buf, data)
    assert buf.tobytes() == data.tobytes()
    del buf  # frees the piece, then the pool goes


def test_a_pool_collected_with_pieces_live_stays_quietly(need_device, no_leak):
    # Pieces a framework holds (memarea.torch's tensors) are live without a Buffer: collecting
    # the Pool then leaves it to them, rather than raise from the finalizer.
    import ctypes
    import sys

    from memarea._lib import check, fn

    pool = memarea.Pool(memarea.Area(0))
    handle = pool._handle
    piece = ctypes.c_void_p()
    check(fn.pool_alloc(handle, ctypes.byref(piece), 4096, None))
    data = random_bytes(4096)
    check(fn.memcpy(piece, data.ctypes.data, 4096))
    raised = []
    hook, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        del pool
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert raised == []
    back = np.zeros(4096, dtype=np.uint8)
    check(fn.memcpy(back.ctypes.data, piece, 4096))  # the pool and its piece are still there
    assert back.tobytes() == data.tobytes()
    check(fn.pool_free(handle, piece, None))
    check(fn.pool_destroy(handle))


def test_pool_on_stream(need_device, no_leak):
    with memarea.Stream(0) as s, memarea.Pool(memarea.Area(0)) as pool:
        buf = pool.alloc(1 << 16, stream=s)
        data = random_bytes(1 << 16)
        memarea.copy_async(buf, data, s)
        out = np.zeros(1 << 16, np.uint8)
        memarea.copy_async(out, buf, s)
        s.synchronize()
        assert np.array_equal(out, data)
        buf.free()  # ordered on s


@pytest.mark.parametrize("kind", ["host", "mapped", "managed"])
def test_pools_of_host_visible_memory(kind, need_device, no_leak):
    if kind == "managed" and not memarea.device_properties(0)["managed_memory"]:
        pytest.skip("no managed memory")
    with memarea.Pool(memarea.Area(0, kind)) as pool:
        buf = pool.alloc(4096)
        assert buf.kind == kind
        arr = np.asarray(buf)
        data = random_bytes(4096)
        arr[:] = data
        out = bytearray(4096)
        memarea.copy(out, buf)
        assert bytes(out) == data.tobytes()
        del arr, buf


def test_host_pool(no_leak):
    with memarea.Pool(memarea.Area(kind="host_numa")) as pool:
        buf = pool.alloc(100)
        assert buf.kind == "host_numa" and buf.device == -1
        np.asarray(buf)[:] = random_bytes(100)
        buf.free()
    with memarea.Pool(None, host_node=-1) as pool:
        pool.alloc(8).free()


def test_pool_bad_options(need_device, no_leak):
    area = memarea.Area(0)
    with pytest.raises(memarea.Error) as e:
        memarea.Pool(area, alignment=3)
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(ValueError):
        memarea.Pool(area, initial_size=-1)
    with pytest.raises(ValueError):
        memarea.Pool(area, host_node=0)
    with pytest.raises(TypeError):
        memarea.Pool("area")
    with memarea.Pool(area, maximum_size=1 << 20) as pool:
        with pytest.raises(memarea.Error) as e:
            pool.alloc(2 << 20)
        assert e.value.status == memarea.Status.OUT_OF_MEMORY
        with pytest.raises(ValueError):
            pool.alloc(0)
        with pytest.raises(TypeError):
            pool.alloc(None)
        assert pool.stats()["live_allocations"] == 0
