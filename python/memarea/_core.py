"""Devices, streams, areas, pools, buffers and their zero-copy views, copies, lookup.

The package's core, in one module per concern: _device (backend, devices, streams), _buffer
(buffers and views), _area (areas and pools), _ops (copies, managed memory, peer access), _fill
(memset and 2D copies). This module gathers their names (all but _device's cache of the
backend's name, which only _device._backend may read), so that `from ._core import ...` keeps
working.
"""

from __future__ import annotations

from ._device import (CPU_DEVICE_ID, Stream, _OnDevice, _backend, _int, _json_call, _size,
                      _stream_handle, backend, device_count, device_properties, get_device, info,
                      set_device, synchronize, topo)
from ._buffer import (AllocationInfo, Buffer, View, _Array, _HOST_KINDS, _KIND_NAMES, dlpack_device,
                      lookup)
from ._area import Area, KINDS, Pool, _AREA_FLAGS, _GLOBAL
from ._fill import copy_2d, copy_2d_async, memset, memset_async
from ._ops import (ADVICE, ATTACH_FLAGS, COHERENCY_MODES, _device_of, _endpoint, _location,
                   _prepare, _range, _scopes, _scopes_lock, advise, attach_mem, can_access_peer,
                   coherency_mode, copy, copy_async, disable_peer_access, enable_peer_access,
                   peer_access, prefetch, range_attributes)
