"""Memory caps per device and out-of-memory handlers (docs/usage.md, "Limits and out-of-memory
handlers")."""

from __future__ import annotations

import ctypes
import sys
import threading
import types

from ._lib import check, lib


class OomInfo(ctypes.Structure):
    """memarea_oom_info: what a handler is told."""
    _fields_ = [("device", ctypes.c_int), ("bytes", ctypes.c_size_t), ("reason", ctypes.c_int),
                ("limit", ctypes.c_size_t), ("reserved", ctypes.c_size_t)]


_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(OomInfo), ctypes.c_void_p)
_REASONS = {0: "limit", 1: "driver"}

lib.memarea_set_memory_limit.restype = ctypes.c_int
lib.memarea_set_memory_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
lib.memarea_get_memory_limit.restype = ctypes.c_int
lib.memarea_get_memory_limit.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
lib.memarea_add_oom_handler.restype = ctypes.c_int
lib.memarea_add_oom_handler.argtypes = [_HANDLER, ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_ulonglong)]
lib.memarea_remove_oom_handler.restype = ctypes.c_int
lib.memarea_remove_oom_handler.argtypes = [ctypes.c_ulonglong]

# The ctypes callbacks of added handlers, kept alive until removed.
_callbacks: dict[int, object] = {}
_callbacks_lock = threading.Lock()


def _device(device) -> int:
    if isinstance(device, bool) or not hasattr(device, "__index__"):
        raise TypeError(f"device must be an int, not {type(device).__name__}")
    return device.__index__()


def _report(e: BaseException, handler) -> None:
    """Hands e to sys.unraisablehook. The interpreter's own hook takes only the argument type
    it makes, which Python code cannot: that hook gets an exception raised from a __del__,
    which it reports with e."""
    args = types.SimpleNamespace(exc_type=type(e), exc_value=e, exc_traceback=e.__traceback__,
                                 err_msg="Exception ignored in memarea out-of-memory handler",
                                 object=handler)
    if sys.unraisablehook is not sys.__unraisablehook__:
        try:
            sys.unraisablehook(args)
            return
        except Exception:  # noqa: BLE001 - a hook that needs the real type: the default path
            pass

    class _Reporter:
        def __del__(self):
            raise e

    r = _Reporter()
    del r


def set_memory_limit(device: int, nbytes: int) -> None:
    """Caps what this process reserves on device (-1: the current device) at nbytes; 0 removes
    the cap. Error INVALID_DEVICE for any other device."""
    check(lib.memarea_set_memory_limit(_device(device), nbytes))


def memory_limit(device: int) -> int:
    """The cap of device (0: none); device as set_memory_limit."""
    out = ctypes.c_size_t()
    check(lib.memarea_get_memory_limit(_device(device), ctypes.byref(out)))
    return out.value


def add_oom_handler(handler) -> int:
    """Adds handler(info: dict) -> bool, called when an allocation was refused and the device's
    pools gave back what they cache; True asks for one retry. An exception it raises goes to
    sys.unraisablehook and counts as no retry. Returns the id for remove_oom_handler."""
    if not callable(handler):
        raise TypeError("handler must be callable")

    def call(info, _user):
        i = info.contents
        d = {"device": i.device, "bytes": i.bytes, "reason": _REASONS.get(i.reason, i.reason),
             "limit": i.limit, "reserved": i.reserved}
        try:
            return 1 if handler(d) else 0
        except BaseException as e:  # noqa: BLE001 - a C caller cannot take an exception
            _report(e, handler)
            return 0

    cb = _HANDLER(call)
    hid = ctypes.c_ulonglong()
    with _callbacks_lock:
        check(lib.memarea_add_oom_handler(cb, None, ctypes.byref(hid)))
        _callbacks[hid.value] = cb
    return hid.value


def remove_oom_handler(handler_id: int) -> None:
    """Removes a handler; Error INVALID_VALUE for an id that names none."""
    with _callbacks_lock:
        check(lib.memarea_remove_oom_handler(handler_id))
        _callbacks.pop(handler_id, None)
