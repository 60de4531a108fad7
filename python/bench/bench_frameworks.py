#!/usr/bin/env python3
"""memarea inside PyTorch, against PyTorch's own caching allocator, side by side in one run.

Cases, each measured in a process of its own per allocator (memarea.torch.install() must come
before torch's first CUDA allocation, and peaks must start from nothing):
  empty    the first --ops operations of REFERENCE.md's mixed trace (allocations of 256 B to
           4 MiB, frees of a random live one, at most 1,000 live) as torch.empty(n,
           dtype=uint8) and del; per operation; peak reserved after the replays;
  mlp      a small MLP (1024-4096-4096-1024, batch 256, Adam), forward and backward, --steps
           steps; wall time per run of the steps (and the GPU's time of them, CUDA events);
           peak reserved; --rounds rounds with the allocators in turns within each, since the
           GPU's speed drifts between processes by more than the allocators differ;
  ipc      a fresh 1 MiB tensor handed to another process and opened there, as a torch tensor,
           round trip per tensor (the child answers once it holds the tensor): memarea's
           handle through a pipe and memarea.ipc.open + torch.from_dlpack, against
           torch.multiprocessing's queue; and the bare pipe round trip for scale.
Allocators: "torch" (the caching allocator), "memarea" (install(): every tensor from
memarea's pool), "memarea-mempool" (use_pool: torch.cuda.MemPool over memarea's allocator).
Peak reserved: torch.cuda.max_memory_reserved for the caching allocator (MemPools included),
the pool's peak_bytes_reserved for memarea's. Each figure: min, median and max over --reps
repetitions; ratios compare medians ("N.NNx faster/slower" is memarea's against torch's). No
target is asserted: this is a measurement.

Without torch or a GPU the cases skip with a line that says why (exit status 0); a measuring
process that fails or times out leaves its row failed (exit status 1). --stand-in uses the test
suite's torch stand-in (python/tests/stand_ins) so that the empty and ipc cases run on sim:

    MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 python3 python/bench/bench_frameworks.py --stand-in --quick
    python3 python/bench/bench_frameworks.py --json out.json          # on the GPU machine
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON = os.path.dirname(_HERE)
sys.path.insert(0, _PYTHON)

ALLOCATORS = ("torch", "memarea", "memarea-mempool")
CHILD_TIMEOUT = 540  # seconds per measuring process


def mixed_trace(count: int) -> list[int]:
    """REFERENCE.md's mixed trace, its first `count` operations: a size to allocate, or
    -(index + 1) of the live entry to free (the last live entry moves into its slot)."""
    mask = (1 << 64) - 1
    x = 0x5EED2024

    def nxt():
        nonlocal x
        x = (x + 0x9E3779B97F4A7C15) & mask
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    ops, live, reached = [], 0, False
    for _ in range(100000):
        if live == 0:
            alloc = True
        elif live == 1000:
            alloc = False
        elif not reached:
            alloc = True
        else:
            alloc = (nxt() >> 63) == 1
        if live == 1000:
            reached = True
        if alloc:
            u = (nxt() >> 11) * 2.0 ** -53
            size = min(max(int(256.0 * math.exp2(14.0 * u)), 256), (4 << 20) - 1)
            ops.append(size)
            live += 1
        else:
            ops.append(-(nxt() % live) - 1)
            live -= 1
    h = 0
    for op in ops:
        h = ((h * 1099511628211) & mask) ^ (op & mask)
    if h != 0x01CE674ECF3A0693:
        raise RuntimeError(f"the mixed trace's checksum is {h:#x}, not REFERENCE.md's")
    return ops[:count]


def summary(samples: list[float]) -> dict:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples),
            "n": len(samples)}


def ratio(mine: float, theirs: float) -> str:
    if mine <= theirs:
        return f"{theirs / mine:.2f}x faster"
    return f"{mine / theirs:.2f}x slower"


# --- inside a measuring process ------------------------------------------------------------------


def _import_torch(stand_in: bool):
    if stand_in:
        sys.path.insert(0, os.path.join(_PYTHON, "tests", "stand_ins"))
    import torch
    return torch


def _framework_versions() -> str:
    """", torch X, CuPy Y" for those that import (their versions change the allocator hooks)."""
    out = ""
    for name in ("torch", "cupy"):
        try:
            out += f", {name} {importlib.import_module(name).__version__}"
        except Exception:  # absent or broken: the cases say why they skip
            pass
    return out


def _setup(allocator: str, stand_in: bool):
    """torch and memarea set up for `allocator`; returns (torch, memarea, pool or None, ctx)."""
    torch = _import_torch(stand_in)
    import memarea
    import memarea.torch as mt
    pool, ctx = None, None
    if allocator == "memarea":
        mt.install()
        pool_handle = mt.get_pool(0)
        pool = ("handle", pool_handle)
    elif allocator == "memarea-mempool":
        p = memarea.Pool(memarea.Area(0))
        ctx = mt.use_pool(p)
        ctx.__enter__()
        pool = ("pool", p)
    return torch, memarea, pool, ctx


def _pool_peak(memarea, pool) -> int:
    import ctypes
    from memarea._lib import PoolStats, check, fn
    if pool[0] == "pool":
        return pool[1].stats()["peak_bytes_reserved"]
    s = PoolStats()
    check(fn.pool_get_stats(pool[1], ctypes.byref(s)))
    return s.peak_bytes_reserved


def _peak_reserved(torch, memarea, allocator, pool) -> int:
    if allocator == "torch":
        return int(torch.cuda.max_memory_reserved(0))
    return _pool_peak(memarea, pool)


def child_empty(args) -> dict:
    torch, memarea, pool, _ = _setup(args.allocator, args.stand_in)
    ops = mixed_trace(args.ops)
    nalloc = sum(1 for op in ops if op > 0)
    live_bytes = peak_live = 0
    per_op = []
    for rep in range(args.reps + 1):  # the first replay warms the allocator up, untimed
        live = []
        gc.disable()
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for op in ops:
            if op > 0:
                live.append(torch.empty(op, dtype=torch.uint8, device="cuda"))
            else:
                i = -op - 1
                live[i] = live[-1]
                live.pop()
        del live
        torch.cuda.synchronize()
        dt = (time.perf_counter_ns() - t0) / len(ops) / 1e3
        gc.enable()
        if rep:
            per_op.append(dt)
    # The trace's own peak of live bytes, for the reserved figure's scale.
    live = []
    for op in ops:
        if op > 0:
            live.append(op)
            live_bytes += op
            peak_live = max(peak_live, live_bytes)
        else:
            i = -op - 1
            live_bytes -= live[i]
            live[i] = live[-1]
            live.pop()
    return {"per_op_us": summary(per_op), "ops": len(ops), "allocations": nalloc,
            "peak_reserved": _peak_reserved(torch, memarea, args.allocator, pool),
            "peak_live": peak_live}


def mlp_step(torch):
    """One training step of the MLP case (1024-4096-4096-1024, batch 256, Adam) as a callable
    returning the loss; the model, optimiser and data made here on the current CUDA device."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
        torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def child_mlp(args) -> dict:
    torch, memarea, pool, _ = _setup(args.allocator, args.stand_in)
    if not hasattr(torch, "nn"):
        return {"skipped": "the torch stand-in has no nn"}
    step = mlp_step(torch)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    walls, gpus = [], []
    for _ in range(args.reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter_ns()
        start.record()
        for _ in range(args.steps):
            loss = step()
        end.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter_ns() - t0) / 1e6)
        gpus.append(start.elapsed_time(end))
    return {"wall_ms": summary(walls), "walls": walls, "gpu_ms": summary(gpus), "gpus": gpus,
            "steps": args.steps, "loss": float(loss.item()),
            "peak_reserved": _peak_reserved(torch, memarea, args.allocator, pool)}


