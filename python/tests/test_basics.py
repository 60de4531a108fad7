"""Backends, devices, info/topo, errors, argument checks."""

import json
import os
import shutil
import subprocess

import pytest

import memarea


def test_library_found():
    assert os.path.exists(memarea.library_path) or "/" not in memarea.library_path


def test_backend_and_devices(backend, ndev):
    assert backend in ("cuda", "hip", "sim", "none")
    assert ndev >= 0
    if os.environ.get("MEMAREA_BACKEND") == "sim":
        assert backend == "sim"
        assert ndev == int(os.environ.get("MEMAREA_SIM_DEVICES", "0"))


def test_current_device(need_two):
    prev = memarea.get_device()
    try:
        memarea.set_device(1)
        assert memarea.get_device() == 1
    finally:
        memarea.set_device(prev)
    with pytest.raises(memarea.Error) as e:
        memarea.set_device(99)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    assert memarea.get_device() == prev


@pytest.mark.parametrize("bad", [-2, -5, -(1 << 31)])
def test_device_ids_below_minus_one_are_invalid(bad, ndev):
    """-1 is the current device, 0..count-1 a device; anything else is INVALID_DEVICE (with or
    without devices), never taken for the current device."""
    for make in (lambda: memarea.Area(device=bad), lambda: memarea.Area(bad, "host"),
                 lambda: memarea.Stream(bad), lambda: memarea.synchronize(bad)):
        with pytest.raises(memarea.Error) as e:
            make()
        assert e.value.status == memarea.Status.INVALID_DEVICE
        assert f"device {bad}" in e.value.message
        assert f"has {ndev} device" in e.value.message


def test_device_past_the_last_is_invalid(need_device, ndev):
    with pytest.raises(memarea.Error) as e:
        memarea.Area(device=ndev)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    assert f"device {ndev}" in e.value.message and f"has {ndev} device" in e.value.message


def test_device_minus_one_is_the_current_device(need_device):
    a = memarea.Area(device=-1)
    assert a.device is None
    b = a.alloc(4096)
    assert b.device == memarea.get_device() == memarea.lookup(b).device
    b.free()
    a.close()
    s = memarea.Stream(-1)
    assert s.device == memarea.get_device()
    s.close()
    memarea.synchronize(-1)


def test_device_properties(need_device, backend):
    p = memarea.device_properties(0)
    assert p["backend"] == backend
    assert p["ordinal"] == 0
    assert 0 < p["free_memory"] <= p["total_memory"]
    assert isinstance(p["managed_memory"], bool)
    with pytest.raises(memarea.Error) as e:
        memarea.device_properties(1000)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    assert "1000" in e.value.message or e.value.message


def test_info_matches_properties(backend, ndev):
    i = memarea.info()
    assert i["backend"] == backend
    assert len(i["devices"]) == ndev
    assert any(b["name"] == backend and b["active"] for b in i["backends"]) or backend == "none"
    for d, j in enumerate(i["devices"]):
        p = memarea.device_properties(d)
        assert j["name"] == p["name"] and j["total_memory"] == p["total_memory"]
    assert i["host"]["numa_nodes"]


def _cli():
    """The CLI of the same build as the library: a build tree's tools/, or beside the library
    (out/gpu-bin), else on PATH."""
    lib = os.path.dirname(os.path.abspath(memarea.library_path))
    for exe in (os.path.join(os.path.dirname(lib), "tools", "memarea"),
                os.path.join(lib, "memarea")):
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return shutil.which("memarea")


def test_info_is_the_cli_document():
    exe = _cli()
    if not exe:
        pytest.skip("the memarea CLI is not next to the library or on PATH")
    cli = json.loads(subprocess.run([exe, "info", "--json"], check=True, capture_output=True,
                                    text=True).stdout)
    mine = memarea.info()
    for d in mine["devices"] + cli["devices"]:
        d.pop("free_memory")  # moves between the two calls
    for n in mine["host"]["numa_nodes"] + cli["host"]["numa_nodes"]:
        n.pop("free_memory")
    assert mine == cli


# What the topology report says in a library built without the measurement
# (src/topo/topo_unavailable.cpp).
_TOPO_COMPILED_OUT = ("this memarea was built without the topology measurement (CMake option "
                      "MEMAREA_WITH_TOPO=OFF); build it with MEMAREA_WITH_TOPO=ON for "
                      "`memarea topo`")


def _topo_built():
    """Whether the library under test has the topology measurement: CMake's MEMAREA_WITH_TOPO in
    the cache of the build tree the library lies in (ctest's runs); a library outside a build
    tree (installed) is taken to have it, as the default build does."""
    d = os.path.dirname(os.path.realpath(memarea.library_path))
    while True:
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.isfile(cache):
            with open(cache, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("MEMAREA_WITH_TOPO:"):
                        value = line.strip().split("=", 1)[-1].upper()
                        return value not in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE",
                                             "NOTFOUND") and not value.endswith("-NOTFOUND")
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return True
        d = parent


def test_topo(backend, ndev):
    if not _topo_built():
        # Built without the measurement: refused, saying why; argument checks come first.
        with pytest.raises(memarea.Error) as e:
            memarea.topo(size=1 << 16, reps=1)
        assert e.value.status == memarea.Status.NOT_SUPPORTED
        assert e.value.message.endswith(_TOPO_COMPILED_OUT), e.value.message
        with pytest.raises(ValueError):
            memarea.topo(size=-1)
        return
    if backend != "sim":
        pytest.skip("measures seconds on a GPU; the GPU suite runs `memarea topo`")
    t = memarea.topo(size=1 << 16, reps=1)
    assert t["backend"] == "sim" and t["size"] == 1 << 16 and t["reps"] == 1
    assert len(t["access"]) == ndev
    if ndev >= 2:
        assert t["unidirectional_gbps"][0][1] > 0
        assert t["unidirectional_gbps"][0][0] is None
    with pytest.raises(ValueError):
        memarea.topo(size=-1)


def test_error_type():
    e = memarea.Error(memarea.Status.BUSY, "pool destroy: 1 allocation(s) are still live")
    assert e.status is memarea.Status.BUSY
    assert "MEMAREA_ERROR_BUSY" in str(e) and "still live" in str(e)
    assert memarea.Error(12345, "x").status == memarea.Status.UNKNOWN
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    assert e2.status == e.status and e2.message == e.message


def test_synchronize(need_device):
    memarea.synchronize()
    memarea.synchronize(0)
    with pytest.raises(TypeError):
        memarea.synchronize("0")


def test_stream_lifecycle(need_device):
    with memarea.Stream(0) as s:
        assert s.device == 0 and s.handle
        s.synchronize()
    s.close()  # twice: nothing
    with pytest.raises(ValueError):
        s.synchronize()
    with pytest.raises(memarea.Error) as e:
        memarea.Stream(500)
    assert e.value.status == memarea.Status.INVALID_DEVICE
