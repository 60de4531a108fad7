"""DLPack, the CUDA array interface and the buffer protocol, in ctypes.

Producing: DLPack capsules (legacy "dltensor" and versioned "dltensor_versioned") over memarea
memory, whose deleter releases the exporting Buffer. Consuming (for memarea.copy): any object
with __cuda_array_interface__, __array_interface__, __dlpack__ or the buffer protocol, reduced
to an address and a byte count plus a "pin" object that keeps the memory valid while it lives.
"""

from __future__ import annotations

import ctypes
import threading

from ._lib import lib

# --- DLPack (dlpack.h, v1.0) ------------------------------------------------------------------

kDLCPU, kDLCUDA, kDLCUDAHost = 1, 2, 3
kDLROCM, kDLROCMHost = 10, 11
kDLExtDev = 12
kDLCUDAManaged = 13

kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6

DLPACK_VERSION = (1, 0)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# --- dtypes ---------------------------------------------------------------------------------------

class DType:
    """An element type a view can have: its name, size, DLPack code and NumPy typestr."""
    __slots__ = ("name", "itemsize", "dl_code", "typestr", "format")

    def __init__(self, name, dl_code, bits, typestr, fmt):
        self.name, self.itemsize, self.dl_code = name, bits // 8, dl_code
        self.typestr, self.format = typestr, fmt

    def __repr__(self):
        return f"memarea.dtype({self.name!r})"

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


# name: (DLPack code, bits, NumPy typestr or None, struct format for memoryview.cast or None)
_TABLE = {
    "bool": (kDLBool, 8, "|b1", "?"),
    "int8": (kDLInt, 8, "|i1", "b"), "int16": (kDLInt, 16, "<i2", "h"),
    "int32": (kDLInt, 32, "<i4", "i"), "int64": (kDLInt, 64, "<i8", "q"),
    "uint8": (kDLUInt, 8, "|u1", "B"), "uint16": (kDLUInt, 16, "<u2", "H"),
    "uint32": (kDLUInt, 32, "<u4", "I"), "uint64": (kDLUInt, 64, "<u8", "Q"),
    "float16": (kDLFloat, 16, "<f2", "e"), "float32": (kDLFloat, 32, "<f4", "f"),
    "float64": (kDLFloat, 64, "<f8", "d"), "bfloat16": (kDLBfloat, 16, None, None),
    "complex64": (kDLComplex, 64, "<c8", None), "complex128": (kDLComplex, 128, "<c16", None),
}
DTYPES = {name: DType(name, *v) for name, v in _TABLE.items()}
UINT8 = DTYPES["uint8"]
_BY_TYPESTR = {d.typestr[1:]: d for d in DTYPES.values() if d.typestr}
_BY_DL = {(d.dl_code, d.itemsize * 8): d for d in DTYPES.values()}


def dtype(x) -> DType:
    """The DType of x: a name ("float32"), a NumPy dtype or scalar type, a torch dtype
    (torch.float32), a typestr ("<f4"), or a DType."""
    if isinstance(x, DType):
        return x
    name = None
    if isinstance(x, str):
        name = x
        if x[:1] in "<>|=" and x[1:] in _BY_TYPESTR:
            if x[0] == ">":
                raise ValueError(f"memarea views are little-endian: dtype {x!r} is big-endian")
            return _BY_TYPESTR[x[1:]]
    elif x is bool:
        name = "bool"
    elif x is int:
        name = "int64"
    elif x is float:
        name = "float64"
    elif x is complex:
        name = "complex128"
    else:
        s = str(x)
        if s.startswith("torch."):  # torch.float32 and friends: no NumPy needed
            name = s[len("torch."):]
        else:
            try:
                import numpy as np
                d = np.dtype(x)
            except Exception:
                d = None
            if d is not None:
                if d.byteorder == ">":
                    raise ValueError(f"memarea views are little-endian: dtype {d} is big-endian")
                name = d.name
    if name in DTYPES:
        return DTYPES[name]
    raise TypeError(f"unsupported dtype {x!r}; memarea views take: {', '.join(DTYPES)}")


# --- producing DLPack capsules ------------------------------------------------------------------

_pyapi = ctypes.pythonapi
_PyCapsule_New = _pyapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pyapi))
_PyCapsule_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _pyapi))
_PyCapsule_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", _pyapi))

# Module-level names: bytes objects whose storage lives as long as the module, so the capsule's
# name pointer stays valid (PyCapsule_New keeps the pointer, not a copy).
_DLTENSOR = b"dltensor"
_DLTENSOR_VERSIONED = b"dltensor_versioned"
_USED_DLTENSOR = b"used_dltensor"
_USED_DLTENSOR_VERSIONED = b"used_dltensor_versioned"


