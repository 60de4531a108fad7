"""Functions the IPC tests run in other processes (importable by spawn / forkserver children:
pytest puts this directory on sys.path, and multiprocessing hands the path to its children)."""

import hashlib

import numpy as np

import memarea


def read(buf):
    """Reads an unpickled Buffer (opened through IPC) and returns its kind and bytes."""
    return buf.kind, buf.nbytes, buf.tobytes()


def read_view(view):
    host = np.empty(view.shape, np.dtype(view.dtype.name))
    memarea.copy(host, view)
    return host


def write(buf, seed):
    """Writes random bytes of `seed` into an opened Buffer; returns their digest."""
    data = np.random.default_rng(seed).integers(0, 256, buf.nbytes, dtype=np.uint8)
    memarea.copy(buf, data)
    return hashlib.sha256(data.tobytes()).hexdigest()


def open_handle(handle, nbytes):
    with memarea.ipc.open(handle, nbytes) as buf:
        return buf.tobytes()


def hold_then_read(buf, opened, release):
    """Keeps the memory open while the exporter frees its Buffer, then reads it."""
    opened.set()
    if not release.wait(60):
        raise TimeoutError("the parent never released")
    return buf.tobytes()


# What export_pool_piece keeps alive in this process until release_exports.
_kept = []


def export_pool_piece(nbytes, seed):
    """Allocates nbytes from a memarea Pool between two neighbours, fills it with random bytes
    of `seed`, and returns its raw IPC handle and those bytes; keeps it all alive."""
    mpool = memarea.Pool(memarea.Area(0))
    pieces = [mpool.alloc(nbytes) for _ in range(3)]
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    for k, b in enumerate(pieces):
        memarea.copy(b, np.full(nbytes, k + 1, np.uint8))
    memarea.copy(pieces[1], data)
    _kept.append((mpool, pieces))
    return pieces[1].ipc_handle(), data.tobytes()


def release_exports():
    """Frees what export_pool_piece kept."""
    while _kept:
        mpool, pieces = _kept.pop()
        for b in pieces:
            b.free()
        mpool.close()


def fail_open(handle):
    memarea.ipc.open(handle)


def torch_child(view, scale):
    """Reads a pickled memarea View as a torch tensor on the GPU, returns it on the host, and
    scales it in place (the parent sees the change: same device memory)."""
    import torch
    t = torch.from_dlpack(view)
    before = t.cpu().numpy().copy()
    t.mul_(scale)
    torch.cuda.synchronize()
    return str(t.device), before
