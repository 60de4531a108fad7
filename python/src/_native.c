/* memarea._native: the compiled part of the memarea Python package.
 *
 * What runs on every allocation -- Pool.alloc, a Buffer's construction, free(), the with-block,
 * the garbage collector's finalizer --, the calls a program makes per tensor (lookup, a
 * Buffer's IPC handle), and the buffer protocol (memoryview(buf),
 * numpy.frombuffer(buf)) on Python 3.11, where a class written in Python cannot export a buffer.
 * Everything else stays in Python over ctypes (memarea/_*.py): the types here are bases that
 * memarea.Buffer, memarea.Pool and memarea.View subclass, with the same attribute names as the
 * pure-Python bases they replace (memarea/_buffer.py, _area.py), so the Python code above them
 * is one for both paths and behaves alike.
 *
 * Built against the CPython limited API of 3.11 (abi3): one binary loads on 3.11 and every later
 * CPython. It links libmemarea through its soname; the package loads the library first (through
 * ctypes, memarea/_lib.py), so the loader binds this module to that same copy, and
 * memarea/_ext.py checks so before using it. Every library call releases the GIL, as ctypes does.
 */
#include "_native.h"

#include <structmember.h>

#include <stdint.h>

/* How a Buffer's memory goes back: memarea.Buffer._AREA, _POOL, _FREE, _IPC. */
enum { MODE_AREA = 0, MODE_POOL = 1, MODE_FREE = 2, MODE_IPC = 3 };

/* The Python side, given once by setup(): the Buffer class Pool.alloc makes, and the helpers
 * whose messages the pure-Python path shares (raise_status reads the thread's error message,
 * size and stream_object check arguments). */
static PyTypeObject *buffer_class;
static allocfunc buffer_alloc;
static PyObject *raise_status_fn, *size_fn, *stream_object_fn;
static PyObject *str_handle, *str_sync_pending, *str_exported_view, *str_nbytes;
static PyTypeObject *BufferCore_Type, *PoolCore_Type;

void raise_status(memarea_status st) {
  PyObject *r = PyObject_CallFunction(raise_status_fn, "i", (int)st);
  if (r != NULL) {
    Py_DECREF(r);
    PyErr_Format(PyExc_SystemError, "memarea: status %d raised nothing", (int)st);
  }
}

/* The _handle attribute (an int or None) of obj (NULL: none) as a pointer; -1 with an exception
 * set on failure. */
static int handle_of(PyObject *obj, void **out) {
  if (obj == NULL) {
    *out = NULL;
    return 0;
  }
  PyObject *h = PyObject_GetAttr(obj, str_handle);
  if (h == NULL) return -1;
  if (h == Py_None) {
    *out = NULL;
  } else {
    *out = PyLong_AsVoidPtr(h);
    if (*out == NULL && PyErr_Occurred()) {
      Py_DECREF(h);
      return -1;
    }
  }
  Py_DECREF(h);
  return 0;
}

/* ---- the types' state ----------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  void *ptr;
  unsigned long long nbytes;
  int open;                /* 0 once freed */
  int mode;                /* MODE_* */
  Py_ssize_t views;        /* buffer-protocol exports alive (memoryviews, NumPy arrays) */
  PyObject *device, *kind, *owner, *stream, *exports, *pending, *weakrefs;
} BufferCore;

static int is_set(PyObject *o) { return o != NULL && o != Py_None; }