class _Export:
    """What one exported capsule holds alive: the DLManagedTensor(Versioned), its shape array,
    and the exporting object (a memarea Buffer, through `owner`)."""
    __slots__ = ("managed", "shape", "owner", "buffer")


# Address of the managed tensor -> its _Export, until the deleter (called by the consumer, or by
# the capsule's destructor when nobody consumed it) removes it.
_exports: dict[int, _Export] = {}
_exports_lock = threading.Lock()


def _release(address: int) -> None:
    with _exports_lock:
        e = _exports.pop(address, None)
    if e is not None and e.buffer is not None:
        e.buffer._export_done(address)


@DELETER
def _deleter(address):
    # Called by a consumer (torch, cupy, numpy, jax) from any thread; ctypes takes the GIL.
    try:
        _release(address)
    except Exception:  # an exception cannot cross back into C
        pass


_DELETER_ADDRESS = ctypes.cast(_deleter, ctypes.c_void_p).value
# The capsules' destructor is libmemarea's (native): a capsule destroyed unconsumed (still named
# dltensor[_versioned]; a consumer renames what it takes, and calls the deleter itself) has its
# deleter called. A ctypes callback could not do it: consumers may drop a capsule they refused
# with their exception set (NumPy 1.24 does, for device memory), and a Python function called
# then loses that exception (the consumer then raises SystemError) and cannot run its body, so
# the Buffer stayed held by a consumer that never was. The native one saves and restores it.
_DESTRUCTOR_ADDRESS = ctypes.cast(lib.memarea_dlpack_capsule_destructor, ctypes.c_void_p).value


def make_capsule(owner, buffer, ptr: int, dev: tuple[int, int], dt: DType,
                 shape: tuple[int, ...], versioned: bool):
    """A DLPack capsule for the C-contiguous array of `dt` and `shape` at ptr on device dev,
    holding owner (and buffer, which hears when the consumer is done) alive until then."""
    e = _Export()
    ndim = len(shape)
    e.shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    t.data = ptr
    t.device.device_type, t.device.device_id = dev
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dt.dl_code, dt.itemsize * 8, 1
    t.shape = e.shape
    t.strides = None  # NULL: compact row-major (allowed since DLPack 0.8, and what we have)
    t.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _deleter
    if versioned:
        m.version.major, m.version.minor = DLPACK_VERSION
        m.flags = 0
    e.managed, e.owner, e.buffer = m, owner, buffer
    address = ctypes.addressof(m)
    with _exports_lock:
        _exports[address] = e
    if buffer is not None:
        buffer._export_begun(address)
    try:
        return _PyCapsule_New(address, _DLTENSOR_VERSIONED if versioned else _DLTENSOR,
                              _DESTRUCTOR_ADDRESS)
    except BaseException:
        _release(address)
        raise


def live_exports() -> int:
    """Capsules this process exported whose consumers have not released them yet."""
    with _exports_lock:
        return len(_exports)


# --- consuming: objects reduced to (address, bytes) -------------------------------------------


class Endpoint:
    """One side of a copy: an address, a byte count, and what must stay alive meanwhile.

    gpu_device: the device of foreign GPU memory whose producer may still have work queued on
    its own streams (memarea cannot join a foreign stream, so the copy waits for the device);
    None for host memory and memarea's own buffers (their pending streams are in `buffer`)."""
    __slots__ = ("ptr", "nbytes", "pin", "buffer", "gpu_device", "memarea_only")

    def __init__(self, ptr, nbytes, pin=None, buffer=None, gpu_device=None, memarea_only=False):
        self.ptr, self.nbytes, self.pin = ptr, nbytes, pin
        self.buffer, self.gpu_device = buffer, gpu_device
        # True for memory of a device only memarea knows (sim's kDLExtDev): the copy must find
        # it in memarea's records, or it would read an address as host memory.
        self.memarea_only = memarea_only


def _itemsize_of_typestr(typestr: str) -> int:
    try:
        return int(typestr[2:])
    except (ValueError, TypeError):
        raise ValueError(f"cannot read the item size of typestr {typestr!r}") from None


def _contiguous_nbytes(shape, strides, itemsize, what) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    if strides is not None and n > 0:
        expect = itemsize
        for dim, stride in zip(reversed(shape), reversed(strides)):
            if dim != 1 and stride != expect:
                raise ValueError(f"{what} is not C-contiguous (shape {tuple(shape)}, strides "
                                 f"{tuple(strides)}): copy it to a contiguous array first")
            expect *= dim
    return n * itemsize


