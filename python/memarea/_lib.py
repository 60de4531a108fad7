"""Loading libmemarea.so, the C API's prototypes, and errors as exceptions.

The package is Python over the C API (include/memarea/memarea.h, report.h, torch.h) through
ctypes, which serves every Python 3 with nothing compiled; the compiled extension (memarea/_ext.py) takes the
hot path where it was built, and binds to the library loaded here. ctypes.CDLL releases the GIL around every foreign call, so a blocking memarea call
(a synchronous copy, a stream or device synchronize, an IPC open, a topology measurement) lets
other Python threads run.
"""

from __future__ import annotations

import ctypes
import enum
import glob
import os

__all__ = ["Error", "Status", "library_path"]

# --- finding the library ----------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAMES = ("libmemarea.so.0", "libmemarea.so")


def _build_tree_candidates() -> list[str]:
    """libmemarea.so in this checkout's build trees: build/default first, then the others,
    newest first. Sanitizer builds are skipped: their library cannot be loaded into a Python
    that was not started under the sanitizer runtime."""
    root = os.path.dirname(os.path.dirname(_HERE))  # python/memarea -> the repository root
    build = os.path.join(root, "build")
    if not os.path.isdir(build):
        return []
    found = []
    for lib in glob.glob(os.path.join(build, "*", "src", "libmemarea.so")):
        tree = os.path.basename(os.path.dirname(os.path.dirname(lib)))
        if "asan" in tree or "tsan" in tree or "fuzz" in tree:
            continue
        found.append(lib)
    default = os.path.join(build, "default", "src", "libmemarea.so")
    found.sort(key=lambda p: (p != default, -os.path.getmtime(p)))
    return found


def _installed_candidates() -> list[str]:
    """Where `cmake --install` put the library relative to where it put this package
    (_install.py is written by python/CMakeLists.txt at install time only)."""
    try:
        from . import _install  # type: ignore[attr-defined]
    except ImportError:
        return []
    libdir = os.path.normpath(os.path.join(_HERE, _install.LIBDIR_FROM_PACKAGE))
    return [os.path.join(libdir, n) for n in _NAMES]


def _load() -> tuple[ctypes.CDLL, str]:
    env = os.environ.get("MEMAREA_LIBRARY")
    if env:
        # An explicit choice is never second-guessed: failing to load it is an error, not a
        # reason to pick up some other libmemarea.
        try:
            return ctypes.CDLL(env), env
        except OSError as e:
            raise ImportError(f"memarea: MEMAREA_LIBRARY={env} cannot be loaded: {e}") from e
    tried = []
    for path in ([os.path.join(_HERE, n) for n in _NAMES] + _installed_candidates() +
                 _build_tree_candidates()):
        if os.path.exists(path):
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                tried.append(f"{path}: {e}")
    for name in _NAMES:  # the system loader's path (ldconfig, LD_LIBRARY_PATH)
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            tried.append(f"{name}: {e}")
    raise ImportError("memarea: libmemarea.so not found. Set MEMAREA_LIBRARY to its path, "
                      "build the repository (scripts/setup.sh), or install it. Tried:\n  " +
                      "\n  ".join(tried))


lib, library_path = _load()
"""The loaded libmemarea (ctypes.CDLL) and the path it was loaded from."""

# --- prototypes ---------------------------------------------------------------------------------

c_int_p = ctypes.POINTER(ctypes.c_int)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class DeviceProperties(ctypes.Structure):
    """memarea_device_properties."""
    _fields_ = [("name", ctypes.c_char * 256), ("backend", ctypes.c_char * 16),
                ("ordinal", ctypes.c_int), ("pci_bus_id", ctypes.c_char * 32),
                ("total_memory", ctypes.c_size_t), ("free_memory", ctypes.c_size_t),
                ("unified_addressing", ctypes.c_int), ("managed_memory", ctypes.c_int),
                ("concurrent_managed_access", ctypes.c_int),
                ("pageable_memory_access", ctypes.c_int), ("can_map_host_memory", ctypes.c_int),
                ("virtual_memory_management", ctypes.c_int), ("ipc", ctypes.c_int),
                ("compute_major", ctypes.c_int), ("compute_minor", ctypes.c_int)]


class AllocationInfoC(ctypes.Structure):
    """memarea_allocation_info."""
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_size_t), ("kind", ctypes.c_int),
                ("device", ctypes.c_int), ("capacity", ctypes.c_size_t)]


class PoolOptions(ctypes.Structure):
    """memarea_pool_options."""
    _fields_ = [("initial_size", ctypes.c_size_t), ("maximum_size", ctypes.c_size_t),
                ("release_threshold", ctypes.c_size_t), ("alignment", ctypes.c_size_t),
                ("host_node", ctypes.c_int), ("flags", ctypes.c_uint)]


