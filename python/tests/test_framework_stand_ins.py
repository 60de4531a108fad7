"""memarea.torch and memarea.cupy against stand-ins with the frameworks' documented names and
signatures (tests/stand_ins/): the allocator pair called through function pointers of the
pluggable types, use_pool's nesting, its restore on exceptions, the pool per device, install()
only before the first allocation, and tensors and arrays that are memarea memory (lookup,
copies, IPC). Runs wherever memarea has a device, sim included; the real frameworks' tests are
test_torch_allocator.py and test_cupy_allocator.py."""

import gc
import importlib.util
import multiprocessing
import os
import sys
import threading

import numpy as np
import pytest

import ipc_workers
import memarea
import memarea.cupy
import memarea.torch
from conftest import call, random_bytes

_STAND_INS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand_ins")


def _load(name):
    """A fresh copy of stand_ins/<name>.py (its state is per test)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_STAND_INS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def torch(monkeypatch, need_device):
    """The torch stand-in as `torch`, and memarea.torch as if nothing had used it yet (its
    pools set back to the defaults afterwards)."""
    fake = _load("torch")
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(memarea.torch, "_allocator", None)
    monkeypatch.setattr(memarea.torch, "_installed", False)
    monkeypatch.setattr(memarea.torch, "_set", {})
    monkeypatch.setattr(memarea.torch, "_kept", {})
    yield fake
    for d in range(memarea.device_count()):
        memarea.torch.set_pool(None, d)
    gc.collect()


@pytest.fixture
def cupy(monkeypatch, need_device):
    fake = _load("cupy")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def _fill_and_check(obj, nbytes):
    """Random bytes into obj through memarea.copy and back, byte for byte."""
    data = random_bytes(nbytes)
    memarea.copy(obj, data)
    back = np.zeros(nbytes, np.uint8)
    memarea.copy(back, obj)
    assert np.array_equal(back, data)


# --- PyTorch -----------------------------------------------------------------------------------


def test_use_pool_makes_tensors_of_the_pool(torch):
    pool = memarea.Pool(memarea.Area(0))
    before = memarea.torch.stats()
    with memarea.torch.use_pool(pool) as mp:
        assert isinstance(mp, torch.cuda.MemPool)
        assert memarea.torch.get_pool(0) == pool._handle
        t = torch.empty(10000, device=0)
        info = memarea.lookup(t.data_ptr())
        assert info.kind == "device" and info.device == 0 and info.base == t.data_ptr()
        assert memarea.lookup(t).base == t.data_ptr()
        _fill_and_check(t, 10000)
        assert pool.stats()["live_allocations"] == 1
    assert memarea.torch.get_pool(0) != pool._handle
    del t
    # The MemPool cached the segment; it goes back to the pool when the MemPool does.
    assert memarea.torch.stats(pool)["live_pieces"] == 1
    del mp
    gc.collect()
    assert memarea.torch.stats(pool)["live_pieces"] == 0
    assert pool.stats()["live_allocations"] == 0
    assert memarea.torch.stats()["refused_frees"] == before["refused_frees"]
    pool.close()


def test_use_pool_nests_and_restores_on_exceptions(torch):
    a, b = memarea.Pool(memarea.Area(0)), memarea.Pool(memarea.Area(0))
    default = memarea.torch.get_pool(0)
    with memarea.torch.use_pool(a):
        assert memarea.torch.get_pool(0) == a._handle
        with pytest.raises(KeyError):
            with memarea.torch.use_pool(b):
                assert memarea.torch.get_pool(0) == b._handle
                raise KeyError("inside")
        assert memarea.torch.get_pool(0) == a._handle
        with memarea.torch.use_pool(b):
            assert memarea.torch.get_pool(0) == b._handle
            with memarea.torch.use_pool(a):
                assert memarea.torch.get_pool(0) == a._handle
            assert memarea.torch.get_pool(0) == b._handle
    assert memarea.torch.get_pool(0) == default
    with pytest.raises(TypeError):
        with memarea.torch.use_pool("not a pool"):
            pass
    assert memarea.torch.get_pool(0) == default


def test_pool_per_device(torch, need_two):
    p0, p1 = memarea.Pool(memarea.Area(0)), memarea.Pool(memarea.Area(1))
    default0 = memarea.torch.get_pool(0)
    with memarea.torch.use_pool(p1):
        assert memarea.torch.get_pool(1) == p1._handle
        assert memarea.torch.get_pool(0) == default0
        with memarea.torch.use_pool(p0):
            t1 = torch.empty(5000, device=1)
            t0 = torch.empty(7000, device=0)
        assert memarea.lookup(t1.data_ptr()).device == 1
        assert memarea.lookup(t0.data_ptr()).device == 0
        assert p1.stats()["live_allocations"] == 1
        assert p0.stats()["live_allocations"] == 1
    with pytest.raises(memarea.Error) as e:
        memarea.torch.set_pool(p0, 1)  # a pool of device 0 for device 1
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(memarea.Error):
        memarea.torch.set_pool(memarea.Pool(memarea.Area(0, "host")), 0)


def test_pools_stay_alive_while_their_tensors_live(torch):
    pool = memarea.Pool(memarea.Area(0))
    handle = pool._handle
    with memarea.torch.use_pool(pool) as mp:
        t = torch.empty(4096, device=0)
    del pool  # the package keeps it: its piece is still cached by the MemPool
    assert handle in memarea.torch._kept
    del t, mp
    gc.collect()
    with memarea.torch.use_pool(memarea.Pool(memarea.Area(0))):
        pass  # entering and leaving lets go of pools with nothing live
    assert handle not in memarea.torch._kept


def test_install_serves_every_tensor(torch):
    memarea.torch.install()
    assert memarea.torch.installed()
    memarea.torch.install()  # once is enough; again does nothing
    before = memarea.torch.stats()
    sizes = [1, 255, 4096, 100000, 3 << 20]
    ts = [torch.empty(n, device=0) for n in sizes]
    assert memarea.torch.stats()["live_pieces"] == before["live_pieces"] + len(sizes)
    for t, n in zip(ts, sizes):
        assert memarea.lookup(t.data_ptr()).size == n
        _fill_and_check(t, n)
    del t
    assert torch.empty(0, device=0).data_ptr() == 0  # size 0: NULL, never freed
    # Freed on another thread, as a tensor dropped there is.
    worker = threading.Thread(target=ts.clear)
    worker.start()
    worker.join()
    gc.collect()
    after = memarea.torch.stats()
    assert after["live_pieces"] == before["live_pieces"]
    assert after["refused_frees"] == before["refused_frees"]
    # use_pool after install(): no MemPool, the pool serves every allocation on the device.
    pool = memarea.Pool(memarea.Area(0))
    with memarea.torch.use_pool(pool) as mp:
        assert mp is None
        t = torch.empty(1000, device=0)
        assert pool.stats()["live_allocations"] == 1
    del t
    gc.collect()
    assert pool.stats()["live_allocations"] == 0


def test_install_refused_after_the_first_allocation(torch):
    torch.empty(16, device=0)  # torch's own allocator serves, and is initialised
    with pytest.raises(RuntimeError, match="initialized"):
        memarea.torch.install()
    assert not memarea.torch.installed()


def test_use_pool_needs_mem_pool_or_install(torch, monkeypatch):
    monkeypatch.delattr(torch.cuda, "MemPool")
    pool = memarea.Pool(memarea.Area(0))
    default = memarea.torch.get_pool(0)
    with pytest.raises(RuntimeError, match="install"):
        with memarea.torch.use_pool(pool):
            pass
    assert memarea.torch.get_pool(0) == default


def test_allocation_on_a_torch_stream(torch):
    s = memarea.Stream(0)
    pool = memarea.Pool(memarea.Area(0))
    with torch.cuda.stream(torch.cuda.Stream(s.cuda_stream, 0)):
        with memarea.torch.use_pool(pool) as mp:
            t = torch.empty(8192, device=0)
            _fill_and_check(t, 8192)
    del t, mp
    gc.collect()
    s.synchronize()
    assert pool.stats()["live_allocations"] == 0


def test_refused_free_does_not_crash(torch):
    memarea.torch.install()
    a = torch.cuda.memory.current
    before = memarea.torch.stats()["refused_frees"]
    a._meta[12345] = (64, 0, 0)  # a pointer the pair never handed out
    a.raw_delete(12345)
    assert memarea.torch.stats()["refused_frees"] == before + 1


METHODS = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


@pytest.fixture(scope="module")
def ipc_pool():
    ctx = multiprocessing.get_context(METHODS[0])
    with ctx.Pool(1) as p:
        yield p


def test_ipc_handle_of_a_tensor(torch, ipc_pool):
    if not memarea.device_properties(0)["ipc"]:
        pytest.skip("device 0 has no IPC")
    memarea.torch.install()
    t = torch.empty(65536, device=0)
    data = random_bytes(65536)
    memarea.copy(t, data)
    h = memarea.ipc.handle(t)
    assert len(h) == memarea.ipc.HANDLE_SIZE
    assert call(ipc_pool, ipc_workers.open_handle, (h, 65536)) == data.tobytes()
    with pytest.raises(TypeError):
        memarea.ipc.handle(object())


# --- CuPy --------------------------------------------------------------------------------------


@pytest.mark.parametrize("thread_local", [True, False])
def test_cupy_use_pool(cupy, monkeypatch, thread_local):
    if not thread_local:
        monkeypatch.delattr(cupy.cuda, "using_allocator")
    pool = memarea.Pool(memarea.Area(0))
    with memarea.cupy.use_pool(pool):
        x = cupy.empty(30000)
        empty = cupy.empty(0)
        info = memarea.lookup(x.data.ptr)
        assert info.kind == "device" and info.size == 30000
        assert memarea.lookup(x).base == x.data.ptr
        _fill_and_check(x, 30000)
        assert pool.stats()["live_allocations"] == 2
        with pytest.raises(ValueError):
            with memarea.cupy.use_pool(memarea.Pool(memarea.Area(0))):
                raise ValueError("inside")
        y = cupy.empty(100)  # the outer pool again
        assert pool.stats()["live_allocations"] == 3
    assert cupy.cuda.get_allocator() is None
    del x, y, empty
    gc.collect()
    assert pool.stats()["live_allocations"] == 0  # CuPy's memory objects owned the pieces
    pool.close()


def test_cupy_allocates_on_the_current_stream(cupy):
    s = memarea.Stream(0)
    pool = memarea.Pool(memarea.Area(0))
    with memarea.cupy.use_pool(pool), cupy.cuda.Stream(s.cuda_stream, 0):
        x = cupy.empty(4096)
        _fill_and_check(x, 4096)
    del x
    gc.collect()
    s.synchronize()
    assert pool.stats()["live_allocations"] == 0


def test_cupy_pool_on_device_one(cupy, need_two):
    pool = memarea.Pool(memarea.Area(1))
    with memarea.cupy.use_pool(pool):
        x = cupy.empty(1000)
    assert memarea.lookup(x.data.ptr).device == 1
    assert x.data.device_id == 1


def test_cupy_ipc_handle(cupy, ipc_pool):
    if not memarea.device_properties(0)["ipc"]:
        pytest.skip("device 0 has no IPC")
    pool = memarea.Pool(memarea.Area(0))
    with memarea.cupy.use_pool(pool):
        x = cupy.empty(5000)
    data = random_bytes(5000)
    memarea.copy(x, data)
    h = memarea.ipc.handle(x)
    assert call(ipc_pool, ipc_workers.open_handle, (h, 5000)) == data.tobytes()
