"""Device reset: BUSY naming what memarea holds on the device, success once it holds nothing,
and the device working again afterwards (buffers, pools, peer access, streams)."""

import gc

import pytest

import memarea
from conftest import random_bytes


def reset_ok(device=None):
    gc.collect()  # buffers of earlier statements that only the collector frees
    memarea.device_reset(device)


def round_trip(device, n=(1 << 20) + 3):
    data = random_bytes(n)
    with memarea.Area(device).alloc(n) as buf:
        memarea.copy(buf, data)
        assert buf.tobytes() == data.tobytes()


def test_bad_device_ids(backend, ndev):
    with pytest.raises(TypeError):
        memarea.device_reset("0")
    with pytest.raises(TypeError):
        memarea.device_reset(True)
    for bad in (-2, -1000):
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset(bad)
        assert e.value.status == memarea.Status.INVALID_DEVICE
    with pytest.raises(memarea.Error) as e:
        memarea.device_reset(ndev)
    assert e.value.status == (memarea.Status.INVALID_DEVICE if ndev else memarea.Status.NO_DEVICE)
    if ndev == 0:
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset()
        assert e.value.status == memarea.Status.NO_DEVICE


def test_busy_names_what_is_live_and_the_device_works_after(need_device, no_leak):
    reset_ok(0)
    buf = memarea.Area(0).alloc(4096 + 7)
    pinned = memarea.Area(0, "host").alloc(100)
    with pytest.raises(memarea.Error) as e:
        memarea.device_reset(0)
    assert e.value.status == memarea.Status.BUSY
    assert hex(buf.ptr) in e.value.message and "4103 bytes" in e.value.message
    assert hex(pinned.ptr) in e.value.message and "host_pinned" in e.value.message
    buf.free()
    pinned.free()
    reset_ok(0)
    reset_ok()  # the current device
    round_trip(0)


def test_pools_give_their_blocks_back_and_stay_usable(need_device, no_leak):
    with memarea.Pool(memarea.Area(0)) as pool:
        piece = pool.alloc(1000)
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset(0)
        assert e.value.status == memarea.Status.BUSY and hex(piece.ptr) in e.value.message
        piece.free()
        assert pool.stats()["bytes_reserved"] > 0
        reset_ok(0)
        assert pool.stats()["bytes_reserved"] == 0
        data = random_bytes(1 << 20)
        with pool.alloc(1 << 20) as again:
            memarea.copy(again, data)
            assert again.tobytes() == data.tobytes()


def test_live_streams_are_busy(need_device, no_leak):
    with memarea.Stream(0):
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset(0)
        assert e.value.status == memarea.Status.BUSY and "1 stream" in e.value.message
    reset_ok(0)
    with memarea.Stream(0) as s:
        s.synchronize()


def test_peer_access_can_be_enabled_again(need_two, no_leak):
    if not memarea.can_access_peer(0, 1):
        pytest.skip("device 0 cannot reach device 1")
    try:
        memarea.enable_peer_access(0, 1)
    except memarea.Error as e:
        assert e.status == memarea.Status.PEER_ACCESS_ALREADY_ENABLED
    reset_ok(0)
    with pytest.raises(memarea.Error) as e:
        memarea.disable_peer_access(0, 1)
    assert e.value.status == memarea.Status.PEER_ACCESS_NOT_ENABLED
    memarea.enable_peer_access(0, 1)
    with pytest.raises(memarea.Error) as e:
        memarea.enable_peer_access(0, 1)
    assert e.value.status == memarea.Status.PEER_ACCESS_ALREADY_ENABLED
    memarea.disable_peer_access(0, 1)
    with memarea.peer_access(0, 1):
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset(1)
        assert e.value.status == memarea.Status.BUSY and "peer_access scope" in e.value.message
        with pytest.raises(memarea.Error) as e:
            memarea.device_reset(0)
        assert e.value.status == memarea.Status.BUSY
    reset_ok(1)
