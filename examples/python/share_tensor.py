#!/usr/bin/env python3
"""Shares a PyTorch tensor's worth of device memory between two processes through memarea.

The parent allocates device memory with memarea, makes a torch tensor over it (no copy: DLPack)
and fills it. It hands the memory to a child process (spawn) by pickling a memarea View: what
travels is an IPC handle, not the data. The child opens the same device memory, reads it as a
torch tensor, checks it, and scales it in place; the parent then sees the child's write.

    python3 examples/python/share_tensor.py     # on a CUDA machine with PyTorch

Without PyTorch, or without a CUDA device under memarea's CUDA backend, it says so and exits 0.
"""

import multiprocessing
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))  # the package of this checkout (or of out/gpu-bin)

import memarea  # noqa: E402

SHAPE = (1024, 256)  # 1 MiB of float32


def child(view, expected_sum):
    """Runs in the other process: the pickled View arrives as the same device memory."""
    import torch
    t = torch.from_dlpack(view)  # zero-copy: a tensor over the memory the parent allocated
    total = t.double().sum().item()
    ok = abs(total - expected_sum) <= 1e-6 * max(1.0, abs(expected_sum))
    print(f"child  {os.getpid()}: tensor {tuple(t.shape)} {t.dtype} on {t.device} at "
          f"{t.data_ptr():#x}, sum {total:.6f} ({'matches' if ok else 'DIFFERS'})")
    t.mul_(2)  # written in place: the parent reads it next
    torch.cuda.synchronize()
    return ok


def main() -> int:
    try:
        import torch
    except ImportError:
        print("share_tensor: skipped: PyTorch is not installed")
        return 0
    if memarea.backend() != "cuda" or memarea.device_count() == 0 or \
            not torch.cuda.is_available():
        print(f"share_tensor: skipped: needs a CUDA device (memarea backend "
              f"{memarea.backend()}, torch.cuda.is_available() {torch.cuda.is_available()})")
        return 0

    area = memarea.Area(device=0)
    nbytes = SHAPE[0] * SHAPE[1] * 4
    with area.alloc(nbytes) as buf:
        view = buf.view("float32", SHAPE)
        t = torch.from_dlpack(view)
        t.normal_()  # filled through torch, in memarea's memory
        torch.cuda.synchronize()
        expected = t.double().sum().item()
        print(f"parent {os.getpid()}: tensor {tuple(t.shape)} on {t.device} at "
              f"{t.data_ptr():#x} = memarea buffer {buf.ptr:#x}, sum {expected:.6f}")

        # The buffer must outlive the child's open: it does (the with-block ends after).
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            ok = pool.apply_async(child, (view, expected)).get(120)

        doubled = t.double().sum().item()
        seen = abs(doubled - 2 * expected) <= 1e-6 * max(1.0, abs(expected))
        print(f"parent {os.getpid()}: after the child's write, sum {doubled:.6f} "
              f"({'twice the original' if seen else 'NOT twice the original'})")
        del t  # the tensor releases the buffer (DLPack) before the with-block frees it
    return 0 if ok and seen else 1


if __name__ == "__main__":
    sys.exit(main())
