"""memarea.copy and copy_async between Buffers, views, NumPy arrays and Python buffers."""

import array
import gc

import numpy as np
import pytest

import memarea
from conftest import random_bytes


def test_copy_device_host_device(need_device, no_leak):
    dev = memarea.Area(0).alloc(1 << 20)
    host = memarea.Area(0, "host").alloc(1 << 20)
    data = random_bytes(1 << 20)
    memarea.copy(dev, data)
    memarea.copy(host, dev)
    assert np.array_equal(np.asarray(host), data)
    out = np.zeros(1 << 20, np.uint8)
    memarea.copy(out, dev)
    assert np.array_equal(out, data)
    del dev, host


def test_copy_between_devices(need_two, no_leak):
    a = memarea.Area(0).alloc(1 << 20)
    b = memarea.Area(1).alloc(1 << 20)
    data = random_bytes(1 << 20)
    memarea.copy(a, data)
    memarea.copy(b, a)
    assert b.tobytes() == data.tobytes()
    del a, b


def test_copy_python_buffers(need_device, no_leak):
    buf = memarea.Area(0).alloc(256)
    data = random_bytes(256).tobytes()
    memarea.copy(buf, data)                     # bytes (read-only source)
    out = bytearray(256)
    memarea.copy(out, buf)                      # bytearray
    assert bytes(out) == data
    mv = memoryview(bytearray(256))
    memarea.copy(mv, buf)                       # memoryview
    assert mv.tobytes() == data
    arr = array.array("I", [0] * 64)
    memarea.copy(arr, buf)                      # array.array
    assert arr.tobytes() == data
    with pytest.raises(ValueError, match="read-only|writable"):
        memarea.copy(bytes(256), buf)
    del buf


def test_copy_views_and_parts(need_device, no_leak):
    buf = memarea.Area(0).alloc(1024)
    data = random_bytes(1024)
    memarea.copy(buf, data)
    out = np.zeros(100, np.uint8)
    memarea.copy(out, buf.view("uint8", 100, offset=200))
    assert np.array_equal(out, data[200:300])
    memarea.copy(buf.view("uint8", 4, offset=0), b"\x01\x02\x03\x04")
    assert buf.tobytes()[:4] == b"\x01\x02\x03\x04"
    part = np.zeros(10, np.uint8)
    memarea.copy(part, buf, nbytes=10)
    assert part.tobytes() == buf.tobytes()[:10]
    memarea.copy(buf, data, nbytes=0)  # nothing, no error
    del buf


def test_copy_numpy_typed(need_device, no_leak):
    buf = memarea.Area(0).alloc(4 * 12)
    a = np.random.default_rng().standard_normal((3, 4)).astype(np.float32)
    memarea.copy(buf, a)
    b = np.empty((3, 4), np.float32)
    memarea.copy(b, buf.view(np.float32, (3, 4)))
    assert np.array_equal(a, b)
    del buf


def test_copy_bad_input(need_device, no_leak):
    buf = memarea.Area(0).alloc(64)
    with pytest.raises(ValueError, match="pass nbytes"):
        memarea.copy(buf, bytes(63))
    with pytest.raises(ValueError, match="exceeds"):
        memarea.copy(buf, bytes(64), nbytes=65)
    with pytest.raises(TypeError, match="cannot copy from a object"):
        memarea.copy(buf, object())
    with pytest.raises(TypeError, match="cannot copy to a int"):
        memarea.copy(5, buf)
    with pytest.raises(ValueError, match="C-contiguous"):
        memarea.copy(buf, np.zeros((16, 2), np.uint8)[:, 0].repeat(4)[::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        memarea.copy(np.zeros((8, 16), np.uint8)[:, :8], buf)
    ro = np.zeros(64, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        memarea.copy(ro, buf)
    with pytest.raises(TypeError, match="no DLPack"):
        memarea.copy(buf, -1, nbytes=1)  # not an array at all
    freed = memarea.Area(0).alloc(64)
    freed.free()
    with pytest.raises(ValueError, match="freed"):
        memarea.copy(buf, freed)
    del buf


def test_copy_async(need_device, no_leak):
    with memarea.Stream(0) as s:
        dev = memarea.Area(0).alloc(1 << 20)
        data = random_bytes(1 << 20)
        memarea.copy_async(dev, data, s)
        out = np.zeros(1 << 20, np.uint8)
        memarea.copy_async(out, dev, s)
        # the stream holds both sides until it is synchronized
        assert len(s._keep) == 2
        s.synchronize()
        assert not s._keep
        assert np.array_equal(out, data)
        # A buffer waits for its pending stream work before NumPy, DLPack or free see it.
        pinned = memarea.Area(0, "host").alloc(1 << 20)
        memarea.copy_async(pinned, dev, s)
        assert np.array_equal(np.asarray(pinned), data)
        del dev, pinned
    with pytest.raises(TypeError):
        memarea.copy_async(out, data, None)
    with pytest.raises(ValueError, match="closed"):
        memarea.copy_async(out, data, s)


def test_copy_async_keeps_sources_alive(need_device, no_leak):
    s = memarea.Stream(0)
    dev = memarea.Area(0).alloc(1 << 16)
    data = random_bytes(1 << 16)
    memarea.copy_async(dev, data.tobytes(), s)  # a temporary bytes object
    gc.collect()
    s.synchronize()
    assert dev.tobytes() == data.tobytes()
    s.close()
    del dev
