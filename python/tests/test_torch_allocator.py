"""memarea.torch with the real PyTorch on CUDA (skipped without torch, a CUDA device or
memarea's CUDA backend; scripts/gpu-suite.sh runs it on the GPU image): tensors made under
use_pool are memarea memory that lookup, copy and IPC take, the pool gets its blocks back, and
install() in a fresh process serves every tensor, refused once torch has allocated.
test_framework_stand_ins.py tests the same logic against a stand-in everywhere."""

import gc
import multiprocessing
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ipc_workers
import memarea
import memarea.torch
from conftest import call, random_bytes


@pytest.fixture
def torch(need_device, backend):
    if backend != "cuda":
        pytest.skip("PyTorch's CUDA tensors need memarea's CUDA backend")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture
def mem_pool(torch):
    if memarea.torch._mem_pool_api(torch) is None:
        pytest.skip(f"torch {torch.__version__} has no torch.cuda.MemPool(allocator)")
    yield torch
    memarea.torch.set_pool(None, 0)


def test_use_pool_tensors_are_memarea_memory(mem_pool):
    torch = mem_pool
    pool = memarea.Pool(memarea.Area(0))
    default = memarea.torch.get_pool(0)
    with memarea.torch.use_pool(pool) as mp:
        assert memarea.torch.get_pool(0) == pool._handle
        t = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
    assert memarea.torch.get_pool(0) == default
    info = memarea.lookup(t.data_ptr())
    assert info.kind == "device" and info.device == 0
    assert memarea.torch.stats(pool)["live_pieces"] >= 1
    torch.cuda.synchronize()
    host = np.empty(1 << 20, np.float32)
    memarea.copy(host, t)                     # written by torch, read by memarea
    assert np.array_equal(host, np.arange(1 << 20, dtype=np.float32))
    data = np.random.default_rng().standard_normal(1 << 20).astype(np.float32)
    memarea.copy(t, data)                     # written by memarea, read by torch
    assert torch.equal(t.cpu(), torch.from_numpy(data))
    del t, mp
    gc.collect()
    torch.cuda.empty_cache()
    assert memarea.torch.stats(pool)["live_pieces"] == 0
    assert pool.stats()["live_allocations"] == 0


def test_use_pool_restores_on_exceptions(mem_pool):
    pool = memarea.Pool(memarea.Area(0))
    default = memarea.torch.get_pool(0)
    with pytest.raises(ZeroDivisionError):
        with memarea.torch.use_pool(pool):
            1 / 0
    assert memarea.torch.get_pool(0) == default


def test_training_step_under_use_pool(mem_pool):
    torch = mem_pool
    pool = memarea.Pool(memarea.Area(0))
    with memarea.torch.use_pool(pool) as mp:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 8)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(128, 64, device="cuda"), torch.randn(128, 8, device="cuda")
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert memarea.lookup(next(model.parameters()).data_ptr()).kind == "device"
    assert losses[-1] < losses[0]
    del model, opt, x, y, loss, mp
    gc.collect()


METHODS = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


def test_ipc_handle_of_a_tensor(mem_pool):
    torch = mem_pool
    if not memarea.device_properties(0)["ipc"]:
        pytest.skip("device 0 has no IPC")
    pool = memarea.Pool(memarea.Area(0))
    with memarea.torch.use_pool(pool) as mp:
        t = torch.empty(100000, dtype=torch.uint8, device="cuda")
    data = random_bytes(100000)
    memarea.copy(t, data)
    h = memarea.ipc.handle(t)
    with multiprocessing.get_context(METHODS[0]).Pool(1) as p:
        assert call(p, ipc_workers.open_handle, (h, 100000)) == data.tobytes()
    del t, mp


def _fresh_python(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_install_serves_every_tensor_of_a_fresh_process(torch):
    r = _fresh_python("""
        import torch, memarea, memarea.torch
        memarea.torch.install()
        assert memarea.torch.installed()
        before = memarea.torch.stats()["live_pieces"]
        a = torch.randn(1000, 1000, device="cuda", requires_grad=True)
        b = (a @ a).relu().sum()
        b.backward()
        assert memarea.lookup(a.data_ptr()).kind == "device"
        assert memarea.lookup(a.grad.data_ptr()).kind == "device"
        assert memarea.torch.stats()["live_pieces"] > before
        torch.cuda.synchronize()
        del a, b
        import gc; gc.collect()
        assert memarea.torch.stats()["refused_frees"] == 0
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_install_refused_after_torch_allocated(torch):
    r = _fresh_python("""
        import torch, memarea, memarea.torch
        torch.empty(1, device="cuda")
        try:
            memarea.torch.install()
        except RuntimeError as e:
            print("refused:", e)
        else:
            raise SystemExit("install() was taken after torch's first CUDA allocation")
        assert not memarea.torch.installed()
    """)
    assert r.returncode == 0 and "refused" in r.stdout, r.stderr[-2000:]
