#!/usr/bin/env python3
"""Experiment (not part of the library): where the MLP case of python/bench/bench_frameworks.py
spends the time that memarea's allocator adds.

The same MLP as the bench (1024-4096-4096-1024, batch 256, Adam, 200 steps a repetition), one
process per allocator, the allocators taken in turns over --rounds rounds (ABCD ABCD ...) so
that a drift of the host is spread over all of them:
  torch    PyTorch's caching allocator;
  memarea  memarea.torch.install();
  probe    memarea's pair behind a wrapper that counts calls, the time inside them and the calls
           made on a thread other than the first caller's (torch_alloc_shim.c);
  floor    a pluggable allocator that costs nearly nothing (exact-size lists under one mutex):
           what the pluggable path itself adds.
Prints per allocator: wall ms per repetition (min median max over every repetition of every
round), the GPU's time for the same steps (CUDA events), and for probe the calls per step,
ns per call and the share of calls on another thread.

  gcc -O2 -shared -fPIC -o /tmp/torch_alloc_shim.so bench/experiments/torch_alloc_shim.c -ldl -lpthread
  MEMAREA_LIBRARY=.../libmemarea.so PYTHONPATH=python python3 \
      bench/experiments/mlp_allocator_probe.py /tmp/torch_alloc_shim.so [--rounds 3] [--reps 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def child(kind, shim, steps, reps):
    import ctypes
    import torch
    if kind == "memarea":
        import memarea.torch
        memarea.torch.install()
    elif kind in ("probe", "floor"):
        alloc = torch.cuda.memory.CUDAPluggableAllocator(shim, kind + "_malloc", kind + "_free")
        torch.cuda.memory.change_current_allocator(alloc)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python", "bench"))
    from bench_frameworks import mlp_step
    step = mlp_step(torch)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    stats = (ctypes.c_uint64 * 6)()
    if kind == "probe":
        ctypes.CDLL(shim).probe_stats(stats)
    before = list(stats)
    walls, gpus = [], []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter_ns()
        start.record()
        for _ in range(steps):
            step()
        end.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter_ns() - t0) / 1e6)
        gpus.append(start.elapsed_time(end))
    out = {"wall_ms": walls, "gpu_ms": gpus}
    if kind == "probe":
        ctypes.CDLL(shim).probe_stats(stats)
        d = [a - b for a, b in zip(stats, before)]
        n = reps * steps
        out.update(mallocs_per_step=d[0] / n, frees_per_step=d[1] / n,
                   ns_per_malloc=d[2] / max(d[0], 1), ns_per_free=d[3] / max(d[1], 1),
                   other_thread_mallocs=d[4] / max(d[0], 1), other_thread_frees=d[5] / max(d[1], 1))
    if kind == "torch":
        s = torch.cuda.memory_stats()
        out["torch_allocations"] = s.get("allocation.all.allocated")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--child")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.shim, a.steps, a.reps)))
        return 0
    kinds = ("torch", "memarea", "probe", "floor")
    got = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k in kinds:
            p = subprocess.run([sys.executable, __file__, a.shim, "--child", k, "--reps",
                                str(a.reps), "--steps", str(a.steps)],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                print(f"{k}: failed\n{p.stderr[-2000:]}")
                continue
            got[k].append(json.loads(p.stdout.strip().splitlines()[-1]))
    base = None
    for k in kinds:
        if not got[k]:
            continue
        walls = sorted(w for g in got[k] for w in g["wall_ms"])
        gpus = sorted(w for g in got[k] for w in g["gpu_ms"])
        med = statistics.median(walls)
        base = base or med
        rounds = " ".join(f"{statistics.median(g['wall_ms']):.1f}" for g in got[k])
        print(f"{k:8} wall {walls[0]:.1f} {med:.1f} {walls[-1]:.1f} ms ({(med / base - 1) * 100:+.2f}%)"
              f"  gpu {gpus[0]:.1f} {statistics.median(gpus):.1f} {gpus[-1]:.1f} ms"
              f"  per round: {rounds}")
        extra = {x: y for x, y in got[k][-1].items() if x not in ("wall_ms", "gpu_ms")}
        if extra:
            print("         " + ", ".join(f"{x} {y:.3g}" if isinstance(y, float) else f"{x} {y}"
                                         for x, y in extra.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