/* Frees the memory (memarea.Buffer.free); 0, or -1 with an exception set and nothing changed. */
static int buffer_do_free(BufferCore *self) {
  if (!self->open) return 0;
  if (is_set(self->exports)) {
    Py_ssize_t n = PyObject_Length(self->exports);
    if (n < 0) return -1;
    if (n > 0) {
      PyErr_Format(PyExc_BufferError,
                   "the buffer is still held by %zd DLPack consumer(s) (torch/cupy/jax tensors "
                   "made from it): drop them first", n);
      return -1;
    }
  }
  if (self->views > 0) {
    PyErr_Format(PyExc_BufferError,
                 "the buffer is still viewed through the buffer protocol by %zd export(s) "
                 "(memoryview(buffer), numpy.frombuffer, numpy.asarray): release them first",
                 self->views);
    return -1;
  }
  if (is_set(self->pending)) {
    int any = PyObject_IsTrue(self->pending);
    if (any < 0) return -1;
    if (any) {
      PyObject *r = PyObject_CallMethodObjArgs((PyObject *)self, str_sync_pending, NULL);
      if (r == NULL) return -1;
      Py_DECREF(r);
    }
  }
  void *ptr = self->ptr, *owner_handle = NULL, *stream = NULL;
  memarea_status st;
  self->open = 0;
  switch (self->mode) {
    case MODE_POOL:
      if (self->owner != NULL && PyObject_TypeCheck(self->owner, PoolCore_Type)) {
        owner_handle = ((PoolCore *)self->owner)->handle;
      } else if (handle_of(self->owner, &owner_handle) < 0) {
        goto failed;
      }
      if (is_set(self->stream) && handle_of(self->stream, &stream) < 0) goto failed;
      Py_BEGIN_ALLOW_THREADS
      st = memarea_pool_free(owner_handle, ptr, stream);
      Py_END_ALLOW_THREADS
      if (st == MEMAREA_SUCCESS && self->owner != NULL &&
          PyObject_TypeCheck(self->owner, PoolCore_Type) && ((PoolCore *)self->owner)->orphaned)
        close_orphaned_pool((PoolCore *)self->owner);
      break;
    case MODE_AREA:
      if (handle_of(self->owner, &owner_handle) < 0) goto failed;
      if (owner_handle != NULL) {
        Py_BEGIN_ALLOW_THREADS
        st = memarea_area_munmap(owner_handle, ptr, (size_t)self->nbytes);
        Py_END_ALLOW_THREADS
        break;
      }
      /* An area closed before its buffers: memarea_free finds the allocation. */
      Py_BEGIN_ALLOW_THREADS
      st = memarea_free(ptr);
      Py_END_ALLOW_THREADS
      break;
    case MODE_IPC:
      Py_BEGIN_ALLOW_THREADS
      st = memarea_ipc_close_mem_handle(ptr);
      Py_END_ALLOW_THREADS
      break;
    default:
      Py_BEGIN_ALLOW_THREADS
      st = memarea_free(ptr);
      Py_END_ALLOW_THREADS
      break;
  }
  if (st == MEMAREA_SUCCESS) return 0;
  self->open = 1; /* nothing changed: the buffer is still live */
  raise_status(st);
  return -1;
failed:
  self->open = 1;
  return -1;
}

static PyObject *buffer_free(PyObject *self, PyObject *unused) {
  (void)unused;
  if (buffer_do_free((BufferCore *)self) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *buffer_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  Py_INCREF(self);
  return self;
}

static PyObject *buffer_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)args;
  (void)nargs;
  return buffer_free(self, NULL);
}

static int buffer_check_open(BufferCore *self) {
  if (self->open) return 0;
  PyErr_SetString(PyExc_ValueError, "the memarea Buffer was freed");
  return -1;
}

/* The whole buffer as bytes: one buffer-protocol export (memarea.View.memoryview slices it). */
static PyObject *buffer_host_bytes(PyObject *self, PyObject *unused) {
  (void)unused;
  return PyMemoryView_FromObject(self);
}

static PyObject *buffer_check_open_method(PyObject *self, PyObject *unused) {
  (void)unused;
  if (buffer_check_open((BufferCore *)self) < 0) return NULL;
  Py_RETURN_NONE;
}

