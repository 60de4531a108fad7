#!/usr/bin/env python3
"""Per-call cost of memarea through Python, next to PyTorch's and CuPy's allocators in the same
run (each skipped when absent or without a GPU).

Cases: alloc+free from an Area (a driver allocation each time) and from a Pool, lookup of a
pointer, IPC export of a buffer, torch.empty + del (PyTorch's caching allocator), cupy.empty +
del (CuPy's memory pool). Every figure is per call: each of --reps repetitions times --number
calls back to back and divides; the script prints min, median and max over the repetitions,
and how the medians compare with torch.empty's. No target is asserted: this is a measurement
(the Python tests never time anything).

    MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 python3 python/bench/bench_python.py --quick
    python3 python/bench/bench_python.py --json out.json      # on the GPU machine
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import memarea  # noqa: E402


def measure(fn, number: int, reps: int) -> list[float]:
    """Microseconds per call of fn, one figure per repetition (after one warm-up repetition)."""
    out = []
    for rep in range(reps + 1):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        dt = (time.perf_counter_ns() - t0) / number / 1e3
        if rep:
            out.append(dt)
    return out


def cases(size: int):
    """(name, callable, setup note) for everything available here."""
    found = []
    ndev = memarea.device_count()
    if ndev:
        area = memarea.Area(0)
        pool = memarea.Pool(area)

        def area_alloc_free():
            area.alloc(size).free()

        def pool_alloc_free():
            pool.alloc(size).free()

        def pool_alloc_del():
            b = pool.alloc(size)
            del b

        held = area.alloc(size)
        inner = held.ptr + size // 2

        def lookup():
            memarea.lookup(inner)

        found += [("memarea Area.alloc+free (device)", area_alloc_free),
                  ("memarea Pool.alloc+free (device)", pool_alloc_free),
                  ("memarea Pool.alloc+del (device)", pool_alloc_del),
                  ("memarea lookup (interior pointer)", lookup)]
        if memarea.device_properties(0)["ipc"]:
            found.append(("memarea Buffer.ipc_handle (cached export)", held.ipc_handle))
    host_pool = memarea.Pool(memarea.Area(kind="host_numa"))

    def host_pool_alloc_free():
        host_pool.alloc(size).free()

    found.append(("memarea Pool.alloc+free (pageable host)", host_pool_alloc_free))
    try:
        import torch
        if torch.cuda.is_available():
            torch.empty(size, dtype=torch.uint8, device="cuda")  # initialise CUDA and its cache

            def torch_empty_del():
                t = torch.empty(size, dtype=torch.uint8, device="cuda")
                del t

            found.append(("torch.empty+del (CUDA caching allocator)", torch_empty_del))
        else:
            print("# torch: no CUDA device, torch.empty skipped")
    except ImportError:
        print("# torch: not installed, skipped")
    try:
        import cupy
        cupy.empty(size, dtype=cupy.uint8)  # initialise CUDA and the memory pool

        def cupy_empty_del():
            a = cupy.empty(size, dtype=cupy.uint8)
            del a

        found.append(("cupy.empty+del (CuPy memory pool)", cupy_empty_del))
    except ImportError:
        print("# cupy: not installed, skipped")
    except Exception as e:  # installed, but no usable GPU
        print(f"# cupy: unusable here ({type(e).__name__}: {e}), skipped")
    return found


def ratio(mine: float, theirs: float) -> str:
    if mine <= theirs:
        return f"{theirs / mine:.2f}x faster"
    return f"{mine / theirs:.2f}x slower"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096, help="bytes per allocation (4096)")
    ap.add_argument("--number", type=int, default=2000, help="calls per repetition (2000)")
    ap.add_argument("--reps", type=int, default=30, help="timed repetitions (30)")
    ap.add_argument("--quick", action="store_true", help="few calls (smoke runs, CI)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args()
    if args.quick:
        args.number, args.reps = 200, 5
    print(f"# memarea {memarea.__version__}, backend {memarea.backend()}, "
          f"{memarea.device_count()} device(s), Python {sys.version.split()[0]}, "
          f"{args.size} B, {args.reps} x {args.number} calls")
    results = {}
    gc.disable()  # a collection inside a repetition would be charged to whatever ran
    try:
        for name, fn in cases(args.size):
            t = measure(fn, args.number, args.reps)
            results[name] = {"min_us": min(t), "median_us": statistics.median(t),
                             "max_us": max(t)}
    finally:
        gc.enable()
    base_name = next((n for n in results if n.startswith("torch.empty")), None)
    width = max(len(n) for n in results)
    print(f"{'case':<{width}}  {'min':>8} {'median':>8} {'max':>8}  us/call")
    for name, r in results.items():
        line = f"{name:<{width}}  {r['min_us']:8.3f} {r['median_us']:8.3f} {r['max_us']:8.3f}"
        if base_name and name != base_name:
            line += "  " + ratio(r["median_us"], results[base_name]["median_us"]) + \
                " than torch.empty+del"
        print(line)
    if base_name and "memarea Pool.alloc+free (device)" in results:
        r = results["memarea Pool.alloc+free (device)"]["median_us"]
        b = results[base_name]["median_us"]
        print(f"# aim: a Pool allocation no slower than torch's caching allocator: "
              f"{'met' if r <= b else 'missed'} ({r:.3f} vs {b:.3f} us median)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": memarea.backend(), "size": args.size, "reps": args.reps,
                       "number": args.number, "python": sys.version.split()[0],
                       "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
