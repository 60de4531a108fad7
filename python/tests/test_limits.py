"""Memory limits and out-of-memory handlers from Python (docs/usage.md)."""

import pytest

import memarea

MiB = 1 << 20


@pytest.fixture
def capped(need_device):
    # What earlier tests' pools cache would go back at the first refusal, before any handler
    # runs: one refused allocation under a cap of 1 byte trims it now, so that the cap below
    # leaves exactly 4 MiB of room.
    memarea.set_memory_limit(0, 1)
    with pytest.raises(memarea.Error):
        memarea.Area(0).alloc(MiB)
    memarea.set_memory_limit(0, memarea.memory_usage(0)["reserved"] + 4 * MiB)
    yield 0
    memarea.set_memory_limit(0, 0)


def test_cap_refuses_and_handler_frees_for_the_retry(capped):
    area = memarea.Area(0)
    ballast = [area.alloc(3 * MiB)]
    seen = []

    def handler(info):
        seen.append(info)
        ballast.pop().free()
        return True

    hid = memarea.add_oom_handler(handler)
    try:
        buf = area.alloc(3 * MiB)
        buf.free()
    finally:
        memarea.remove_oom_handler(hid)
    assert len(seen) == 1
    assert seen[0]["reason"] == "limit" and seen[0]["bytes"] == 3 * MiB and seen[0]["device"] == 0


def test_handler_that_raises_counts_as_no_retry(capped, monkeypatch):
    reported = []
    monkeypatch.setattr("sys.unraisablehook", lambda args: reported.append(args.exc_value))

    def handler(info):
        raise RuntimeError("boom")

    hid = memarea.add_oom_handler(handler)
    try:
        with pytest.raises(memarea.Error) as e:
            memarea.Area(0).alloc(8 * MiB)
        assert e.value.status == memarea.Status.OUT_OF_MEMORY
    finally:
        memarea.remove_oom_handler(hid)
    assert len(reported) == 1 and str(reported[0]) == "boom"


def test_bad_arguments(need_device):
    with pytest.raises(memarea.Error) as e:
        memarea.set_memory_limit(memarea.device_count(), 1)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(memarea.Error) as e:
        memarea.remove_oom_handler(0)
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(TypeError):
        memarea.add_oom_handler(None)
    assert memarea.memory_limit(0) == 0


@pytest.mark.parametrize("text, caps, warned", [
    ("0:8GiB,1:512M", (8 << 30, 512 << 20), False),
    ("0:12", (12, 0), False),
    ("0:8XB", (0, 0), True),
    ("70:1G", (0, 0), True),
    ("0:1G,garbage", (0, 0), True),
])
def test_memory_limit_environment_variable(text, caps, warned):
    import os
    import subprocess
    import sys
    env = dict(os.environ, MEMAREA_MEMORY_LIMIT=text, MEMAREA_BACKEND="sim",
               MEMAREA_SIM_DEVICES="2")
    r = subprocess.run([sys.executable, "-c",
                        "import memarea; print(memarea.memory_limit(0), memarea.memory_limit(1))"],
                       env=env, capture_output=True, text=True, check=True)
    assert tuple(int(x) for x in r.stdout.split()) == caps
    assert ("MEMAREA_MEMORY_LIMIT" in r.stderr) == warned
