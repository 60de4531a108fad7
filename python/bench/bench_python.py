#!/usr/bin/env python3
"""Per-call cost of memarea through Python, on both of the package's paths (the compiled
extension and ctypes alone), next to PyTorch's and CuPy's allocators in the same run (each
skipped when absent or without a GPU).

Cases: alloc+free from an Area (a driver allocation each time) and from a Pool, lookup of a
pointer, IPC export of a buffer, each marked [compiled] or [ctypes]; torch.empty + del
(PyTorch's caching allocator), cupy.empty + del (CuPy's memory pool). The [ctypes] rows come
from a child process with MEMAREA_PYTHON_PURE=1 (a process runs on one path), started by this
one when it runs on the extension. Every figure is per call: each of --reps repetitions times
--number calls back to back and divides; the script prints min, median and max over the
repetitions, how the medians compare with torch.empty's, and each compiled row against its
ctypes row. No target is asserted: this is a measurement (the Python tests never time
anything).

    MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 python3 python/bench/bench_python.py --quick
    python3 python/bench/bench_python.py --json out.json      # on the GPU machine
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


def cases(size: int, memarea_only: bool = False):
    """(name, callable) for everything available here; memarea's names end in the path that
    serves them."""
    found = []
    tag = f" [{memarea.implementation}]"
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

        found += [("memarea Area.alloc+free (device)" + tag, area_alloc_free),
                  ("memarea Pool.alloc+free (device)" + tag, pool_alloc_free),
                  ("memarea Pool.alloc+del (device)" + tag, pool_alloc_del),
                  ("memarea lookup (interior pointer)" + tag, lookup)]
        if memarea.device_properties(0)["ipc"]:
            found.append(("memarea Buffer.ipc_handle (cached export)" + tag, held.ipc_handle))
    host_pool = memarea.Pool(memarea.Area(kind="host_numa"))

    def host_pool_alloc_free():
        host_pool.alloc(size).free()

    found.append(("memarea Pool.alloc+free (pageable host)" + tag, host_pool_alloc_free))
    if memarea_only:
        return found
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


def run_cases(found, number: int, reps: int) -> dict:
    results = {}
    gc.disable()  # a collection inside a repetition would be charged to whatever ran
    try:
        for name, fn in found:
            t = measure(fn, number, reps)
            results[name] = {"min_us": min(t), "median_us": statistics.median(t),
                             "max_us": max(t)}
    finally:
        gc.enable()
    return results


def ctypes_rows(args) -> dict:
    """The memarea rows on ctypes alone, measured by a child process of this script."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        env = dict(os.environ, MEMAREA_PYTHON_PURE="1")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--memarea-only",
                        "--size", str(args.size), "--number", str(args.number),
                        "--reps", str(args.reps), "--json", out], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["results"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096, help="bytes per allocation (4096)")
    ap.add_argument("--number", type=int, default=2000, help="calls per repetition (2000)")
    ap.add_argument("--reps", type=int, default=30, help="timed repetitions (30)")
    ap.add_argument("--quick", action="store_true", help="few calls (smoke runs, CI)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--memarea-only", action="store_true",
                    help="memarea's rows only, on the path this process runs (the ctypes child)")
    args = ap.parse_args()
    if args.quick:
        args.number, args.reps = 200, 5
    native = sys.modules.get("memarea._native")
    print(f"# memarea {memarea.__version__}, backend {memarea.backend()}, "
          f"{memarea.device_count()} device(s), Python {sys.version.split()[0]}, "
          f"{args.size} B, {args.reps} x {args.number} calls; this process on "
          f"{memarea.implementation}"
          + (f" ({native.__file__})" if native else f" ({memarea._ext.reason})"))
    results = run_cases(cases(args.size, args.memarea_only), args.number, args.reps)
    if memarea.implementation == "compiled" and not args.memarea_only:
        results.update(ctypes_rows(args))
    if not args.memarea_only:
        report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": memarea.backend(), "size": args.size, "reps": args.reps,
                       "number": args.number, "python": sys.version.split()[0],
                       "implementation": memarea.implementation, "results": results}, f,
                      indent=2)
    return 0


def report(results: dict) -> None:
    base_name = next((n for n in results if n.startswith("torch.empty")), None)
    width = max(len(n) for n in results)
    print(f"{'case':<{width}}  {'min':>8} {'median':>8} {'max':>8}  us/call")
    for name, r in results.items():
        line = f"{name:<{width}}  {r['min_us']:8.3f} {r['median_us']:8.3f} {r['max_us']:8.3f}"
        notes = []
        if base_name and name != base_name:
            notes.append(ratio(r["median_us"], results[base_name]["median_us"]) +
                         " than torch.empty+del")
        twin = name.replace("[compiled]", "[ctypes]")
        if twin != name and twin in results:
            notes.append(ratio(r["median_us"], results[twin]["median_us"]) + " than ctypes")
        print(line + ("  " + "; ".join(notes) if notes else ""))
    for path in ("compiled", "ctypes"):
        name = f"memarea Pool.alloc+free (device) [{path}]"
        if name not in results:
            continue
        r = results[name]["median_us"]
        line = f"# Pool.alloc+free (device) on {path}: {r:.3f} us median"
        if path == "compiled":
            line += f"; aim at most 1 us: {'met' if r <= 1.0 else 'missed'}"
        if base_name:
            b = results[base_name]["median_us"]
            line += (f"; aim no slower than torch.empty+del ({b:.3f} us): "
                     f"{'met' if r <= b else 'missed'}")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
