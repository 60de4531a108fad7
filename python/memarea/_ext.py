"""The compiled extension, memarea._native, when there is one.

It serves the allocation hot path (Pool.alloc, Buffer construction and free) and the buffer
protocol on Python 3.11; everything else is Python over ctypes. Without it (no compiler where
the package was built, or MEMAREA_PYTHON_PURE=1) the package runs on ctypes alone, with the same
behaviour and errors (docs/python.md, "Two paths").

Where it is looked for: the package's own directory (a pip or `cmake --install` install, a copy
with the library), then the build tree of the library memarea/_lib.py loaded
(<build>/python/memarea/, beside <build>/src/libmemarea.so). The library is loaded first, so the
extension binds to that copy (by its soname); a build whose library is another copy is refused.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import warnings

from ._lib import lib, library_path

__all__ = ["native", "implementation", "reason"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "_native"


def _loaded_library_file() -> str | None:
    """The file the library was loaded from, also when the system loader found it by name."""
    if os.sep in library_path:
        return os.path.realpath(library_path)

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    info = DlInfo()
    if not dladdr(ctypes.cast(lib.memarea_pool_alloc, ctypes.c_void_p), ctypes.byref(info)):
        return None
    return os.path.realpath(info.dli_fname.decode()) if info.dli_fname else None


def _candidates() -> list[str]:
    dirs = [_HERE]
    libfile = _loaded_library_file()
    if libfile:  # <build>/src/libmemarea.so -> <build>/python/memarea
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(libfile)), "python", "memarea"))
    return [os.path.join(d, _NAME + suffix) for d in dirs
            for suffix in importlib.machinery.EXTENSION_SUFFIXES]


def _load():
    pure = os.environ.get("MEMAREA_PYTHON_PURE", "")
    if pure not in ("", "0"):
        return None, f"MEMAREA_PYTHON_PURE={pure}"
    found = [p for p in _candidates() if os.path.isfile(p)]
    if not found:
        return None, "no compiled extension found (memarea/_native.abi3.so)"
    path = found[0]
    try:
        spec = importlib.util.spec_from_file_location(f"{__package__}.{_NAME}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as e:
        why = f"{path} cannot be loaded: {e}"
    else:
        mine = ctypes.cast(lib.memarea_pool_alloc, ctypes.c_void_p).value
        if module.library_function() == mine:
            sys.modules[spec.name] = module
            return module, ""
        why = f"{path} is bound to another copy of libmemarea than {library_path}"
    # An extension that is there but unusable is a broken build or install: say so, and serve
    # on ctypes, which works with any library the package loads.
    warnings.warn(f"memarea: {why}; running on ctypes alone", RuntimeWarning, stacklevel=3)
    return None, why


native, reason = _load()
"""The extension module, or None; when None, why."""

implementation = "compiled" if native is not None else "ctypes"
"""Which path serves the hot path and the buffer protocol: "compiled" (memarea._native) or
"ctypes"."""
