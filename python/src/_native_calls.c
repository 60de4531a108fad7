/* memarea._native's calls that are not a type's: memarea.lookup's and Buffer.ipc_handle's, and
 * the deferred destruction of a pool collected with Buffers of it (_native.h). */
#include "_native.h"

#include <stdint.h>

/* An address argument: an int in [0, 2^64) (the Python side checked what it was given). */
static int address_of(PyObject *arg, void **out) {
  const unsigned long long a = PyLong_AsUnsignedLongLong(arg);
  if (a == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = (void *)(uintptr_t)a;
  return 0;
}

/* memarea.lookup's call: (base, size, kind, device, capacity) of the allocation that holds
 * address, as memarea_pointer_get_info gives them (kind as its number). */
PyObject *native_pointer_info(PyObject *module, PyObject *arg) {
  (void)module;
  void *ptr = NULL;
  if (address_of(arg, &ptr) < 0) return NULL;
  memarea_allocation_info info;
  memarea_status st;
  Py_BEGIN_ALLOW_THREADS
  st = memarea_pointer_get_info(&info, ptr);
  Py_END_ALLOW_THREADS
  if (st != MEMAREA_SUCCESS) {
    raise_status(st);
    return NULL;
  }
  return Py_BuildValue("(KKiiK)", (unsigned long long)(uintptr_t)info.base,
                       (unsigned long long)info.size, (int)info.kind, info.device,
                       (unsigned long long)info.capacity);
}

/* Buffer.ipc_handle's call: the 128 bytes of memarea_ipc_get_mem_handle for address. */
PyObject *native_ipc_handle(PyObject *module, PyObject *arg) {
  (void)module;
  void *ptr = NULL;
  if (address_of(arg, &ptr) < 0) return NULL;
  memarea_ipc_handle_t h;
  memarea_status st;
  Py_BEGIN_ALLOW_THREADS
  st = memarea_ipc_get_mem_handle(&h, ptr);
  Py_END_ALLOW_THREADS
  if (st != MEMAREA_SUCCESS) {
    raise_status(st);
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char *)h.bytes, (Py_ssize_t)sizeof h.bytes);
}

/* A pool whose finalizer ran while Buffers of it lived (memarea.Pool.__del__ marks it
 * orphaned): destroyed once the last of them is freed. BUSY while others live (or pieces that
 * framework tensors hold): it stays, and the next free tries again. */
void close_orphaned_pool(PoolCore *pool) {
  if (pool->handle == NULL) return;
  memarea_status st;
  Py_BEGIN_ALLOW_THREADS
  st = memarea_pool_destroy(pool->handle);
  Py_END_ALLOW_THREADS
  if (st == MEMAREA_SUCCESS) {
    pool->handle = NULL;
    pool->orphaned = 0;
  }
}
