"""PyTorch, CuPy and JAX over memarea memory (each skipped when its module is absent): the same
device memory seen through memarea and through them, writes through one read through another,
and a torch tensor shared with a child process."""

import gc
import multiprocessing

import numpy as np
import pytest

import ipc_workers
import memarea
from conftest import call


@pytest.fixture
def no_export_leak():
    """The DLPack exports a test made are all released by its end. (Device memory is not
    compared, unlike no_leak: PyTorch, CuPy and JAX keep memory cached in their allocators.)"""
    gc.collect()
    before = memarea.live_exports()
    yield
    gc.collect()
    assert memarea.live_exports() == before


@pytest.fixture
def cuda(need_device, backend):
    if backend != "cuda":
        pytest.skip("torch, cupy and jax read memarea device memory on the CUDA backend")


def rand_f32(n, seed=None):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32) + 1.0


# --- torch --------------------------------------------------------------------------------------


def test_torch_from_dlpack_is_memarea_memory(cuda, no_export_leak):
    torch = pytest.importorskip("torch")
    buf = memarea.Area(0).alloc(4 * 1024)
    t = torch.from_dlpack(buf.view("float32", (32, 32)))
    assert t.device.type == "cuda" and t.device.index == 0
    assert t.data_ptr() == buf.ptr and t.shape == (32, 32) and t.dtype == torch.float32
    data = rand_f32(1024)
    t.copy_(torch.from_numpy(data).reshape(32, 32).cuda())  # written through torch
    torch.cuda.synchronize()
    out = np.empty(1024, np.float32)
    memarea.copy(out, buf)                                  # read through memarea
    assert np.array_equal(out, data)
    other = rand_f32(1024)
    memarea.copy(buf, other)                                # written through memarea
    assert np.array_equal(t.cpu().numpy().ravel(), other)   # read through torch
    del t
    gc.collect()
    buf.free()


def test_torch_tensors_copy_in_and_out(cuda, no_export_leak):
    torch = pytest.importorskip("torch")
    src = torch.randn(256, 256, device="cuda") + 1
    buf = memarea.Area(0).alloc(src.numel() * 4)
    memarea.copy(buf, src)  # a torch CUDA tensor into a memarea buffer
    dst = torch.empty_like(src)
    memarea.copy(dst, buf)  # and back into another tensor
    assert torch.equal(src, dst)
    cpu = torch.empty(256, 256)
    memarea.copy(cpu, buf)  # a CPU tensor (DLPack, kDLCPU)
    assert torch.equal(cpu, src.cpu())
    with pytest.raises(ValueError, match="C-contiguous"):
        memarea.copy(buf, src.t())
    buf.free()


def test_torch_cpu_tensor_over_host_memory(no_export_leak):
    torch = pytest.importorskip("torch")
    buf = memarea.Area(kind="host_numa").alloc(400)
    t = torch.from_dlpack(buf.view("int32", (10, 10)))
    assert t.data_ptr() == buf.ptr
    t.fill_(7)
    assert (np.asarray(buf.view("int32")) == 7).all()
    del t
    gc.collect()
    buf.free()


def test_torch_tensor_shared_with_child(cuda, no_export_leak):
    torch = pytest.importorskip("torch")
    buf = memarea.Area(0).alloc(4 * 4096)
    t = torch.from_dlpack(buf.view("float32", (64, 64)))
    data = rand_f32(4096).reshape(64, 64)
    t.copy_(torch.from_numpy(data).cuda())
    torch.cuda.synchronize()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as p:
        device, seen = call(p, ipc_workers.torch_child, (buf.view("float32", (64, 64)), 3.0))
    assert device == "cuda:0"
    assert np.array_equal(seen, data)
    assert np.array_equal(t.cpu().numpy(), data * 3.0)  # the child's write, seen here
    del t
    gc.collect()
    buf.free()


# --- cupy ---------------------------------------------------------------------------------------


def test_cupy_from_dlpack_and_cai(cuda, no_export_leak):
    cupy = pytest.importorskip("cupy")
    buf = memarea.Area(0).alloc(4 * 1000)
    a = cupy.from_dlpack(buf.view("float32"))
    assert a.data.ptr == buf.ptr and a.shape == (1000,)
    b = cupy.asarray(buf.view("float32"))  # __cuda_array_interface__: no copy either
    assert b.data.ptr == buf.ptr
    data = rand_f32(1000)
    a[:] = cupy.asarray(data)  # written through cupy
    cupy.cuda.runtime.deviceSynchronize()
    out = np.empty(1000, np.float32)
    memarea.copy(out, buf)     # read through memarea
    assert np.array_equal(out, data)
    other = rand_f32(1000)
    memarea.copy(buf, other)
    assert np.array_equal(cupy.asnumpy(b), other)
    memarea.copy(buf, cupy.asarray(data))  # a cupy array as a copy source
    assert np.array_equal(cupy.asnumpy(a), data)
    del a, b
    gc.collect()
    buf.free()


def test_torch_writes_cupy_reads(cuda, no_export_leak):
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    buf = memarea.Area(0).alloc(8 * 512)
    t = torch.from_dlpack(buf.view("float64"))
    c = cupy.from_dlpack(buf.view("float64"))
    data = np.random.default_rng().standard_normal(512) + 1
    t.copy_(torch.from_numpy(data).cuda())
    torch.cuda.synchronize()
    assert np.array_equal(cupy.asnumpy(c), data)
    c *= 2
    cupy.cuda.runtime.deviceSynchronize()
    assert np.array_equal(t.cpu().numpy(), data * 2)
    del t, c
    gc.collect()
    buf.free()


def test_cupy_managed_memory(cuda, need_managed, no_export_leak):
    cupy = pytest.importorskip("cupy")
    buf = memarea.Area(0, "managed").alloc(4 * 256)
    data = rand_f32(256)
    np.asarray(buf.view("float32"))[:] = data          # written by the host
    a = cupy.from_dlpack(buf.view("float32"))          # kDLCUDAManaged
    assert a.data.ptr == buf.ptr
    assert float(cupy.asnumpy(a).sum()) == pytest.approx(float(data.sum()), rel=1e-5)
    del a
    gc.collect()
    buf.free()


# --- jax ----------------------------------------------------------------------------------------


def test_jax_reads_memarea_memory(cuda):
    # No export check here: JAX may release an imported buffer after its own asynchronous
    # work drains, later than this test ends; the Buffer outlives it through the capsule.
    jax = pytest.importorskip("jax")
    import jax.dlpack
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("jax has no GPU device")
    buf = memarea.Area(0).alloc(4 * 2048)
    data = rand_f32(2048)
    memarea.copy(buf, data)
    x = jax.dlpack.from_dlpack(buf.view("float32", (2, 1024)))
    assert x.shape == (2, 1024)
    assert np.array_equal(np.asarray(x), data.reshape(2, 1024))
    y = jax.numpy.asarray(data[::-1].copy()) * 1  # a jax array as a copy source
    memarea.copy(buf, y)
    out = np.empty(2048, np.float32)
    memarea.copy(out, buf)
    assert np.array_equal(out, data[::-1])
