"""Areas, buffers, their lifetimes and their zero-copy views (NumPy, memoryview, DLPack)."""

import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import memarea
from conftest import free_memory, random_bytes

HOST_KINDS = ["host", "mapped", "managed", "host_numa"]


def make_area(kind):
    if kind == "host_numa":
        return memarea.Area(kind="host_numa")
    if memarea.device_count() < 1:
        pytest.skip("the active backend has no device")
    if kind == "managed" and not memarea.device_properties(0)["managed_memory"]:
        pytest.skip("device 0 has no managed memory")
    return memarea.Area(0, kind)


@pytest.mark.parametrize("kind", ["device"] + HOST_KINDS)
def test_alloc_roundtrip(kind, no_leak):
    area = make_area(kind)
    data = random_bytes(12345)
    with area.alloc(12345) as buf:
        assert buf.nbytes == len(buf) == 12345
        assert buf.kind == kind
        assert buf.device == (-1 if kind == "host_numa" else 0)
        info = memarea.lookup(buf)
        assert info.base == buf.ptr and info.size >= 12345 and info.kind == kind
        assert memarea.lookup(buf.ptr + 100).base == buf.ptr
        memarea.copy(buf, data)
        assert buf.tobytes() == data.tobytes()
    assert buf.closed
    with pytest.raises(ValueError, match="freed"):
        buf.ptr
    buf.free()  # twice: nothing
    area.close()


def test_area_with_current_device(need_two, no_leak):
    prev = memarea.get_device()
    area = memarea.Area()  # the current device at each alloc
    try:
        memarea.set_device(1)
        b = area.alloc(4096)
        assert b.device == 1 and memarea.lookup(b).device == 1
        assert memarea.get_device() == 1
        memarea.set_device(0)
        c = area.alloc(4096)
        assert c.device == 0 and memarea.lookup(c).device == 0
    finally:
        memarea.set_device(prev)
    del b, c


def test_closed_area_keeps_its_buffers(need_device, no_leak):
    area = memarea.Area(0)
    buf = area.alloc(1 << 16)
    data = random_bytes(1 << 16)
    memarea.copy(buf, data)
    area.close()
    with pytest.raises(ValueError, match="closed"):
        area.alloc(10)
    assert buf.tobytes() == data.tobytes()
    buf.free()


def test_gc_frees_device_memory(need_device, backend):
    gc.collect()
    before = free_memory()
    area = memarea.Area(0)
    n = 64 << 20
    buf = area.alloc(n)
    ref = weakref.ref(buf)
    assert before - free_memory() >= (n if backend == "sim" else n - (8 << 20))
    del buf  # its last reference
    gc.collect()
    assert ref() is None
    after = free_memory()
    if backend == "sim":
        assert after == before
    else:
        assert abs(after - before) <= 8 << 20


def test_gc_waits_for_views(need_device):
    # A NumPy view keeps pinned memory alive; dropping the view frees it.
    area = memarea.Area(0, "host")
    buf = area.alloc(4096)
    ptr = buf.ptr
    arr = np.asarray(buf)
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is not None
    assert memarea.lookup(ptr).kind == "host"
    arr[:] = 7
    del arr
    gc.collect()
    assert ref() is None
    try:
        info = memarea.lookup(ptr)
    except memarea.Error:
        pass  # memarea and the driver no longer know it
    else:
        assert (info.base, info.kind) != (ptr, "host")


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_numpy_writes_memarea_reads(kind, no_leak):
    area = make_area(kind)
    buf = area.alloc(1 << 16)
    arr = np.asarray(buf.view("uint32"))
    assert arr.shape == (1 << 14,) and arr.dtype == np.uint32
    assert arr.ctypes.data == buf.ptr  # no copy
    data = random_bytes(1 << 16).view(np.uint32)
    arr[:] = data
    out = bytearray(1 << 16)
    memarea.copy(out, buf)
    assert bytes(out) == data.tobytes()
    del arr, buf


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_memarea_writes_numpy_reads(kind, no_leak):
    area = make_area(kind)
    buf = area.alloc(3 * 4 * 8)
    data = random_bytes(3 * 4 * 8)
    memarea.copy(buf, data.tobytes())
    v = buf.view("float64", (3, 4))
    arr = np.asarray(v)
    assert arr.shape == (3, 4) and arr.dtype == np.float64
    assert arr.tobytes() == data.tobytes()
    # A second view of the same memory sees a write through the first.
    arr[1, 2] = 42.5
    assert np.asarray(buf.view(np.float64))[6] == 42.5
    assert memoryview(buf.view("uint8").memoryview())[0] == data[0]
    del arr, v, buf


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_numpy_from_dlpack(kind, backend, no_leak):
    area = make_area(kind)
    buf = area.alloc(4096)
    data = random_bytes(4096)
    memarea.copy(buf, data)
    dev = buf.__dlpack_device__()
    if dev[0] not in (1, 3, 13):  # kDLCPU, kDLCUDAHost, kDLCUDAManaged: what NumPy reads
        pytest.skip(f"NumPy does not read DLPack device {dev}")
    arr = np.from_dlpack(buf.view("int16", (2, 1024)))
    assert arr.shape == (2, 1024) and arr.ctypes.data == buf.ptr
    assert arr.tobytes() == data.tobytes()
    assert memarea.live_exports() >= 1
    with pytest.raises(BufferError, match="DLPack consumer"):
        buf.free()
    del arr
    gc.collect()
    buf.free()