def from_array_interface(obj, ai, writable, cuda):
    what = "__cuda_array_interface__" if cuda else "__array_interface__"
    if ai.get("mask") is not None:
        raise ValueError(f"{what} with a mask is not supported")
    data = ai.get("data")
    if data is None or not isinstance(data, tuple):
        return None  # the array interface defers to the buffer protocol
    ptr, readonly = data
    if writable and readonly:
        raise ValueError(f"destination {type(obj).__name__} is read-only")
    shape = tuple(ai["shape"])
    itemsize = _itemsize_of_typestr(ai["typestr"])
    strides = ai.get("strides")
    nbytes = _contiguous_nbytes(shape, strides, itemsize, type(obj).__name__)
    if ai.get("offset"):
        ptr += int(ai["offset"])
    return Endpoint(int(ptr or 0), nbytes, pin=obj)


class _DLPin:
    """A consumed DLPack tensor: calls the producer's deleter when dropped."""
    __slots__ = ("address", "deleter", "capsule")

    def __init__(self, address, deleter, capsule):
        self.address, self.deleter, self.capsule = address, deleter, capsule

    def __del__(self):
        if self.deleter:
            self.deleter(self.address)


_GPU_DL = {kDLCUDA, kDLROCM, kDLCUDAManaged}
_HOST_DL = {kDLCPU, kDLCUDAHost, kDLROCMHost}


def from_dlpack(obj, writable):
    """Consumes obj.__dlpack__() as a DLPack consumer does: reads the tensor, renames the
    capsule to used_*, and calls the deleter when the returned pin is dropped."""
    capsule = obj.__dlpack__()
    name = _PyCapsule_GetName(capsule)
    if name == _DLTENSOR:
        address = _PyCapsule_GetPointer(capsule, name)
        m = DLManagedTensor.from_address(address)
        used, readonly = _USED_DLTENSOR, False
    elif name == _DLTENSOR_VERSIONED:
        address = _PyCapsule_GetPointer(capsule, name)
        m = DLManagedTensorVersioned.from_address(address)
        used, readonly = _USED_DLTENSOR_VERSIONED, bool(m.flags & 1)
    else:
        raise ValueError(f"{type(obj).__name__}.__dlpack__ returned a capsule named {name!r}")
    _PyCapsule_SetName(capsule, used)
    deleter = ctypes.cast(m.deleter, ctypes.c_void_p).value
    pin = _DLPin(address, DELETER(deleter) if deleter else None, capsule)
    t = m.dl_tensor
    if writable and readonly:
        raise ValueError(f"destination {type(obj).__name__} is read-only (DLPack flags)")
    if t.dtype.lanes != 1:
        raise ValueError("DLPack tensors with vector lanes are not supported")
    itemsize = (t.dtype.bits + 7) // 8
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = None if not t.strides else [t.strides[i] * itemsize for i in range(t.ndim)]
    nbytes = _contiguous_nbytes(shape, strides, itemsize, type(obj).__name__)
    ptr = (t.data or 0) + t.byte_offset
    dev_type = t.device.device_type
    if dev_type in _GPU_DL:
        return Endpoint(ptr, nbytes, pin=pin, gpu_device=t.device.device_id)
    if dev_type in _HOST_DL:
        return Endpoint(ptr, nbytes, pin=pin)
    if dev_type == kDLExtDev:
        return Endpoint(ptr, nbytes, pin=pin, memarea_only=True)
    raise ValueError(f"{type(obj).__name__} lives on DLPack device type {dev_type}, which "
                     "memarea cannot copy to or from")


class _PyBuffer(ctypes.Structure):
    """Py_buffer (stable layout since Python 3.3)."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyObject_GetBuffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                        ctypes.POINTER(_PyBuffer), ctypes.c_int)(
    ("PyObject_GetBuffer", _pyapi))
_PyBuffer_Release = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_PyBuffer))(
    ("PyBuffer_Release", _pyapi))
_PyBUF_WRITABLE, _PyBUF_C_CONTIGUOUS = 0x0001, 0x0038


class _BufferPin:
    """An acquired Py_buffer, released when dropped."""
    __slots__ = ("view",)

    def __init__(self, view):
        self.view = view

    def __del__(self):
        _PyBuffer_Release(ctypes.byref(self.view))


def from_buffer_protocol(obj, writable):
    view = _PyBuffer()
    flags = _PyBUF_C_CONTIGUOUS | (_PyBUF_WRITABLE if writable else 0)
    try:
        _PyObject_GetBuffer(obj, ctypes.byref(view), flags)
    except BufferError as e:
        what = "a writable C-contiguous" if writable else "a C-contiguous"
        raise ValueError(f"{type(obj).__name__} does not give {what} buffer: {e}") from None
    pin = _BufferPin(view)
    return Endpoint(view.buf or 0, view.len, pin=pin)