/* A Buffer of class cls over memory the caller allocated (steals nothing). */
static PyObject *buffer_new(PyTypeObject *cls, allocfunc alloc, void *ptr, int open,
                            unsigned long long nbytes, PyObject *device, PyObject *kind,
                            PyObject *owner, int mode, PyObject *stream) {
  BufferCore *b = (BufferCore *)alloc(cls, 0);
  if (b == NULL) return NULL;
  b->ptr = ptr;
  b->open = open;
  b->nbytes = nbytes;
  b->mode = mode;
  Py_XINCREF(device);
  b->device = device;
  Py_XINCREF(kind);
  b->kind = kind;
  if (owner != Py_None) {
    Py_XINCREF(owner);
    b->owner = owner;
  }
  if (stream != Py_None) {
    Py_XINCREF(stream);
    b->stream = stream;
  }
  return (PyObject *)b;
}

/* Buffer._make(ptr, nbytes, device, kind, owner, mode, stream=None) (memarea/_buffer.py's). */
static PyObject *buffer_make(PyObject *cls, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs < 6 || nargs > 7) {
    PyErr_Format(PyExc_TypeError, "_make() takes 6 or 7 arguments (%zd given)", nargs);
    return NULL;
  }
  if ((PyTypeObject *)cls == BufferCore_Type) {
    PyErr_SetString(PyExc_TypeError, "_make() makes subclasses of BufferCore only");
    return NULL;
  }
  void *ptr = NULL;
  int open = args[0] != Py_None;
  if (open) {
    ptr = PyLong_AsVoidPtr(args[0]);
    if (ptr == NULL && PyErr_Occurred()) return NULL;
  }
  unsigned long long nbytes = PyLong_AsUnsignedLongLong(args[1]);
  if (nbytes == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  long mode = PyLong_AsLong(args[5]);
  if (mode == -1 && PyErr_Occurred()) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
  return buffer_new((PyTypeObject *)cls, alloc, ptr, open, nbytes, args[2], args[3], args[4],
                    (int)mode, nargs == 7 ? args[6] : Py_None);
}

static PyObject *buffer_get_ptr(PyObject *self, void *closure) {
  (void)closure;
  BufferCore *b = (BufferCore *)self;
  if (buffer_check_open(b) < 0) return NULL;
  return PyLong_FromVoidPtr(b->ptr);
}

static PyObject *buffer_get_raw_ptr(PyObject *self, void *closure) {
  (void)closure;
  BufferCore *b = (BufferCore *)self;
  if (!b->open) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(b->ptr);
}

static PyObject *buffer_get_nbytes(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(((BufferCore *)self)->nbytes);
}

static PyObject *buffer_get_closed(PyObject *self, void *closure) {
  (void)closure;
  return PyBool_FromLong(!((BufferCore *)self)->open);
}

static PyObject *buffer_get_views(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromSsize_t(((BufferCore *)self)->views);
}

static Py_ssize_t buffer_length(PyObject *self) {
  unsigned long long n = ((BufferCore *)self)->nbytes;
  if (n > (unsigned long long)PY_SSIZE_T_MAX) {
    PyErr_SetString(PyExc_OverflowError, "the buffer's size does not fit in Py_ssize_t");
    return -1;
  }
  return (Py_ssize_t)n;
}

/* Memory the host may read and write directly (memarea/_buffer.py's _HOST_KINDS). */
static int host_kind(PyObject *kind) {
  static const char *const kinds[] = {"host", "mapped", "registered", "managed", "host_numa"};
  if (kind == NULL || !PyUnicode_Check(kind)) return 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
    if (PyUnicode_CompareWithASCIIString(kind, kinds[i]) == 0) return 1;
  }
  return 0;
}

/* The buffer protocol: the whole buffer as writable bytes (format "B"), for memory the host can
 * touch. While an export lives the memory is not freed: free() raises BufferError. */
