"""memarea.cupy with the real CuPy on CUDA (skipped without CuPy, a CUDA device or memarea's
CUDA backend; scripts/gpu-suite.sh runs it on the GPU image): arrays made under use_pool are
pieces of the pool owned by CuPy's memory objects, made on CuPy's current stream, that lookup,
copy and IPC take. test_framework_stand_ins.py tests the same logic against a stand-in."""

import gc
import multiprocessing

import numpy as np
import pytest

import ipc_workers
import memarea
import memarea.cupy
from conftest import call, random_bytes


@pytest.fixture
def cupy(need_device, backend):
    if backend != "cuda":
        pytest.skip("CuPy's arrays need memarea's CUDA backend")
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # installed, but no usable GPU
        pytest.skip(f"cupy has no device: {e}")
    return cupy


def test_arrays_are_pieces_of_the_pool(cupy):
    pool = memarea.Pool(memarea.Area(0))
    with memarea.cupy.use_pool(pool):
        x = cupy.arange(100000, dtype=cupy.float32)
        empty = cupy.empty(0, dtype=cupy.float32)
    info = memarea.lookup(x.data.ptr)
    assert info.kind == "device" and info.device == 0 and info.size == 400000
    assert pool.stats()["live_allocations"] >= 1
    cupy.cuda.get_current_stream().synchronize()
    host = np.empty(100000, np.float32)
    memarea.copy(host, x)
    assert np.array_equal(host, np.arange(100000, dtype=np.float32))
    data = np.random.default_rng().standard_normal(100000).astype(np.float32)
    memarea.copy(x, data)
    assert np.array_equal(cupy.asnumpy(x), data)
    del x, empty
    gc.collect()
    assert pool.stats()["live_allocations"] == 0


def test_allocates_on_the_current_stream(cupy):
    pool = memarea.Pool(memarea.Area(0))
    stream = cupy.cuda.Stream(non_blocking=True)
    with memarea.cupy.use_pool(pool), stream:
        y = cupy.ones(5000, dtype=cupy.float64) * 3
        total = float(y.sum())
    stream.synchronize()
    assert total == 15000.0
    del y
    gc.collect()
    memarea.ExternalStream(stream.ptr, 0).close()  # before CuPy destroys the stream
    assert pool.stats()["live_allocations"] == 0


def test_restores_the_allocator_on_exceptions(cupy):
    before = cupy.cuda.get_allocator()
    with pytest.raises(KeyError):
        with memarea.cupy.use_pool(memarea.Pool(memarea.Area(0))):
            raise KeyError("inside")
    assert cupy.cuda.get_allocator() == before


def test_ipc_handle_of_an_array(cupy):
    if not memarea.device_properties(0)["ipc"]:
        pytest.skip("device 0 has no IPC")
    pool = memarea.Pool(memarea.Area(0))
    with memarea.cupy.use_pool(pool):
        x = cupy.empty(70000, dtype=cupy.uint8)
    data = random_bytes(70000)
    memarea.copy(x, data)
    h = memarea.ipc.handle(x)
    method = "spawn" if "spawn" in multiprocessing.get_all_start_methods() else "forkserver"
    with multiprocessing.get_context(method).Pool(1) as p:
        assert call(p, ipc_workers.open_handle, (h, 70000)) == data.tobytes()