def mlp_rows(args, allocators) -> list[dict]:
    """The MLP case over --rounds rounds, the allocators in turns within each (a process per
    allocator and round): the GPU's speed drifts between processes by more than an allocator
    can change (the steps are GPU-bound: CUDA events time them as the wall clock does), so
    each allocator's repetitions are spread over the same stretch of time."""
    got = {a: [] for a in allocators}
    for _ in range(args.rounds):
        for a in allocators:
            got[a].append(run_child("mlp", args, allocator=a))
    rows = []
    for a in allocators:
        failed = next((r for r in got[a] if "skipped" in r), None)
        if failed:
            rows.append({"case": "mlp", "allocator": a, **failed})
            continue
        walls = [w for r in got[a] for w in r["walls"]]
        gpus = [g for r in got[a] for g in r["gpus"]]
        rows.append({"case": "mlp", "allocator": a, "wall_ms": summary(walls),
                     "gpu_ms": summary(gpus), "steps": args.steps, "rounds": args.rounds,
                     "round_medians": [r["wall_ms"]["median"] for r in got[a]],
                     "loss": got[a][-1]["loss"],
                     "peak_reserved": max(r["peak_reserved"] for r in got[a])})
    return rows


def _ipc_receiver(conn, mode, stand_in, nbytes):
    """The other process: opens what arrives and answers once it holds it."""
    torch = _import_torch(stand_in)
    import memarea
    conn.send_bytes(b"ready")
    while True:
        if mode == "torch-mp":
            t = conn.recv()
            if t is None:
                break
            conn.send_bytes(b"k")
            del t
            continue
        msg = conn.recv_bytes()
        if msg == b"stop":
            break
        if mode == "pipe":
            conn.send_bytes(b"k")
            continue
        buf = memarea.ipc.open(msg, nbytes)
        t = None if stand_in else torch.from_dlpack(buf.view("uint8", (nbytes,)))
        conn.send_bytes(b"k")
        del t
        buf.free()


