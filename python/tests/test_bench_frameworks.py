"""The frameworks bench's MLP rows (python/bench/bench_frameworks.py): the allocators taken in
turns within each round and each allocator's rounds merged into one row. The measuring processes
are faked: the MLP itself needs torch and a GPU (the gpu-suite runs it)."""

import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import bench_frameworks as bf  # noqa: E402


def _fake_children(monkeypatch, fail_call=None):
    calls = []

    def run_child(case, args, allocator):
        assert case == "mlp"
        calls.append(allocator)
        k = len(calls)
        if k == fail_call:
            return {"skipped": "failed (exit 1): boom", "failed": True}
        walls = [100.0 + k, 200.0 + k]
        gpus = [w - 1 for w in walls]
        return {"wall_ms": bf.summary(walls), "walls": walls, "gpu_ms": bf.summary(gpus),
                "gpus": gpus, "steps": args.steps, "loss": 0.5 + k, "peak_reserved": 1000 * k}

    monkeypatch.setattr(bf, "run_child", run_child)
    return calls


def test_the_allocators_take_turns_and_each_rows_rounds_are_merged(monkeypatch):
    calls = _fake_children(monkeypatch)
    args = types.SimpleNamespace(rounds=2, reps=2, steps=5)
    rows = bf.mlp_rows(args, ("torch", "memarea"))
    assert calls == ["torch", "memarea", "torch", "memarea"]
    torch_row, memarea_row = rows
    assert torch_row["allocator"] == "torch" and memarea_row["allocator"] == "memarea"
    # torch's processes were calls 1 and 3, memarea's 2 and 4.
    assert torch_row["wall_ms"] == {"min": 101.0, "median": 152.0, "max": 203.0, "n": 4}
    assert torch_row["gpu_ms"] == {"min": 100.0, "median": 151.0, "max": 202.0, "n": 4}
    assert torch_row["round_medians"] == [151.0, 153.0]
    assert memarea_row["round_medians"] == [152.0, 154.0]
    assert torch_row["peak_reserved"] == 3000 and memarea_row["peak_reserved"] == 4000
    assert torch_row["loss"] == 3.5 and torch_row["rounds"] == 2 and torch_row["steps"] == 5


def test_a_failed_round_fails_that_allocators_row_only(monkeypatch):
    _fake_children(monkeypatch, fail_call=4)
    rows = bf.mlp_rows(types.SimpleNamespace(rounds=2, reps=2, steps=5), ("torch", "memarea"))
    assert "failed" not in rows[0] and rows[0]["wall_ms"]["n"] == 4
    assert rows[1]["failed"] and "boom" in rows[1]["skipped"] and "wall_ms" not in rows[1]
