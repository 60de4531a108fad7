"""memarea: place, share and move memory across GPUs, the host and processes, from Python.

Python over libmemarea's C API (ctypes), with a compiled extension (memarea._native, CPython
3.11+) for the allocation hot path and the buffer protocol where it was built;
``memarea.implementation`` says which serves ("compiled" or "ctypes"). It finds libmemarea.so
through $MEMAREA_LIBRARY, then next to the package, then where `cmake --install` put it, then
this checkout's build tree, then the system loader's path. Every call releases the GIL while
the library runs, so blocking calls -- synchronous copies, synchronize, IPC opens, topo() --
let other threads run.

    import memarea, numpy as np
    area = memarea.Area(device=0)                 # device memory on device 0
    with area.alloc(1 << 20) as buf:              # a Buffer, freed at the end of the block
        host = np.random.default_rng().integers(0, 256, 1 << 20, dtype=np.uint8)
        memarea.copy(buf, host)                   # any array in, any array out
        t = torch.from_dlpack(buf.view("float32"))  # zero-copy, on CUDA

Errors raise memarea.Error (``.status``, ``.message``); bad Python arguments raise TypeError or
ValueError before any call. See docs/python.md.
"""

from ._lib import Error, Status, library_path
from ._ext import implementation
from ._interop import DType, dtype, live_exports
from ._core import (ADVICE, ATTACH_FLAGS, COHERENCY_MODES, CPU_DEVICE_ID, KINDS, AllocationInfo,
                    Area, Buffer, Pool, Stream, View, advise, attach_mem, backend,
                    can_access_peer, coherency_mode, copy, copy_2d, copy_2d_async,
                    copy_async, device_count, device_properties, disable_peer_access,
                    dlpack_device, enable_peer_access, get_device, info, lookup, memset,
                    memset_async, peer_access, prefetch, range_attributes, set_device,
                    synchronize, topo)
from ._stream import Event, ExternalStream, record_stream
from ._device import device_reset
from ._usage import memory_usage, ps, reset_usage_peaks, set_tracking, snapshot, tracking
from ._context import Context
# Limits and out-of-memory handlers (docs/usage.md).
from ._limits import add_oom_handler, memory_limit, remove_oom_handler, set_memory_limit
from . import ipc

__version__ = "0.1.0"

__all__ = [
    "ADVICE", "ATTACH_FLAGS", "COHERENCY_MODES", "CPU_DEVICE_ID", "KINDS", "AllocationInfo",
    "Area", "Buffer", "DType", "Error", "Event", "ExternalStream", "Pool", "Status", "Stream",
    "View", "advise", "attach_mem", "backend", "can_access_peer", "coherency_mode", "copy",
    "copy_2d", "copy_2d_async", "copy_async", "device_count", "device_properties",
    "device_reset", "disable_peer_access", "dlpack_device", "dtype", "enable_peer_access",
    "get_device", "implementation", "info", "ipc", "library_path", "live_exports", "lookup",
    "memory_usage", "memset", "memset_async", "peer_access", "prefetch", "ps",
    "range_attributes", "record_stream", "reset_usage_peaks", "set_device", "synchronize",
    "topo",
    # Limits and out-of-memory handlers.
    "add_oom_handler", "memory_limit", "remove_oom_handler", "set_memory_limit",
    # Tracking and snapshots.
    "set_tracking", "snapshot", "tracking",
    # Contexts the user makes.
    "Context",
]
