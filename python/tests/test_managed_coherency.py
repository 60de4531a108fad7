"""HIP's coarse-grain advice and coherency mode, and attach_mem of memory memarea did not allocate.

Coarse grain is modelled on sim and real on HIP over AMD; CUDA and HIP's NVIDIA platform raise
NOT_SUPPORTED. attach_mem takes system-allocated memory where the stream's device reads
pageable memory (sim: MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS; the "python" ctest configuration
lists device 1 only, so both branches run there)."""

import mmap

import numpy as np
import pytest

import memarea


def coarse_grain_supported(backend):
    if backend == "sim":
        return True
    if backend != "hip":
        return False
    hip = [b for b in memarea.info()["backends"] if b["name"] == "hip"]
    return not hip[0]["version"].startswith("HIP's NVIDIA platform")


def pageable(device):
    return bool(memarea.device_properties(device)["pageable_memory_access"])


def test_coarse_grain_round_trip(need_managed, backend, no_leak):
    if not coarse_grain_supported(backend):
        pytest.skip(f"{backend} has no coarse grain (test_coarse_grain_not_supported)")
    buf = memarea.Area(0, "managed").alloc(3 * 4096)
    assert memarea.coherency_mode(buf) == "fine_grain"
    memarea.advise(buf, "coarse_grain")
    assert memarea.coherency_mode(buf) == "coarse_grain"
    memarea.advise(buf, "unset_coarse_grain", offset=4096, nbytes=4096)
    assert memarea.coherency_mode(buf) == "indeterminate"
    assert memarea.coherency_mode(buf, 0, 4096) == "coarse_grain"
    assert memarea.coherency_mode(buf, 4096, 4096) == "fine_grain"
    # a device is accepted and ignored, as for read_mostly
    memarea.advise(buf, "unset_coarse_grain", 0)
    assert memarea.coherency_mode(buf) == "fine_grain"
    # the other attributes are untouched
    memarea.advise(buf, "read_mostly")
    memarea.advise(buf, "coarse_grain", "cpu")
    assert memarea.range_attributes(buf)["read_mostly"] is True
    assert memarea.coherency_mode(buf.view("uint8", 4096, offset=8192)) == "coarse_grain"
    del buf


def test_coarse_grain_not_supported(need_managed, backend, no_leak):
    if coarse_grain_supported(backend):
        pytest.skip(f"{backend} has coarse grain (test_coarse_grain_round_trip)")
    buf = memarea.Area(0, "managed").alloc(4096)
    for advice in ("coarse_grain", "unset_coarse_grain"):
        with pytest.raises(memarea.Error, match="no coarse-grain advice") as e:
            memarea.advise(buf, advice)
        assert e.value.status == memarea.Status.NOT_SUPPORTED
    with pytest.raises(memarea.Error, match="no coherency-mode attribute") as e:
        memarea.coherency_mode(buf)
    assert e.value.status == memarea.Status.NOT_SUPPORTED
    # range_attributes does not ask for it, so it works everywhere
    assert memarea.range_attributes(buf)["read_mostly"] is False
    del buf


def test_coherency_of_host_memory(no_leak):
    """memarea's pageable host memory, on any backend: fine grain, and no coarse grain."""
    buf = memarea.Area(kind="host_numa").alloc(8192)
    assert memarea.coherency_mode(buf) == "fine_grain"
    with pytest.raises(memarea.Error, match="no coarse-grain mode") as e:
        memarea.advise(buf, "coarse_grain")
    assert e.value.status == memarea.Status.NOT_SUPPORTED
    assert memarea.ADVICE["coarse_grain"] == 100 and memarea.ADVICE["unset_coarse_grain"] == 101
    assert memarea.COHERENCY_MODES == ("fine_grain", "coarse_grain", "indeterminate")
    del buf


def test_attach_managed_buffers(need_managed, no_leak):
    buf = memarea.Area(0, "managed").alloc(4096 + 10)
    with memarea.Stream(0) as s:
        for flags in ("single", "host", "global"):
            memarea.attach_mem(buf, flags, s)
            memarea.attach_mem(buf, flags, s, nbytes=4096 + 10)
        s.synchronize()
    memarea.attach_mem(buf, "global")
    memarea.synchronize(0)
    with pytest.raises(memarea.Error) as e:  # part of an allocation
        memarea.attach_mem(buf, "global", nbytes=4096)
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(memarea.Error) as e:  # not its start
        memarea.attach_mem(buf.view("uint8", 10, offset=4096), "global")
    assert e.value.status == memarea.Status.INVALID_VALUE
    with pytest.raises(ValueError, match="flags"):
        memarea.attach_mem(buf, "everywhere")
    del buf


def test_attach_system_memory(need_device, ndev, no_leak):
    array = np.ones(3 * 4096 + 5, dtype=np.uint8)
    raw = bytearray(8192)
    pages = mmap.mmap(-1, 2 * 4096)
    view = memoryview(pages)
    try:
        for d in range(ndev):
            with memarea.Stream(d) as s:
                if not pageable(d):
                    for m in (array, raw, view):
                        with pytest.raises(memarea.Error, match="cannot access pageable") as e:
                            memarea.attach_mem(m, "single", s)
                        assert e.value.status == memarea.Status.NOT_SUPPORTED
                    continue
                for flags in ("single", "host", "global"):
                    memarea.attach_mem(array, flags, s)
                    memarea.attach_mem(raw, flags, s, nbytes=100)
                    memarea.attach_mem(view, flags, s)
                s.synchronize()
                with pytest.raises(ValueError, match="exceeds"):
                    memarea.attach_mem(raw, "global", s, nbytes=8193)
        # memory memarea knows that is not managed stays refused, whatever the device reads
        dev = memarea.Area(0).alloc(4096)
        host = memarea.Area(kind="host_numa").alloc(4096)
        for b in (dev, host):
            with pytest.raises(memarea.Error) as e:
                memarea.attach_mem(b, "global")
            assert e.value.status == memarea.Status.INVALID_VALUE
        del dev, host
    finally:
        view.release()
        pages.close()