static int buffer_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  BufferCore *b = (BufferCore *)self;
  if (buffer_check_open(b) < 0) return -1;
  if (!host_kind(b->kind)) {
    PyErr_Format(PyExc_BufferError,
                 "memarea %S memory is not host memory: the host cannot view it through the "
                 "buffer protocol (copy it to host memory with memarea.copy, or use DLPack)",
                 b->kind != NULL ? b->kind : Py_None);
    return -1;
  }
  if (b->nbytes > (unsigned long long)PY_SSIZE_T_MAX) {
    PyErr_SetString(PyExc_BufferError, "the buffer is larger than Py_ssize_t");
    return -1;
  }
  if (is_set(b->pending)) {
    int any = PyObject_IsTrue(b->pending);
    if (any < 0) return -1;
    if (any) {
      PyObject *r = PyObject_CallMethodObjArgs(self, str_sync_pending, NULL);
      if (r == NULL) return -1;
      Py_DECREF(r);
    }
  }
  if (PyBuffer_FillInfo(view, self, b->ptr, (Py_ssize_t)b->nbytes, 0, flags) < 0) return -1;
  ++b->views;
  return 0;
}

static void buffer_releasebuffer(PyObject *self, Py_buffer *view) {
  (void)view;
  --((BufferCore *)self)->views;
}

/* The garbage collector's free (memarea.Buffer.__del__): errors are reported, not raised. */
static void buffer_finalize(PyObject *self) {
  if (!((BufferCore *)self)->open) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (buffer_do_free((BufferCore *)self) < 0) PyErr_WriteUnraisable(self);
  PyErr_Restore(type, value, traceback);
}

static int buffer_traverse(PyObject *self, visitproc visit, void *arg) {
  BufferCore *b = (BufferCore *)self;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(b->device);
  Py_VISIT(b->kind);
  Py_VISIT(b->owner);
  Py_VISIT(b->stream);
  Py_VISIT(b->exports);
  Py_VISIT(b->pending);
  return 0;
}

static int buffer_clear(PyObject *self) {
  BufferCore *b = (BufferCore *)self;
  Py_CLEAR(b->device);
  Py_CLEAR(b->kind);
  Py_CLEAR(b->owner);
  Py_CLEAR(b->stream);
  Py_CLEAR(b->exports);
  Py_CLEAR(b->pending);
  return 0;
}

/* Instances are memarea.Buffer's, whose deallocation runs buffer_finalize first. */
static void buffer_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (((BufferCore *)self)->weakrefs != NULL) PyObject_ClearWeakRefs(self);
  buffer_clear(self);
  freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  free_fn(self);
  Py_DECREF(tp);
}