def test_numpy_refusing_device_memory_leaves_the_buffer_freeable(need_device, no_leak):
    # A capsule dropped unconsumed gives the Buffer back.
    buf = memarea.Area(0).alloc(4096)
    before = memarea.live_exports()
    capsule = buf.__dlpack__()
    assert memarea.live_exports() == before + 1
    del capsule
    assert memarea.live_exports() == before
    # NumPy (1.24) takes the capsule, refuses device memory and drops the capsule with its
    # error set: its exception must reach us (not SystemError), and the capsule's deleter run.
    with pytest.raises(Exception) as e:
        np.from_dlpack(buf.view("uint8", (4096,)))
    assert not isinstance(e.value, SystemError), repr(e.value)
    assert memarea.live_exports() == before
    buf.free()  # not held by a DLPack consumer
    assert buf.closed


def test_memoryview(no_leak):
    buf = memarea.Area(kind="host_numa").alloc(64)
    mv = buf.memoryview()
    assert mv.nbytes == 64 and not mv.readonly
    data = random_bytes(64)
    mv[:] = data.tobytes()
    assert buf.tobytes() == data.tobytes()
    typed = buf.view("float32", (4, 4)).memoryview()
    assert typed.format == "f" and typed.shape == (4, 4)
    if sys.version_info >= (3, 12):
        assert bytes(memoryview(buf)) == data.tobytes()
    del mv, typed


def test_device_memory_is_not_host_memory(need_device):
    buf = memarea.Area(0).alloc(64)
    with pytest.raises(TypeError, match="not host memory"):
        np.asarray(buf)
    with pytest.raises(TypeError, match="not host memory"):
        buf.memoryview()
    assert not hasattr(buf, "__array_interface__")


def test_views_and_bad_views(need_device):
    buf = memarea.Area(0).alloc(100)
    v = buf.view("float32", (5, 5))
    assert v.nbytes == 100 and v.ptr == buf.ptr and v.shape == (5, 5)
    assert v.dtype == memarea.dtype(np.float32) == memarea.dtype("<f4")
    assert buf.view("uint8", 10, offset=90).ptr == buf.ptr + 90
    assert buf.view("int32", offset=8).shape == (23,)
    with pytest.raises(ValueError, match="needs 104 bytes"):
        buf.view("float32", (26,))
    with pytest.raises(ValueError, match="multiple"):
        buf.view("float32", offset=2)
    with pytest.raises(ValueError, match="whole number"):
        buf.view("float64")
    with pytest.raises(ValueError, match="outside"):
        buf.view("uint8", offset=101)
    with pytest.raises(ValueError, match="negative"):
        buf.view("uint8", (-1,))
    with pytest.raises(TypeError, match="unsupported dtype"):
        buf.view("float128")
    with pytest.raises(TypeError, match="unsupported dtype"):
        buf.view(object)
    with pytest.raises(ValueError, match="big-endian"):
        buf.view(">f4")
    for name in ("bool", "int8", "uint64", "float16", "bfloat16", "complex128"):
        assert buf.view(name, 1).dtype.name == name
    # A view of a view: offsets add up, and the limit is the outer view's.
    inner = buf.view("uint8", 50, offset=10).view("uint16", offset=20)
    assert inner.ptr == buf.ptr + 30 and inner.shape == (15,)


@pytest.mark.parametrize("kind", ["device"] + HOST_KINDS)
def test_dlpack_device(kind, backend):
    area = make_area(kind)
    buf = area.alloc(16)
    dev = buf.__dlpack_device__()
    assert dev == memarea.dlpack_device(backend, kind, buf.device)
    if backend == "sim":
        assert dev == ((12, 0) if kind == "device" else (1, 0))


