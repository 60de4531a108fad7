#!/usr/bin/env python3
"""Experiment (not part of the library): how often an importer opens a pool block with the
driver again when pieces of it are shared one after another, as the frameworks bench's
"fresh tensor" case does.

A parent allocates a 1 MiB piece of one memarea pool, sends its IPC handle to a child, waits for
the child's reply and frees the piece; 200 times. The child opens each handle and closes it,
either before it replies ("close-first") or after ("free-first": the parent's free usually
comes first, which is the bench's order). The child runs with MEMAREA_IPC_TIMING=1; its lines
say for each first open whether the block's mapping and the exporter's segment were open
already. Prints per order: round trip min/median/max (us) and how many opens took a driver open
and how many mapped the exporter's segment again.

  MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 PYTHONPATH=python python3 \
      bench/experiments/ipc_piece_reopen.py        # or on a GPU with MEMAREA_BACKEND=cuda
"""
import multiprocessing as mp
import os
import sys
import tempfile
import time


def child(conn, nbytes, close_first, log):
    os.environ["MEMAREA_IPC_TIMING"] = "1"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    import memarea
    conn.send_bytes(b"ready")
    while True:
        msg = conn.recv_bytes()
        if msg == b"stop":
            break
        buf = memarea.ipc.open(msg, nbytes)
        if close_first:
            buf.free()
            conn.send_bytes(b"k")
        else:
            conn.send_bytes(b"k")
            buf.free()


def run(close_first):
    import memarea
    nbytes, count = 1 << 20, 200
    pool = memarea.Pool(memarea.Area(0))
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "child.err")
        ctx = mp.get_context("spawn")
        parent, c = ctx.Pipe()
        p = ctx.Process(target=child, args=(c, nbytes, close_first, log))
        p.start()
        parent.recv_bytes()
        times = []
        for _ in range(count):
            t = pool.alloc(nbytes)
            t0 = time.perf_counter_ns()
            parent.send_bytes(memarea.ipc.handle(t))
            parent.recv_bytes()
            times.append((time.perf_counter_ns() - t0) / 1e3)
            t.free()
        parent.send_bytes(b"stop")
        p.join()
        lines = [x for x in open(log).read().splitlines() if "ipc timing" in x]
    times.sort()
    driver = sum("driver open" in x for x in lines)
    segment = sum("exporter's segment mapped already" not in x for x in lines)
    name = "close-first" if close_first else "free-first"
    print(f"{name:12} round trip {times[0]:.1f} {times[len(times) // 2]:.1f} {times[-1]:.1f} us; "
          f"{len(lines)} first opens of {count}: {driver} driver opens, {segment} segment maps; "
          f"pool {pool.stats()['driver_allocations']} blocks")
    pool.close()


if __name__ == "__main__":
    for close_first in (True, False):
        run(close_first)
    sys.exit(0)