class PoolStats(ctypes.Structure):
    """memarea_pool_stats."""
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "bytes_reserved", "bytes_in_use", "peak_bytes_reserved", "peak_bytes_in_use",
        "driver_allocations", "largest_free_block", "live_allocations")]


class TorchStats(ctypes.Structure):
    """memarea_torch_stats (memarea/torch.h)."""
    _fields_ = [(n, ctypes.c_size_t) for n in ("live_pieces", "live_bytes", "refused_frees")]


class MemoryUsage(ctypes.Structure):
    """memarea_memory_usage_t (docs/usage.md)."""
    _fields_ = [("size", ctypes.c_size_t), ("device", ctypes.c_int)] + [
        (n, ctypes.c_size_t) for n in (
            "live", "cached", "reserved", "exported", "imported", "peak_live", "peak_cached",
            "peak_reserved", "peak_exported", "peak_imported")]


class IpcHandle(ctypes.Structure):
    """memarea_ipc_handle_t: 128 plain bytes, passed by value."""
    _fields_ = [("bytes", ctypes.c_ubyte * 128)]


IPC_HANDLE_SIZE = 128

_I, _U, _Z, _P = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p
_PROTOTYPES = {
    "memarea_status_name": (ctypes.c_char_p, [_I]),
    "memarea_last_error_message": (ctypes.c_char_p, []),
    "memarea_get_device_count": (_I, [c_int_p]),
    "memarea_set_device": (_I, [_I]),
    "memarea_get_device": (_I, [c_int_p]),
    "memarea_backend_name": (_I, [c_char_pp]),
    "memarea_get_device_properties": (_I, [ctypes.POINTER(DeviceProperties), _I]),
    "memarea_stream_create": (_I, [c_void_pp]),
    "memarea_stream_destroy": (_I, [_P]),
    "memarea_stream_synchronize": (_I, [_P]),
    "memarea_device_synchronize": (_I, []),
    "memarea_area_create": (_I, [c_void_pp, _I, _U]),
    "memarea_area_destroy": (_I, [_P]),
    "memarea_area_mmap": (_I, [_P, c_void_pp, _Z, _P]),
    "memarea_area_munmap": (_I, [_P, _P, _Z]),
    "memarea_host_get_device_pointer": (_I, [c_void_pp, _P]),
    "memarea_memcpy": (_I, [_P, _P, _Z]),
    "memarea_memcpy_async": (_I, [_P, _P, _Z, _P]),
    "memarea_memset": (_I, [_P, _U, _Z, _Z]),
    "memarea_memset_async": (_I, [_P, _U, _Z, _Z, _P]),
    "memarea_memcpy_2d": (_I, [_P, _Z, _P, _Z, _Z, _Z]),
    "memarea_memcpy_2d_async": (_I, [_P, _Z, _P, _Z, _Z, _Z, _P]),
    "memarea_pointer_get_info": (_I, [ctypes.POINTER(AllocationInfoC), _P]),
    "memarea_pool_create": (_I, [c_void_pp, _P, ctypes.POINTER(PoolOptions)]),
    "memarea_pool_destroy": (_I, [_P]),
    "memarea_pool_alloc": (_I, [_P, c_void_pp, _Z, _P]),
    "memarea_pool_free": (_I, [_P, _P, _P]),
    "memarea_pool_trim": (_I, [_P, _Z]),
    "memarea_pool_get_stats": (_I, [_P, ctypes.POINTER(PoolStats)]),
    "memarea_device_can_access_peer": (_I, [c_int_p, _I, _I]),
    "memarea_device_enable_peer_access": (_I, [_I, _U]),
    "memarea_device_disable_peer_access": (_I, [_I]),
    "memarea_free": (_I, [_P]),
    "memarea_mem_prefetch_async": (_I, [_P, _Z, _I, _P]),
    "memarea_mem_prefetch_host_numa_async": (_I, [_P, _Z, _I, _P]),
    "memarea_mem_advise": (_I, [_P, _Z, _I, _I]),
    "memarea_mem_advise_host_numa": (_I, [_P, _Z, _I, _I]),
    "memarea_mem_range_get_attribute": (_I, [_P, _Z, _I, _P, _Z]),
    "memarea_stream_attach_mem_async": (_I, [_P, _P, _Z, _U]),
    "memarea_host_malloc": (_I, [c_void_pp, _Z, _I]),
    "memarea_ipc_get_mem_handle": (_I, [ctypes.POINTER(IpcHandle), _P]),
    "memarea_ipc_open_mem_handle": (_I, [c_void_pp, IpcHandle, _U]),
    "memarea_ipc_close_mem_handle": (_I, [_P]),
    "memarea_ipc_remove_stale_objects": (_I, [c_size_p]),
    "memarea_info_json": (_I, [c_char_pp]),
    "memarea_topo_json": (_I, [c_char_pp, _Z, _I]),
    "memarea_ps_json": (_I, [c_char_pp, c_int_p]),
    "memarea_set_tracking": (_I, [_I]),
    "memarea_tracking": (_I, [c_int_p]),
    "memarea_snapshot_json": (_I, [c_char_pp, _I]),
    "memarea_memory_usage": (_I, [_I, ctypes.POINTER(MemoryUsage)]),
    "memarea_memory_usage_reset_peaks": (_I, [_I]),
    "memarea_string_free": (None, [ctypes.c_void_p]),
    "memarea_stream_wrap": (_I, [c_void_pp, _P, _I]),
    "memarea_stream_forget": (_I, [_P]),
    "memarea_stream_query": (_I, [_P]),
    "memarea_stream_get_native": (_I, [c_void_pp, _P]),
    "memarea_stream_wait_event": (_I, [_P, _P]),
    "memarea_context_create": (_I, [c_void_pp, _U, _I]),
    "memarea_context_destroy": (_I, [_P]),
    "memarea_context_wrap": (_I, [c_void_pp, _P]),
    "memarea_context_set_current": (_I, [_P]),
    "memarea_context_get_current": (_I, [c_void_pp]),
    "memarea_context_push": (_I, [_P]),
    "memarea_context_pop": (_I, [c_void_pp]),
    "memarea_context_synchronize": (_I, [_P]),
    "memarea_context_get_device": (_I, [c_int_p, _P]),
    "memarea_context_get_flags": (_I, [ctypes.POINTER(ctypes.c_uint), _P]),
    "memarea_context_enable_peer_access": (_I, [_P, _U]),
    "memarea_context_disable_peer_access": (_I, [_P]),
    "memarea_event_create": (_I, [c_void_pp, _U]),
    "memarea_event_destroy": (_I, [_P]),
    "memarea_event_record": (_I, [_P, _P]),
    "memarea_event_query": (_I, [_P]),
    "memarea_event_synchronize": (_I, [_P]),
    "memarea_event_elapsed": (_I, [ctypes.POINTER(ctypes.c_float), _P, _P]),
    "memarea_pool_record_stream": (_I, [_P, _P, _P]),
    "memarea_torch_malloc": (_P, [ctypes.c_ssize_t, _I, _P]),
    "memarea_torch_free": (None, [_P, ctypes.c_ssize_t, _I, _P]),
    "memarea_torch_set_pool": (_I, [_I, _P]),
    "memarea_torch_get_pool": (_I, [c_void_pp, _I]),
    "memarea_torch_get_stats": (_I, [ctypes.POINTER(TorchStats), _P]),
}


