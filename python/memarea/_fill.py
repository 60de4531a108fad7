"""memset of 1-, 2- and 4-byte elements and pitched 2D copies (memarea._core re-exports them)."""

from __future__ import annotations

from ._device import Stream, _int, _size, synchronize
from ._lib import check, fn
from ._ops import _endpoint

_WIDTHS = (1, 2, 4)


def _settle(*ends):
    """Waits, as copy() does, for work that may still write the ends: memarea Buffers' pending
    streams, and the device of foreign GPU arrays (their producer's streams are not memarea's)."""
    waited = set()
    for e in ends:
        if e.buffer is not None:
            e.buffer._sync_pending()
        elif e.gpu_device is not None and e.gpu_device not in waited:
            synchronize(e.gpu_device)
            waited.add(e.gpu_device)


def _memset_args(dst, value, count, element_size):
    width = _int(element_size, "element_size")
    if width not in _WIDTHS:
        raise ValueError(f"element_size must be 1, 2 or 4, not {width}")
    value = _int(value, "value")
    if not 0 <= value < 1 << (8 * width):
        raise ValueError(f"value {value:#x} does not fit in a {width}-byte element")
    d = _endpoint(dst, True)
    if count is None:
        if d.nbytes % width:
            raise ValueError(f"the destination's {d.nbytes} bytes are not whole {width}-byte "
                             "elements: pass count")
        n = d.nbytes // width
    else:
        n = _size(count, "count", allow_zero=True)
        if n * width > d.nbytes:
            raise ValueError(f"{n} elements of {width} bytes exceed the destination "
                             f"({d.nbytes} bytes)")
    _settle(d)
    return d, n, width


def memset(dst, value: int, count: int | None = None, element_size: int = 1) -> None:
    """Sets `count` elements of `element_size` bytes (1, 2 or 4) at the start of dst to `value`
    and returns when done (the GIL is released meanwhile). dst is any object copy() writes to
    (a memarea Buffer or View, or a C-contiguous array of any device or the host); count None
    covers the whole of it. value must fit in one element (0xA5, 0xA5C3, 0xDEADBEEF)."""
    d, n, width = _memset_args(dst, value, count, element_size)
    if n:
        check(fn.memset(d.ptr, value, n, width))
    del d  # releases the pin only now


def memset_async(dst, value: int, stream: Stream, count: int | None = None,
                 element_size: int = 1) -> None:
    """Queues memset() on a memarea Stream and returns. dst stays referenced by the stream
    until stream.synchronize() or close(), as for copy_async. Plain host memory (NumPy arrays,
    bytearrays) is filled by the calling thread once the stream's earlier work is done."""
    if not isinstance(stream, Stream):
        from ._stream import required_stream  # a foreign one (an int, torch's, cupy's)
        stream = required_stream(stream)
    stream._check()
    d, n, width = _memset_args(dst, value, count, element_size)
    if n:
        check(fn.memset_async(d.ptr, value, n, width, stream._handle))
    stream._keep.append((d,))
    if d.buffer is not None:
        d.buffer._add_pending(stream)


def _copy_2d_args(dst, dst_pitch, src, src_pitch, width, height):
    sizes = [_size(v, what, allow_zero=True) for v, what in (
        (dst_pitch, "dst_pitch"), (src_pitch, "src_pitch"), (width, "width"), (height, "height"))]
    dp, sp, w, h = sizes
    d = _endpoint(dst, True)
    s = _endpoint(src, False)
    if w and h:
        for e, pitch, role in ((d, dp, "destination"), (s, sp, "source")):
            if pitch < w:
                raise ValueError(f"{role} pitch {pitch} is less than the width {w}")
            need = (h - 1) * pitch + w
            if need > e.nbytes:
                raise ValueError(f"{h} rows of pitch {pitch} and width {w} need {need} bytes; "
                                 f"the {role} has {e.nbytes}")
    _settle(d, s)
    return d, s, dp, sp, w, h


def copy_2d(dst, dst_pitch: int, src, src_pitch: int, width: int, height: int) -> None:
    """Copies `height` rows of `width` bytes, row i from byte i * src_pitch of src to byte
    i * dst_pitch of dst, and returns when done. dst and src are any objects copy() takes; each
    must hold (height - 1) * pitch + width bytes. The bytes between rows stay as they were."""
    d, s, dp, sp, w, h = _copy_2d_args(dst, dst_pitch, src, src_pitch, width, height)
    if w and h:
        check(fn.memcpy_2d(d.ptr, dp, s.ptr, sp, w, h))
    del d, s


def copy_2d_async(dst, dst_pitch: int, src, src_pitch: int, width: int, height: int,
                  stream: Stream) -> None:
    """Queues copy_2d() on a memarea Stream and returns; dst and src stay referenced by the
    stream until stream.synchronize() or close(), as for copy_async."""
    if not isinstance(stream, Stream):
        from ._stream import required_stream  # a foreign one (an int, torch's, cupy's)
        stream = required_stream(stream)
    stream._check()
    d, s, dp, sp, w, h = _copy_2d_args(dst, dst_pitch, src, src_pitch, width, height)
    if w and h:
        check(fn.memcpy_2d_async(d.ptr, dp, s.ptr, sp, w, h, stream._handle))
    stream._keep.append((d, s))
    for e in (d, s):
        if e.buffer is not None:
            e.buffer._add_pending(stream)
