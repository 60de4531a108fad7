"""Streams made outside memarea (ints, torch-like and cupy-like objects), events, record_stream."""

import gc

import numpy as np
import pytest

import memarea
from conftest import random_bytes


class TorchLike:
    """What memarea reads of a torch.cuda.Stream: cuda_stream and device_index."""

    def __init__(self, native, device):
        self.cuda_stream, self.device_index = native, device


class CupyLike:
    """What memarea reads of a cupy.cuda.Stream: ptr and device_id."""

    def __init__(self, native, device):
        self.ptr, self.device_id = native, device


def test_foreign_streams_take_copies(need_device, no_leak):
    with memarea.Stream(0) as own:
        native = own.cuda_stream
        assert native != 0
        wrapped = memarea.ExternalStream(native, 0)
        assert wrapped is memarea.ExternalStream(native)  # one native stream, one object
        assert wrapped.native == native and wrapped.device == 0
        n = (1 << 20) + 3
        for stream in (native, TorchLike(native, 0), CupyLike(native, 0), wrapped, 0, 1, 2):
            data = random_bytes(n)
            back = np.zeros(n, dtype=np.uint8)
            buf = memarea.Area(0).alloc(n)
            memarea.copy_async(buf, data, stream)
            memarea.memset_async(buf, 0x5a, stream, count=10)
            memarea.copy_async(back, buf, stream)
            s = stream if isinstance(stream, memarea.Stream) else memarea.ExternalStream(
                stream if isinstance(stream, int) else native, 0)
            s.synchronize()
            data[:10] = 0x5a
            assert back.tobytes() == data.tobytes()
            assert s.query()
            del buf
        memarea.ExternalStream(native).close()  # forget before the owner destroys it
        assert memarea.ExternalStream(native) is not wrapped  # wrapped anew after close


def test_foreign_stream_refusals(need_device):
    with pytest.raises(TypeError):
        memarea.copy_async(np.zeros(4, np.uint8), np.zeros(4, np.uint8), "stream")
    with pytest.raises(TypeError):
        memarea.copy_async(np.zeros(4, np.uint8), np.zeros(4, np.uint8), True)
    with pytest.raises(ValueError):
        memarea.ExternalStream(-1)
    with pytest.raises(memarea.Error) as e:
        memarea.ExternalStream(0, memarea.device_count())
    assert e.value.status == memarea.Status.INVALID_DEVICE
    if memarea.backend() == "sim":
        junk = np.zeros(8, np.uint8)
        with pytest.raises(memarea.Error) as e:
            memarea.ExternalStream(junk.ctypes.data, 0)
        assert e.value.status == memarea.Status.INVALID_VALUE


def test_pool_on_foreign_stream(need_device, no_leak):
    with memarea.Stream(0) as own, memarea.Pool(memarea.Area(0)) as pool:
        native = own.cuda_stream
        a = pool.alloc(4096, native)
        ptr = a.ptr
        a.free()
        b = pool.alloc(4096, TorchLike(native, 0))  # the same stream: reused at once
        assert b.ptr == ptr
        b.free()
        own.synchronize()


def test_events(need_device, no_leak):
    with memarea.Stream(0) as a, memarea.Stream(0) as b:
        n = 4 << 20
        data = random_bytes(n)
        back = np.zeros(n, dtype=np.uint8)
        buf = memarea.Area(0).alloc(n)
        start, end = memarea.Event(0), memarea.Event(0)
        assert start.query()  # never recorded: complete
        start.record(a)
        memarea.copy_async(buf, data, a)
        end.record(a)
        end.wait(b)  # b's copy waits for a's
        memarea.copy_async(back, buf, b)
        b.synchronize()
        assert back.tobytes() == data.tobytes()
        end.synchronize()
        assert end.query()
        assert start.elapsed_time(end) >= 0.0
        untimed = memarea.Event(timing=False, blocking=True)
        untimed.record(a.cuda_stream)
        untimed.synchronize()
        with pytest.raises(memarea.Error) as e:
            start.elapsed_time(untimed)
        assert e.value.status == memarea.Status.INVALID_HANDLE
        with pytest.raises(memarea.Error) as e:
            memarea.Event(interprocess=True)
        assert e.value.status == memarea.Status.NOT_SUPPORTED
        for ev in (start, end, untimed):
            ev.close()
            ev.close()
        with pytest.raises(ValueError, match="closed"):
            start.record()
        del buf


def test_record_stream(need_device, no_leak):
    with memarea.Stream(0) as a, memarea.Stream(0) as b, memarea.Pool(memarea.Area(0)) as pool:
        n = 4 << 20
        data = random_bytes(n)
        seen = np.zeros(n, dtype=np.uint8)
        x = pool.alloc(n, a)
        memarea.copy(x, data)
        memarea.copy_async(seen, x, b)
        memarea.record_stream(x, b)
        x.free()  # freed on a while b may still read it
        y = pool.alloc(n, a)
        memarea.memset_async(y, 0, a)
        a.synchronize()
        b.synchronize()
        assert seen.tobytes() == data.tobytes()
        with pytest.raises(TypeError):
            memarea.record_stream(np.zeros(4), b)
        with pytest.raises(ValueError):
            memarea.record_stream(memarea.Area(0).alloc(16), b)
        with pytest.raises(memarea.Error) as e:
            memarea.record_stream(y, 2)  # the per-thread default stream
        assert e.value.status == memarea.Status.INVALID_VALUE
        del y, e  # the exception's traceback refers to y too
        gc.collect()
        pool.trim()
        assert pool.stats()["live_allocations"] == 0