static PyMethodDef buffer_methods[] = {
    {"free", buffer_free, METH_NOARGS,
     "Frees the memory now (after memarea stream work queued on it completes). Raises\n"
     "BufferError while a DLPack consumer or a buffer-protocol export (a memoryview, a NumPy\n"
     "array made through the buffer protocol) still holds it. Freeing twice does nothing."},
    {"__enter__", buffer_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))buffer_exit, METH_FASTCALL, NULL},
    {"_check_open", buffer_check_open_method, METH_NOARGS, NULL},
    {"_host_bytes", buffer_host_bytes, METH_NOARGS, NULL},
    {"_make", (PyCFunction)(void (*)(void))buffer_make, METH_FASTCALL | METH_CLASS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef buffer_getset[] = {
    {"ptr", buffer_get_ptr, NULL,
     "The address (for device memory: the device address). Raises once freed.", NULL},
    {"nbytes", buffer_get_nbytes, NULL, "Size in bytes.", NULL},
    {"closed", buffer_get_closed, NULL, "True once freed.", NULL},
    {"_ptr", buffer_get_raw_ptr, NULL, NULL, NULL},
    {"_nbytes", buffer_get_nbytes, NULL, NULL, NULL},
    {"_buffer_views", buffer_get_views, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef buffer_members[] = {
    {"device", T_OBJECT, offsetof(BufferCore, device), 0,
     "The device the memory is on (-1 for host memory)."},
    {"kind", T_OBJECT, offsetof(BufferCore, kind), 0,
     "\"device\", \"host\", \"mapped\", \"managed\", \"host_numa\" or \"ipc\"."},
    {"_owner", T_OBJECT, offsetof(BufferCore, owner), READONLY, NULL},
    {"_mode", T_INT, offsetof(BufferCore, mode), READONLY, NULL},
    {"_stream", T_OBJECT, offsetof(BufferCore, stream), READONLY, NULL},
    {"_exports", T_OBJECT, offsetof(BufferCore, exports), 0, NULL},
    {"_pending", T_OBJECT, offsetof(BufferCore, pending), 0, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(BufferCore, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot buffer_slots[] = {
    {Py_tp_doc, "The compiled state and hot path of memarea.Buffer (its base class)."},
    {Py_tp_methods, buffer_methods},
    {Py_tp_getset, buffer_getset},
    {Py_tp_members, buffer_members},
    {Py_tp_finalize, buffer_finalize},
    {Py_tp_traverse, buffer_traverse},
    {Py_tp_clear, buffer_clear},
    {Py_tp_dealloc, buffer_dealloc},
    {Py_sq_length, buffer_length},
    {Py_mp_length, buffer_length},
    {Py_bf_getbuffer, buffer_getbuffer},
    {Py_bf_releasebuffer, buffer_releasebuffer},
    {0, NULL}};

static PyType_Spec buffer_spec = {"memarea._native.BufferCore", sizeof(BufferCore), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                  buffer_slots};

/* ---- PoolCore -------------------------------------------------------------------------------- */


static PyObject *pool_get_handle(PyObject *self, void *closure) {
  (void)closure;
  PoolCore *p = (PoolCore *)self;
  if (p->handle == NULL) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(p->handle);
}

static int pool_set_handle(PyObject *self, PyObject *value, void *closure) {
  (void)closure;
  void *h = NULL;
  if (value != NULL && value != Py_None) {
    h = PyLong_AsVoidPtr(value);
    if (h == NULL && PyErr_Occurred()) return -1;
  }
  ((PoolCore *)self)->handle = h;
  return 0;
}

/* Pool.alloc(nbytes, stream=None): the hot path. */
static PyObject *pool_alloc(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames) {
  PyObject *nbytes_obj = nargs > 0 ? args[0] : NULL, *stream_obj = nargs > 1 ? args[1] : Py_None;
  if (nargs > 2) {
    PyErr_Format(PyExc_TypeError,
                 "Pool.alloc() takes from 2 to 3 positional arguments but %zd were given",
                 nargs + 1);
    return NULL;
  }
  Py_ssize_t nkw = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject *name = PyTuple_GetItem(kwnames, i);
    PyObject **slot = NULL;
    if (PyUnicode_CompareWithASCIIString(name, "nbytes") == 0) {
      if (nargs > 0) goto twice;
      slot = &nbytes_obj;
    } else if (PyUnicode_CompareWithASCIIString(name, "stream") == 0) {
      if (nargs > 1) goto twice;
      slot = &stream_obj;
    } else {
      PyErr_Format(PyExc_TypeError, "Pool.alloc() got an unexpected keyword argument '%U'",
                   name);
      return NULL;
    }
    *slot = args[nargs + i];
    continue;
  twice:
    PyErr_Format(PyExc_TypeError, "Pool.alloc() got multiple values for argument '%U'", name);
    return NULL;
  }
  if (nbytes_obj == NULL) {
    PyErr_SetString(PyExc_TypeError,
                    "Pool.alloc() missing 1 required positional argument: 'nbytes'");
    return NULL;
  }
  /* The common case checked inline; memarea._device._size raises the precise error. */
  unsigned long long nbytes = 0;
  if (PyLong_CheckExact(nbytes_obj)) {
    nbytes = PyLong_AsUnsignedLongLong(nbytes_obj);
    if (nbytes == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      nbytes = 0;
    }
  }
  if (nbytes == 0) {
    PyObject *checked = PyObject_CallFunctionObjArgs(size_fn, nbytes_obj, str_nbytes, NULL);
    if (checked == NULL) return NULL;
    nbytes = PyLong_AsUnsignedLongLong(checked);
    Py_DECREF(checked);
    if (nbytes == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  }
  PoolCore *pool = (PoolCore *)self;
  void *h = pool->handle, *stream = NULL, *ptr = NULL;
  if (h == NULL) {
    PyErr_SetString(PyExc_ValueError, "the pool is closed");
    return NULL;
  }
  /* The memarea Stream the argument names (a foreign stream wrapped: memarea/_stream.py), which
   * the Buffer keeps and is freed on. */
  PyObject *stream_kept = Py_None;
  if (stream_obj != Py_None) {
    stream_kept = PyObject_CallFunctionObjArgs(stream_object_fn, stream_obj, NULL);
    if (stream_kept == NULL) return NULL;
    if (handle_of(stream_kept, &stream) < 0) {
      Py_DECREF(stream_kept);
      return NULL;
    }
  } else {
    Py_INCREF(stream_kept);
  }
  memarea_status st;
  Py_BEGIN_ALLOW_THREADS
  st = memarea_pool_alloc(h, &ptr, (size_t)nbytes, stream);
  Py_END_ALLOW_THREADS
  if (st != MEMAREA_SUCCESS) {
    Py_DECREF(stream_kept);
    raise_status(st);
    return NULL;
  }
  PyObject *b = buffer_new(buffer_class, buffer_alloc, ptr, 1, nbytes, pool->device, pool->kind,
                           self, MODE_POOL, stream_kept);
  Py_DECREF(stream_kept);  /* the Buffer holds its own reference */
  if (b == NULL) {
    /* Nothing may leak when the Buffer cannot be made: the memory goes back at once. */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    Py_BEGIN_ALLOW_THREADS
    memarea_pool_free(h, ptr, stream);
    Py_END_ALLOW_THREADS
    PyErr_Restore(type, value, traceback);
  }
  return b;
}

static int pool_traverse(PyObject *self, visitproc visit, void *arg) {
  PoolCore *p = (PoolCore *)self;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(p->device);
  Py_VISIT(p->kind);
  Py_VISIT(p->area);
  return 0;
}

static int pool_clear(PyObject *self) {
  PoolCore *p = (PoolCore *)self;
  Py_CLEAR(p->device);
  Py_CLEAR(p->kind);
  Py_CLEAR(p->area);
  return 0;
}

/* memarea.Pool.__del__ (Python) runs before this and closes the pool. */
static void pool_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (((PoolCore *)self)->weakrefs != NULL) PyObject_ClearWeakRefs(self);
  pool_clear(self);
  freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  free_fn(self);
  Py_DECREF(tp);
}

static PyMethodDef pool_methods[] = {
    {"alloc", (PyCFunction)(void (*)(void))pool_alloc, METH_FASTCALL | METH_KEYWORDS,
     "alloc($self, /, nbytes, stream=None)\n--\n\n"
     "Allocates nbytes, ordered on stream (None: the device's default stream): memory\n"
     "freed on that stream is reused at once. The Buffer is freed on the same stream."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef pool_getset[] = {
    {"_handle", pool_get_handle, pool_set_handle, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef pool_members[] = {
    {"device", T_OBJECT, offsetof(PoolCore, device), 0,
     "The pool's device (-1 for pageable host memory)."},
    {"kind", T_OBJECT, offsetof(PoolCore, kind), 0, "The kind of memory it pools."},
    {"area", T_OBJECT, offsetof(PoolCore, area), 0, "The Area it draws from, or None."},
    {"_orphaned", T_BOOL, offsetof(PoolCore, orphaned), 0, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(PoolCore, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot pool_slots[] = {
    {Py_tp_doc, "The compiled state and hot path of memarea.Pool (its base class)."},
    {Py_tp_methods, pool_methods},
    {Py_tp_getset, pool_getset},
    {Py_tp_members, pool_members},
    {Py_tp_traverse, pool_traverse},
    {Py_tp_clear, pool_clear},
    {Py_tp_dealloc, pool_dealloc},
    {0, NULL}};

static PyType_Spec pool_spec = {"memarea._native.PoolCore", sizeof(PoolCore), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                pool_slots};

/* ---- ViewCore -------------------------------------------------------------------------------- */

/* The buffer protocol of memarea.View: its _exported_view() (a memoryview over the Buffer's own
 * export, typed and shaped as the View) exports for it, so that the Buffer counts the export. */
static int view_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  PyObject *mv = PyObject_CallMethodObjArgs(self, str_exported_view, NULL);
  if (mv == NULL) return -1;
  int r = PyObject_GetBuffer(mv, view, flags);
  Py_DECREF(mv);
  return r;
}

static PyType_Slot view_slots[] = {
    {Py_tp_doc, "The buffer protocol of memarea.View (its base class)."},
    {Py_bf_getbuffer, view_getbuffer},
    {0, NULL}};

static PyType_Spec view_spec = {"memarea._native.ViewCore", sizeof(PyObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, view_slots};

/* ---- the module ------------------------------------------------------------------------------ */

static PyObject *setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 4 || !PyType_Check(args[0]) ||
      !PyType_IsSubtype((PyTypeObject *)args[0], BufferCore_Type) ||
      (PyTypeObject *)args[0] == BufferCore_Type) {
    PyErr_SetString(PyExc_TypeError,
                    "setup(buffer_class, raise_status, size, stream_object): buffer_class "
                    "subclasses BufferCore");
    return NULL;
  }
  PyObject **kept[] = {(PyObject **)&buffer_class, &raise_status_fn, &size_fn,
                       &stream_object_fn};
  for (int i = 0; i < 4; ++i) {
    PyObject *old = *kept[i];
    Py_INCREF(args[i]);
    *kept[i] = args[i];
    Py_XDECREF(old);
  }
  buffer_alloc = (allocfunc)PyType_GetSlot(buffer_class, Py_tp_alloc);
  Py_RETURN_NONE;
}

/* The address this module calls memarea_pool_alloc at: the package compares it with the one it
 * loaded through ctypes, so that both paths use one copy of the library. */
static PyObject *library_function(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromVoidPtr((void *)(uintptr_t)&memarea_pool_alloc);
}

static PyMethodDef module_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))setup, METH_FASTCALL,
     "setup(buffer_class, raise_status, size, stream_object): the Python side, once."},
    {"library_function", library_function, METH_NOARGS,
     "The address of memarea_pool_alloc as this module binds it."},
    {"pointer_info", native_pointer_info, METH_O,
     "pointer_info(address): (base, size, kind, device, capacity) of memarea_pointer_get_info."},
    {"ipc_handle", native_ipc_handle, METH_O,
     "ipc_handle(address): the 128 bytes of memarea_ipc_get_mem_handle."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native",
    "The compiled hot path and buffer protocol of the memarea package (docs/python.md).", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
  str_handle = PyUnicode_InternFromString("_handle");
  str_sync_pending = PyUnicode_InternFromString("_sync_pending");
  str_exported_view = PyUnicode_InternFromString("_exported_view");
  str_nbytes = PyUnicode_InternFromString("nbytes");
  if (!str_handle || !str_sync_pending || !str_exported_view || !str_nbytes) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  BufferCore_Type = (PyTypeObject *)PyType_FromSpec(&buffer_spec);
  PoolCore_Type = (PyTypeObject *)PyType_FromSpec(&pool_spec);
  PyObject *view_type = PyType_FromSpec(&view_spec);
  if (BufferCore_Type == NULL || PoolCore_Type == NULL || view_type == NULL ||
      PyModule_AddObjectRef(m, "BufferCore", (PyObject *)BufferCore_Type) < 0 ||
      PyModule_AddObjectRef(m, "PoolCore", (PyObject *)PoolCore_Type) < 0 ||
      PyModule_AddObjectRef(m, "ViewCore", view_type) < 0 ||
      PyModule_AddIntConstant(m, "LIMITED_API", Py_LIMITED_API) < 0) {
    Py_XDECREF(view_type);
    Py_DECREF(m);
    return NULL;
  }
  Py_DECREF(view_type);
  return m;
}
