"""Memory usage per device and `memarea ps` (docs/usage.md)."""

from __future__ import annotations

import ctypes
import json

from ._lib import MemoryUsage, check, fn

_FIGURES = ("live", "cached", "reserved", "exported", "imported", "peak_live", "peak_cached",
            "peak_reserved", "peak_exported", "peak_imported")


def _device(device) -> int:
    if isinstance(device, bool) or not hasattr(device, "__index__"):
        raise TypeError(f"device must be an int, not {type(device).__name__}")
    return device.__index__()


def memory_usage(device: int) -> dict:
    """This process's figures of device (an ordinal, or CPU_DEVICE_ID (-1) for the host; here
    -1 is the host, not the current device), in bytes: live, cached, reserved, exported,
    imported and the peak of each (docs/usage.md). Error INVALID_DEVICE for any other device."""
    u = MemoryUsage()
    u.size = ctypes.sizeof(MemoryUsage)
    check(fn.memory_usage(_device(device), ctypes.byref(u)))
    return {"device": u.device, **{n: getattr(u, n) for n in _FIGURES}}


def reset_usage_peaks(device: int) -> None:
    """Sets device's peaks to its figures now (device as memory_usage)."""
    check(fn.memory_usage_reset_peaks(_device(device)))


def ps(device: int | None = None) -> dict:
    """What `memarea ps --json` prints: the live processes using memarea (this user's; every
    user's for root), each one's figures per device, its exports and who has them open, and
    what it imported from whom. device: that device only (-1: the host)."""
    s = ctypes.c_char_p()
    d = None if device is None else ctypes.byref(ctypes.c_int(_device(device)))
    check(fn.ps_json(ctypes.byref(s), d))
    try:
        return json.loads(s.value.decode())
    finally:
        fn.string_free(s)


def set_tracking(on: bool) -> None:
    """Turns allocation tracking on or off (docs/usage.md "Tracking"): while on, every
    allocation memarea makes keeps a record (size, kind, device, pool, stream, age, thread and
    stack) until it is freed; off drops every record. MEMAREA_TRACK=1 turns it on at load."""
    if not isinstance(on, bool):
        raise TypeError(f"on must be a bool, not {type(on).__name__}")
    check(fn.set_tracking(1 if on else 0))


def tracking() -> bool:
    """Whether allocation tracking is on."""
    v = ctypes.c_int(0)
    check(fn.tracking(ctypes.byref(v)))
    return bool(v.value)


def snapshot(device: int | None = None) -> dict:
    """What `memarea snapshot --json` prints (docs/usage.md "Snapshots"): per device the blocks
    memarea holds, the tracked pieces of pool blocks, the largest users and the usage figures.
    device None: every device and the host; an ordinal: that device alone."""
    s = ctypes.c_char_p()
    check(fn.snapshot_json(ctypes.byref(s), -1 if device is None else _device(device)))
    try:
        return json.loads(s.value.decode())
    finally:
        fn.string_free(s)
