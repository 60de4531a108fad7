"""Shared fixtures of the memarea Python suite. It runs against whichever backend is active:
sim in CI (MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2), CUDA on the GPU machine."""

import gc
import os
import sys
import time

import numpy as np
import pytest

# The package from this checkout, unless the caller put another one first on purpose.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))

import memarea  # noqa: E402

# JAX takes 75% of the GPU's memory at its first use unless told otherwise: the interop tests
# would leave the others none (and every free-memory check would see it gone).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def random_bytes(n, seed=None):
    """n random bytes as a uint8 NumPy array, never all zeros (a zero-filled buffer would hide a
    copy that did nothing)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, n, dtype=np.uint8)
    if n:
        a[0] |= 1
    return a


def call(pool, fn, args, timeout=120):
    """pool.apply with a deadline: multiprocessing replaces a worker that dies, and a plain
    apply would wait for it forever."""
    return pool.apply_async(fn, args).get(timeout)


@pytest.fixture(scope="session")
def backend():
    return memarea.backend()


@pytest.fixture(scope="session")
def ndev():
    return memarea.device_count()


@pytest.fixture
def need_device(ndev):
    if ndev < 1:
        pytest.skip("the active backend has no device")


@pytest.fixture
def need_two(ndev):
    if ndev < 2:
        pytest.skip("needs two devices")


@pytest.fixture
def need_managed(need_device):
    if not memarea.device_properties(0)["managed_memory"]:
        pytest.skip("device 0 has no managed memory")


def free_memory(device=0):
    return memarea.device_properties(device)["free_memory"]


@pytest.fixture
def no_leak(backend, ndev):
    """Checks that a test gives back every DLPack export it made and, on sim, every byte of
    device 0 (sim's free memory is this process's own exact account). On a real GPU the figure
    also moves with other processes -- the IPC tests' children create CUDA contexts -- so there
    test_gc_frees_device_memory checks freeing on its own, with a tolerance. Memory another
    process still had open when we freed it comes back once that process closes it, which
    memarea's background thread notices within ~50 ms: the check waits up to 5 s for it."""
    exact = backend == "sim" and ndev > 0
    gc.collect()
    before = free_memory() if exact else None
    exports = memarea.live_exports()
    yield
    gc.collect()
    assert memarea.live_exports() == exports
    if exact:
        deadline = time.monotonic() + 5
        after = free_memory()
        while after != before and time.monotonic() < deadline:
            time.sleep(0.05)
            after = free_memory()
        assert after == before, f"free memory {before} -> {after}"
