"""Managed memory (prefetch, advise, range attributes) and peer access."""

import numpy as np
import pytest

import memarea
from conftest import random_bytes


def test_prefetch_advise_attributes(need_managed, ndev, no_leak):
    buf = memarea.Area(0, "managed").alloc(1 << 20)
    data = random_bytes(1 << 20)
    np.asarray(buf)[:] = data  # written by the host
    attrs = buf.range_attributes()
    assert set(attrs) == {"read_mostly", "preferred_location", "accessed_by",
                          "last_prefetch_location"}
    assert attrs["read_mostly"] is False
    target = ndev - 1
    with memarea.Stream(target) as s:
        buf.prefetch(target, stream=s)
        s.synchronize()
    assert buf.range_attributes()["last_prefetch_location"] == target
    buf.advise("read_mostly")
    assert buf.range_attributes()["read_mostly"] is True
    buf.advise("unset_read_mostly")
    assert buf.range_attributes()["read_mostly"] is False
    buf.advise("preferred_location", 0)
    assert buf.range_attributes()["preferred_location"] == 0
    buf.advise("accessed_by", target)
    assert target in buf.range_attributes()["accessed_by"]
    buf.advise("unset_accessed_by", target)
    assert target not in buf.range_attributes()["accessed_by"]
    memarea.prefetch(buf, "cpu")
    memarea.synchronize(0)
    assert buf.range_attributes()["last_prefetch_location"] == memarea.CPU_DEVICE_ID
    # prefetching moves nothing the program can see: the bytes are the same
    assert np.array_equal(np.asarray(buf), data)
    # part of the buffer, through a view
    memarea.prefetch(buf.view("uint8", 4096, offset=4096), 0)
    memarea.synchronize(0)
    del buf


def test_managed_bad_input(need_managed, no_leak):
    buf = memarea.Area(0, "managed").alloc(4096)
    with pytest.raises(ValueError, match="exactly one"):
        buf.prefetch()
    with pytest.raises(ValueError, match="exactly one"):
        buf.prefetch(0, numa_node=0)
    with pytest.raises(ValueError, match="advice"):
        buf.advise("fast")
    with pytest.raises(ValueError, match="runs past"):
        memarea.prefetch(buf, 0, offset=4000, nbytes=200)
    with pytest.raises(memarea.Error) as e:
        buf.prefetch(99)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(TypeError):
        memarea.prefetch(np.zeros(4), 0)
    with pytest.raises(memarea.Error):  # device memory takes no prefetch
        memarea.Area(0).alloc(4096).prefetch(0)
    del buf


def test_host_numa_prefetch(no_leak):
    buf = memarea.Area(kind="host_numa").alloc(1 << 16)
    np.asarray(buf)[:] = random_bytes(1 << 16)
    node = memarea.info()["host"]["numa_nodes"][0]["id"]
    buf.prefetch(numa_node=node)
    buf.advise("preferred_location", numa_node=node)
    buf.range_attributes()
    with pytest.raises(memarea.Error) as e:
        buf.prefetch(numa_node=4096)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    del buf


def test_peer_access(need_two, no_leak):
    assert memarea.can_access_peer(0, 0) is False
    if not memarea.can_access_peer(0, 1):
        pytest.skip("device 0 cannot reach device 1")
    # Start from access off: an earlier test may have left it on (then the first
    # enable below would answer PEER_ACCESS_ALREADY_ENABLED).
    try:
        memarea.disable_peer_access(0, 1)
    except memarea.Error as e:
        assert e.status == memarea.Status.PEER_ACCESS_NOT_ENABLED
    memarea.enable_peer_access(0, 1)
    try:
        with pytest.raises(memarea.Error) as e:
            memarea.enable_peer_access(0, 1)
        assert e.value.status == memarea.Status.PEER_ACCESS_ALREADY_ENABLED
    finally:
        memarea.disable_peer_access(0, 1)
    with pytest.raises(memarea.Error) as e:
        memarea.disable_peer_access(0, 1)
    assert e.value.status == memarea.Status.PEER_ACCESS_NOT_ENABLED
    before = memarea.get_device()
    # Scopes nest: the last one out disables.
    with memarea.peer_access(0, 1):
        with memarea.peer_access(0, 1):
            assert memarea.peer_access.count(0, 1) == 2
        assert memarea.peer_access.count(0, 1) == 1
        with pytest.raises(memarea.Error):
            memarea.enable_peer_access(0, 1)  # still enabled
        a, b = memarea.Area(0).alloc(1 << 16), memarea.Area(1).alloc(1 << 16)
        data = random_bytes(1 << 16)
        memarea.copy(b, data)
        memarea.copy(a, b)
        assert a.tobytes() == data.tobytes()
        del a, b
    assert memarea.peer_access.count(0, 1) == 0
    memarea.enable_peer_access(0, 1)  # disabled again: enabling works
    # A scope over access someone else enabled leaves it enabled.
    with memarea.peer_access(0, 1):
        pass
    with pytest.raises(memarea.Error):
        memarea.enable_peer_access(0, 1)
    memarea.disable_peer_access(0, 1)
    assert memarea.get_device() == before


def test_peer_bad_input(need_device):
    with pytest.raises(memarea.Error) as e:
        memarea.can_access_peer(0, 99)
    assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(TypeError):
        memarea.peer_access(0, "1")
    with pytest.raises(memarea.Error):
        with memarea.peer_access(0, 0):
            pass
    assert memarea.peer_access.count(0, 0) == 0
