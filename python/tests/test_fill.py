"""memarea.memset / memset_async and copy_2d / copy_2d_async: Buffers of every area kind and NumPy
arrays, random bytes around every range checked byte for byte, and the refusals."""

import numpy as np
import pytest

import memarea
from conftest import random_bytes

PATTERNS = [(1, 0xA5), (2, 0xA5C3), (4, 0xDEADBEEF)]


def _areas(ndev, devices=1):
    """An Area of every kind on the first `devices` devices, and memarea's pageable host area."""
    kinds = ["device", "host", "mapped"]
    if ndev and memarea.device_properties(0)["managed_memory"]:
        kinds.append("managed")
    areas = [memarea.Area(d, kind) for d in range(min(ndev, devices)) for kind in kinds]
    return areas + [memarea.Area(kind="host_numa")]


def _pattern(before, off, value, count, width):
    out = before.copy()
    one = np.frombuffer(int(value).to_bytes(width, "little"), np.uint8)
    out[off:off + count * width] = np.tile(one, count)
    return out


def _read(buf, n):
    out = np.zeros(n, np.uint8)
    memarea.copy(out, buf, n)
    return out


@pytest.mark.parametrize("width,value", PATTERNS)
def test_memset_every_kind(need_device, no_leak, ndev, width, value):
    n = 8192
    stream = memarea.Stream(0)
    for area in _areas(ndev):
        kind = area.kind
        buf = area.alloc(n)
        for asynchronous in (False, True):
            before = random_bytes(n)
            memarea.copy(buf, before)
            off, count = 4 * width, 1001
            part = buf.view("uint8", n - off, offset=off)
            if asynchronous:
                memarea.memset_async(part, value, stream, count, width)
                stream.synchronize()
            else:
                memarea.memset(part, value, count, width)
            assert np.array_equal(_read(buf, n), _pattern(before, off, value, count, width)), kind
        del buf, part
    stream.close()


def test_memset_numpy_and_whole_buffers(no_leak):
    a = random_bytes(4096)
    before = a.copy()
    memarea.memset(a[16:], 0xDEADBEEF, 10, 4)
    assert np.array_equal(a, _pattern(before, 16, 0xDEADBEEF, 10, 4))
    b = np.zeros(100, np.uint16)
    memarea.memset(b, 0xA5C3, element_size=2)  # count None: the whole array
    assert (b == 0xA5C3).all()
    with pytest.raises(ValueError, match="whole"):
        memarea.memset(np.zeros(7, np.uint8), 1, element_size=2)


def test_memset_refusals(need_device, no_leak):
    buf = memarea.Area(0).alloc(4096)
    before = random_bytes(4096)
    memarea.copy(buf, before)
    with pytest.raises(ValueError, match="1, 2 or 4"):
        memarea.memset(buf, 1, 4, 3)
    with pytest.raises(ValueError, match="does not fit"):
        memarea.memset(buf, 0x1A5, 4, 1)
    with pytest.raises(ValueError, match="exceed"):
        memarea.memset(buf, 0xA5, 4097)
    with pytest.raises(TypeError):
        memarea.memset(buf, 1.5)
    with pytest.raises(memarea.Error) as e:  # the library's own check: misaligned
        memarea.memset(buf.view("uint8", 4000, offset=1), 0xA5C3, 4, 2)
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(TypeError, match="Stream"):
        memarea.memset_async(buf, 1, None)
    memarea.memset(buf, 0xA5, 0)  # count 0: nothing
    assert np.array_equal(_read(buf, 4096), before)
    del buf


def _rows(dst, doff, dpitch, src, soff, spitch, width, height):
    out = dst.copy()
    for r in range(height):
        out[doff + r * dpitch:doff + r * dpitch + width] = \
            src[soff + r * spitch:soff + r * spitch + width]
    return out


def test_copy_2d_every_kind_pair(need_device, no_leak, ndev):
    width, height, dpitch, spitch, n = 40, 7, 56, 48, 512
    stream = memarea.Stream(0)
    bufs = [area.alloc(n) for area in _areas(ndev, 2)]
    ends = bufs + [np.zeros(n, np.uint8)]
    for i, src in enumerate(ends):
        for j, dst in enumerate(ends):
            if i == j:
                continue
            data, old = random_bytes(n), random_bytes(n)
            memarea.copy(src, data)
            memarea.copy(dst, old)
            if (i + j) % 2:
                memarea.copy_2d_async(dst, dpitch, src, spitch, width, height, stream)
                stream.synchronize()
            else:
                memarea.copy_2d(dst, dpitch, src, spitch, width, height)
            got = _read(dst, n)
            assert np.array_equal(got, _rows(old, 0, dpitch, data, 0, spitch, width, height)), \
                (i, j)
    del bufs, ends, src, dst
    stream.close()


def test_copy_2d_numpy_to_numpy_and_refusals(no_leak):
    src, dst = random_bytes(1024), random_bytes(1024)
    old = dst.copy()
    memarea.copy_2d(dst[3:], 100, src[1:], 90, 64, 9)
    assert np.array_equal(dst, _rows(old, 3, 100, src, 1, 90, 64, 9))
    with pytest.raises(ValueError, match="pitch 10 is less than the width"):
        memarea.copy_2d(dst, 10, src, 100, 64, 2)
    with pytest.raises(ValueError, match="need"):
        memarea.copy_2d(dst, 128, src, 100, 64, 9)
    memarea.copy_2d(dst, 0, src, 0, 0, 5)  # width 0: nothing
    assert np.array_equal(dst, _rows(old, 3, 100, src, 1, 90, 64, 9))