def test_dlpack_device_mapping():
    m = memarea.dlpack_device
    assert m("cuda", "device", 1) == (2, 1)
    assert m("cuda", "ipc", 3) == (2, 3)
    assert m("cuda", "host", 0) == (3, 0)
    assert m("cuda", "mapped", 0) == (3, 0)
    assert m("cuda", "managed", 2) == (13, 2)
    assert m("cuda", "host_numa", -1) == (1, 0)
    assert m("hip", "device", 1) == (10, 1)
    assert m("hip", "host", 0) == (11, 0)
    assert m("hip", "managed", 1) == (10, 1)
    assert m("sim", "device", 1) == (12, 1)
    assert m("sim", "managed", 1) == (1, 0)


_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))


def test_dlpack_capsules(need_device, backend, no_leak):
    buf = memarea.Area(0).alloc(64)
    base = memarea.live_exports()
    cap = buf.__dlpack__()
    assert _GetName(cap) == b"dltensor"
    assert memarea.live_exports() == base + 1
    with pytest.raises(BufferError):
        buf.free()
    del cap  # never consumed: the capsule's destructor releases the export
    assert memarea.live_exports() == base
    cap = buf.view("float32").__dlpack__(max_version=(1, 0), stream=-1)
    assert _GetName(cap) == b"dltensor_versioned"
    del cap
    cap = buf.__dlpack__(max_version=(0, 8))
    assert _GetName(cap) == b"dltensor"
    del cap
    with pytest.raises(BufferError, match="views only"):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="DLPack device"):
        buf.__dlpack__(dl_device=(99, 0))
    assert buf.__dlpack__(dl_device=buf.__dlpack_device__(), copy=False) is not None
    with pytest.raises(TypeError):
        buf.__dlpack__(stream="default")
    for stream in (0, 1, 2, -1):  # memarea waits on the host: every stream is served alike
        assert buf.__dlpack__(stream=stream) is not None  # dropped unconsumed at once
    gc.collect()
    assert memarea.live_exports() == base
    buf.free()
    with pytest.raises(ValueError, match="freed"):
        buf.__dlpack__()


class DLPackOnly:
    """Exposes only DLPack, so that memarea.copy takes its consumer path."""

    def __init__(self, x, versioned):
        self.x, self.versioned = x, versioned

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__(max_version=(1, 0) if self.versioned else None)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


@pytest.mark.parametrize("versioned", [False, True])
def test_copy_consumes_dlpack(versioned, need_device, no_leak):
    a, b = memarea.Area(0).alloc(4096), memarea.Area(0).alloc(4096)
    data = random_bytes(4096)
    memarea.copy(a, data)
    memarea.copy(DLPackOnly(b.view("uint64"), versioned), DLPackOnly(a, versioned))
    assert b.tobytes() == data.tobytes()
    gc.collect()
    assert memarea.live_exports() == 0  # the consumer called the deleters
    a.free()
    b.free()


def test_cuda_array_interface(need_device, backend):
    buf = memarea.Area(0).alloc(64)
    if backend != "cuda":
        assert not hasattr(buf, "__cuda_array_interface__")
        return
    cai = buf.view("float32", (4, 4)).__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4, 4) and cai["typestr"] == "<f4"
    assert cai["data"] == (buf.ptr, False) and cai["strides"] is None
    assert not hasattr(memarea.Area(0, "host").alloc(64), "__cuda_array_interface__")


def test_bad_allocations_leak_nothing(need_device, no_leak):
    area = memarea.Area(0)
    for bad in (0, -1):
        with pytest.raises(ValueError):
            area.alloc(bad)
    with pytest.raises(TypeError):
        area.alloc(1.5)
    with pytest.raises(TypeError):
        area.alloc("10")
    with pytest.raises(memarea.Error) as e:
        area.alloc(1 << 50)
    assert e.value.status == memarea.Status.OUT_OF_MEMORY
    assert "memarea_area_mmap" in e.value.message
    with pytest.raises(memarea.Error) as e:
        memarea.Area(1000)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(ValueError, match="kind"):
        memarea.Area(0, "gpu")
    with pytest.raises(ValueError):
        memarea.Area(0, "host_numa")
    with pytest.raises(ValueError):
        memarea.Area(0, "device", numa_node=0)
    with pytest.raises(TypeError):
        memarea.Area("0")
    with pytest.raises(memarea.Error) as e:
        memarea.Area(kind="host_numa", numa_node=4096).alloc(10)
    assert e.value.status == memarea.Status.INVALID_DEVICE


def test_not_constructible():
    with pytest.raises(TypeError):
        memarea.Buffer()


def test_what_the_device_cannot_do_raises_not_supported(need_device, no_leak):
    if memarea.device_properties(0)["managed_memory"]:
        pytest.skip("device 0 has managed memory (MEMAREA_SIM_MANAGED_MEMORY=0 has none)")
    with pytest.raises(memarea.Error) as e:
        memarea.Area(0, "managed").alloc(4096)
    assert e.value.status == memarea.Status.NOT_SUPPORTED