def child_ipc(args) -> dict:
    import multiprocessing as mp
    if args.ipc_mode == "torch-mp":
        import torch.multiprocessing as tmp
        ctx = tmp.get_context("spawn")
        torch = _import_torch(False)
    else:
        ctx = mp.get_context("spawn")
        torch, memarea, _, _ = _setup("memarea" if args.ipc_mode == "memarea" else "torch",
                                      args.stand_in)
    nbytes = 1 << 20
    if args.ipc_mode == "torch-mp":
        parent, child = ctx.Pipe()
    else:
        parent, child = mp.Pipe()
    p = ctx.Process(target=_ipc_receiver, args=(child, args.ipc_mode, args.stand_in, nbytes))
    p.start()
    try:
        if not parent.poll(120):
            raise TimeoutError("the receiving process did not start")
        parent.recv_bytes()
        samples = []
        for i in range(args.ipc_count + 10):  # ten warm-ups: the first import of a block
            t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            t0 = time.perf_counter_ns()
            if args.ipc_mode == "torch-mp":
                parent.send(t)
            elif args.ipc_mode == "pipe":
                parent.send_bytes(b"x" * 136)
            else:
                parent.send_bytes(memarea.ipc.handle(t))
            if not parent.poll(30):
                raise TimeoutError("no answer from the receiving process")
            parent.recv_bytes()
            dt = (time.perf_counter_ns() - t0) / 1e3
            if i >= 10:
                samples.append(dt)
            del t
        if args.ipc_mode == "torch-mp":
            parent.send(None)
        else:
            parent.send_bytes(b"stop")
        p.join(60)
        return {"round_trip_us": summary(samples), "bytes": nbytes}
    finally:
        if p.is_alive():
            p.kill()


# --- the orchestrating process ----------------------------------------------------------------


def run_child(case: str, args, **extra) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--ops", str(args.ops),
           "--reps", str(args.reps), "--steps", str(args.steps), "--ipc-count",
           str(args.ipc_count)]
    if args.stand_in:
        cmd.append("--stand-in")
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}", v]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {CHILD_TIMEOUT} s", "failed": True}
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return {"skipped": f"failed (exit {r.returncode}): " + " | ".join(tail), "failed": True}
    return json.loads(r.stdout.strip().splitlines()[-1])


def availability(stand_in: bool) -> str | None:
    """Why nothing can be measured here, or None."""
    if stand_in:
        return None
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    import memarea
    if memarea.backend() != "cuda":
        return f"memarea's backend is {memarea.backend()}, not cuda"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=10000, help="mixed-trace operations (10000)")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (5)")
    ap.add_argument("--steps", type=int, default=200, help="MLP training steps (200)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="MLP rounds, the allocators in turns within each (3)")
    ap.add_argument("--ipc-count", type=int, default=200, help="tensors handed over (200)")
    ap.add_argument("--cases", default="empty,mlp,ipc", help="which cases (empty,mlp,ipc)")
    ap.add_argument("--quick", action="store_true", help="few operations (smoke runs)")
    ap.add_argument("--stand-in", action="store_true",
                    help="the test suite's torch stand-in (sim runs without torch)")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--allocator", default="torch", help=argparse.SUPPRESS)
    ap.add_argument("--ipc-mode", default="memarea", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        out = {"empty": child_empty, "mlp": child_mlp, "ipc": child_ipc}[args.child](args)
        print(json.dumps(out))
        return 0
    if args.quick:
        args.ops, args.reps, args.steps, args.ipc_count, args.rounds = 2000, 2, 20, 20, 1
    import memarea
    print(f"# memarea {memarea.__version__}, backend {memarea.backend()}, "
          f"{memarea.device_count()} device(s), Python {sys.version.split()[0]}"
          + (", torch stand-in" if args.stand_in else _framework_versions()))
    rows = []
    why = availability(args.stand_in)
    if why:
        print(f"# all cases skipped: {why}")
    cases = [] if why else [c for c in args.cases.split(",") if c]
    allocators = ("torch", "memarea") if args.stand_in else ALLOCATORS
    for case in cases:
        if case == "ipc":
            modes = ("pipe", "memarea") if args.stand_in else ("pipe", "memarea", "torch-mp")
            for mode in modes:
                rows.append({"case": "ipc", "mode": mode, **run_child("ipc", args,
                                                                     ipc_mode=mode)})
            continue
        if case == "mlp" and args.stand_in:
            print("# mlp skipped: the torch stand-in cannot train")
            continue
        if case == "mlp":
            rows += mlp_rows(args, allocators)
            continue
        for a in allocators:
            rows.append({"case": case, "allocator": a, **run_child(case, args, allocator=a)})
    report(rows)
    if args.stand_in:
        print("# stand-in: its 'torch' rows are the stand-in's own host allocator, not PyTorch's; "
              "the memarea rows run the real entry points through it")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": memarea.backend(), "python": sys.version.split()[0],
                       "ops": args.ops, "reps": args.reps, "steps": args.steps,
                       "ipc_count": args.ipc_count, "stand_in": args.stand_in, "rows": rows},
                      f, indent=2)
    failed = [r for r in rows if r.get("failed")]
    if failed:
        print(f"# {len(failed)} row(s) failed")
    return 1 if failed else 0


