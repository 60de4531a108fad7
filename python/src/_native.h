/* What the compiled extension's sources share (_native.c: the types and the module;
 * _native_calls.c: the module's calls and the pool's deferred destruction). Everything here is
 * hidden in the module (C_VISIBILITY_PRESET hidden). */
#pragma once

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memarea/memarea.h>

typedef struct {
  PyObject_HEAD
  memarea_pool_t handle; /* NULL: not created, or closed */
  char orphaned;         /* finalized while Buffers of it lived: the last one's free closes it
                            (a char: the _orphaned member is T_BOOL) */
  PyObject *device, *kind, *area, *weakrefs;
} PoolCore;

/* Raises the memarea.Error of a failed call (memarea._lib.raise_status). */
void raise_status(memarea_status st);

/* A pool whose finalizer ran while Buffers of it lived: destroyed once the last is freed. */
void close_orphaned_pool(PoolCore *pool);

/* memarea.lookup's and Buffer.ipc_handle's calls (the module's pointer_info, ipc_handle). */
PyObject *native_pointer_info(PyObject *module, PyObject *arg);
PyObject *native_ipc_handle(PyObject *module, PyObject *arg);