class _Functions:
    """The C API's functions as attributes, each with its prototype set (so ctypes converts
    and checks arguments instead of guessing int)."""


fn = _Functions()
for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError as _e:
        raise ImportError(f"memarea: {library_path} lacks {_name}: it is older than this "
                          "package; rebuild it from the same checkout") from _e
    _f.restype = _res
    _f.argtypes = _args
    setattr(fn, _name[len("memarea_"):], _f)

# --- errors -------------------------------------------------------------------------------------


class Status(enum.IntEnum):
    """memarea_status: the status of every C call (values are the C API's, and stable)."""
    SUCCESS = 0
    INVALID_VALUE = 1
    INVALID_DEVICE = 2
    OUT_OF_MEMORY = 3
    NOT_SUPPORTED = 4
    NO_DEVICE = 5
    NOT_FOUND = 6
    BUSY = 7
    PEER_ACCESS_UNSUPPORTED = 8
    PEER_ACCESS_ALREADY_ENABLED = 9
    PEER_ACCESS_NOT_ENABLED = 10
    TOO_MANY_PEERS = 11
    INVALID_HANDLE = 12
    INVALID_CONTEXT = 13
    NOT_PERMITTED = 14
    INITIALIZATION = 15
    UNKNOWN = 16


class Error(Exception):
    """A memarea call failed. ``status`` is the :class:`Status`, ``message`` the library's
    message (naming the driver's own error where one caused it). The call changed nothing."""

    def __init__(self, status: int, message: str):
        try:
            status = Status(status)
        except ValueError:
            status = Status.UNKNOWN
        self.status = status
        self.message = message
        super().__init__(status, message)

    def __str__(self) -> str:
        return f"{self.message} [MEMAREA_ERROR_{self.status.name}]"

    def __reduce__(self):  # raised in a worker process, re-raised in the parent
        return (Error, (int(self.status), self.message))


def raise_status(status: int) -> None:
    """Raises the Error of a failed call, with the calling thread's message (the C API keeps
    it per thread, and ctypes calls run on the calling thread)."""
    msg = fn.last_error_message()
    raise Error(status, msg.decode("utf-8", "replace") if msg else "")


def check(status: int) -> None:
    """Raises unless status is MEMAREA_SUCCESS."""
    if status:
        raise_status(status)
