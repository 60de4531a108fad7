"""Memory usage (memarea.memory_usage, reset_usage_peaks) and memarea.ps (docs/usage.md)."""

import os

import pytest

import memarea

MiB = 1 << 20


def test_usage_counts_an_area_allocation_until_freed(need_device):
    before = memarea.memory_usage(0)
    buf = memarea.Area(0).alloc(4 * MiB)
    during = memarea.memory_usage(0)
    assert during["device"] == 0
    assert during["live"] - before["live"] == 4 * MiB
    assert during["reserved"] - before["reserved"] == 4 * MiB
    assert during["peak_live"] >= during["live"]
    buf.free()
    after = memarea.memory_usage(0)
    assert after["live"] == before["live"] and after["reserved"] == before["reserved"]
    memarea.reset_usage_peaks(0)
    assert memarea.memory_usage(0)["peak_live"] == after["live"]


def test_usage_of_pool_pieces_and_the_host(need_device):
    before = memarea.memory_usage(0)
    with memarea.Pool(memarea.Area(0)) as pool:
        piece = pool.alloc(MiB)
        now = memarea.memory_usage(0)
        reserved = pool.stats()["bytes_reserved"]
        assert now["live"] - before["live"] == MiB
        assert now["cached"] - before["cached"] == reserved - MiB
        piece.free()
        assert memarea.memory_usage(0)["live"] == before["live"]
    host = memarea.memory_usage(memarea.CPU_DEVICE_ID)
    assert host["device"] == memarea.CPU_DEVICE_ID


def test_usage_refuses_a_bad_device():
    for bad in (memarea.device_count(), -2):
        with pytest.raises(memarea.Error) as e:
            memarea.memory_usage(bad)
        assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(TypeError):
        memarea.memory_usage("0")


def test_ps_lists_this_process_once_it_published(need_device):
    import time
    buf = memarea.Area(0).alloc(2 * MiB)
    deadline = time.monotonic() + 30
    mine = []
    while time.monotonic() < deadline:
        mine = [p for p in memarea.ps()["processes"] if p["pid_here"] == os.getpid()]
        if mine and any(d["device"] == 0 and d["live"] >= 2 * MiB for d in mine[0]["devices"]):
            break
        time.sleep(0.05)
    assert mine, "this process is not in memarea.ps()"
    assert all(d["device"] == 0 for d in memarea.ps(0)["processes"][0]["devices"])
    buf.free()
