"""Contexts the user makes (docs/contexts.md): memarea_context_* over CUDA's cuCtx*, HIP's
hipCtx* and the sim's model of them."""

from __future__ import annotations

import ctypes

from ._lib import check, fn

def _native(value) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"a context handle is an int, not {type(value).__name__}")
    v = value.__index__()
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"a context handle is an address, not {v}")
    return v


class Context:
    """A context: the vendor's own handle (CUcontext, hipCtx_t, a sim context).

    Context.create(device, flags) makes one and pushes it on the calling thread's stack; that
    object owns it (destroy(), or the garbage collector, destroys it). Context.wrap(handle),
    Context.current() and Context.pop() give objects that do not own theirs. A with-block pushes
    the context on entry and pops it on exit."""
    __slots__ = ("_handle", "_owns", "__weakref__")

    # Flags of create (memarea_context_flags): CUDA's CU_CTX_* values.
    SCHED_AUTO = 0x0
    SCHED_SPIN = 0x1
    SCHED_YIELD = 0x2
    SCHED_BLOCKING_SYNC = 0x4
    MAP_HOST = 0x8
    LMEM_RESIZE_TO_MAX = 0x10

    def __init__(self, handle: int, owns: bool = False):
        """Use create, wrap, current or pop."""
        self._handle = handle
        self._owns = owns

    @classmethod
    def create(cls, device: int = -1, flags: int = 0) -> "Context":
        """Makes a context on device (-1: the current device) with flags (at most one SCHED_*,
        and MAP_HOST, LMEM_RESIZE_TO_MAX) and pushes it, so it is current. Error
        INVALID_VALUE for bad flags, INVALID_DEVICE, NOT_SUPPORTED where the backend has no
        user contexts."""
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"device must be an int, not {type(device).__name__}")
        if isinstance(flags, bool) or not isinstance(flags, int) or flags < 0:
            raise TypeError("flags must be a non-negative int")
        h = ctypes.c_void_p()
        check(fn.context_create(ctypes.byref(h), flags, device))
        return cls(h.value, True)

    @classmethod
    def wrap(cls, handle: int) -> "Context":
        """A context made elsewhere (cuCtxCreate, a framework), as an int; it stays its owner's.
        Error INVALID_CONTEXT for one that is not live."""
        out = ctypes.c_void_p()
        check(fn.context_wrap(ctypes.byref(out), ctypes.c_void_p(_native(handle))))
        return cls(out.value, False)

    @staticmethod
    def current() -> "Context | None":
        """The calling thread's current context, or None."""
        out = ctypes.c_void_p()
        check(fn.context_get_current(ctypes.byref(out)))
        return None if out.value is None else Context(out.value, False)

    @staticmethod
    def pop() -> "Context":
        """Pops the calling thread's current context. Error INVALID_CONTEXT when none is."""
        out = ctypes.c_void_p()
        check(fn.context_pop(ctypes.byref(out)))
        return Context(out.value, False)

    @staticmethod
    def clear_current() -> None:
        """Pops the top of the calling thread's stack, if any (memarea_context_set_current(NULL))."""
        check(fn.context_set_current(None))

    def _h(self) -> int:
        if self._handle is None:
            raise ValueError("the memarea Context was destroyed")
        return self._handle

    @property
    def handle(self) -> int:
        """The vendor's handle, as an int."""
        return self._h()

    @property
    def owns(self) -> bool:
        """Whether this object destroys the context."""
        return self._owns

    @property
    def device(self) -> int:
        """The context's device."""
        d = ctypes.c_int()
        check(fn.context_get_device(ctypes.byref(d), self._h()))
        return d.value

    @property
    def flags(self) -> int:
        """The flags it was made with (the driver may add bits of its own)."""
        f = ctypes.c_uint()
        check(fn.context_get_flags(ctypes.byref(f), self._h()))
        return f.value

    def synchronize(self) -> None:
        """Waits for all of the context's work; the thread's stack is unchanged."""
        check(fn.context_synchronize(self._h()))

    def set_current(self) -> None:
        """Replaces the top of the calling thread's stack with this context."""
        check(fn.context_set_current(self._h()))

    def push(self) -> None:
        """Pushes this context on the calling thread's stack."""
        check(fn.context_push(self._h()))

    def enable_peer_access(self, flags: int = 0) -> None:
        """Lets the calling thread's current context reach this context's memory (one
        direction). Errors as cuCtxEnablePeerAccess (docs/contexts.md)."""
        check(fn.context_enable_peer_access(self._h(), flags))

    def disable_peer_access(self) -> None:
        """Undoes enable_peer_access. Error PEER_ACCESS_NOT_ENABLED when it was not on."""
        check(fn.context_disable_peer_access(self._h()))

    def destroy(self) -> None:
        """Destroys the context now (popping it where this thread has it current), whether this
        object owns it or not. Error INVALID_CONTEXT for one already destroyed."""
        h = self._h()
        self._handle, self._owns = None, False
        check(fn.context_destroy(h))

    def __enter__(self) -> "Context":
        self.push()
        return self

    def __exit__(self, *exc) -> None:
        Context.pop()

    def __del__(self):
        if getattr(self, "_owns", False) and self._handle is not None and fn is not None:
            # An owner collected: its context goes, as memarea::context's destructor does.
            fn.context_destroy(self._handle)
            self._handle = None

    def __eq__(self, other) -> bool:
        return isinstance(other, Context) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash(self._handle)

    def __repr__(self) -> str:
        state = "destroyed" if self._handle is None else hex(self._handle)
        return f"<memarea.Context {state}{' owned' if self._owns else ''}>"