def _fmt(s: dict) -> str:
    return f"{s['min']:10.3f} {s['median']:10.3f} {s['max']:10.3f}"


def report(rows: list[dict]) -> None:
    def find(case, key, value):
        return next((r for r in rows if r["case"] == case and r.get(key) == value
                     and "skipped" not in r), None)

    for case, key, metric, unit in (("empty", "allocator", "per_op_us", "us/op"),
                                    ("mlp", "allocator", "wall_ms", "ms/run"),
                                    ("ipc", "mode", "round_trip_us", "us/tensor")):
        mine = [r for r in rows if r["case"] == case]
        if not mine:
            continue
        print(f"\n{case:<28}  {'min':>10} {'median':>10} {'max':>10}  {unit}")
        base = find(case, key, "torch" if case != "ipc" else "torch-mp")
        for r in mine:
            name = r[key]
            if "skipped" in r:
                print(f"{name:<28}  skipped: {r['skipped']}")
                continue
            line = f"{name:<28}  {_fmt(r[metric])}"
            notes = []
            if base is not None and r is not base:
                notes.append(ratio(r[metric]["median"], base[metric]["median"]) + " than " +
                             base[key])
            if r.get("gpu_ms"):
                notes.append(f"GPU {r['gpu_ms']['median']:.1f} ms (CUDA events)")
            if r.get("round_medians"):
                notes.append("rounds " + " ".join(f"{m:.1f}" for m in r["round_medians"]))
            if r.get("peak_reserved"):
                notes.append(f"peak reserved {r['peak_reserved'] / 2**20:.1f} MiB")
                if r.get("peak_live"):
                    notes.append(f"{r['peak_reserved'] / r['peak_live']:.2f}x peak live")
            print(line + ("  " + "; ".join(notes) if notes else ""))
    ipc = find("ipc", "mode", "memarea")
    if ipc:
        m = ipc["round_trip_us"]["median"]
        print(f"# memarea IPC of a fresh tensor: {m:.1f} us median; aim at most 100 us: "
              f"{'met' if m <= 100 else 'missed'}")
    mlp_t, mlp_m = find("mlp", "allocator", "torch"), find("mlp", "allocator", "memarea")
    if mlp_t and mlp_m:
        d = mlp_m["wall_ms"]["median"] / mlp_t["wall_ms"]["median"] - 1
        g = mlp_m["gpu_ms"]["median"] / mlp_t["gpu_ms"]["median"] - 1
        print(f"# MLP with memarea's allocator: {d * 100:+.2f}% wall time against torch's "
              f"(medians of {mlp_m['wall_ms']['n']} repetitions over {mlp_m['rounds']} rounds; "
              f"GPU time {g * 100:+.2f}%); aim within 2%: "
              f"{'met' if abs(d) <= 0.02 or d < 0 else 'missed'}")
    e_t, e_m = find("empty", "allocator", "torch"), find("empty", "allocator", "memarea")
    if e_t and e_m:
        ok = e_m["per_op_us"]["median"] <= e_t["per_op_us"]["median"]
        print(f"# torch.empty/del with memarea's allocator at least as fast as torch's: "
              f"{'met' if ok else 'missed'}")


if __name__ == "__main__":
    sys.exit(main())
