/* memarea — an allocator for PyTorch (and any framework that loads a malloc/free pair by name).
 *
 * memarea_torch_malloc and memarea_torch_free have exactly the signatures PyTorch's
 * torch.cuda.memory.CUDAPluggableAllocator loads from a shared library:
 *
 *     void *malloc_fn(ssize_t size, int device, cudaStream_t stream);
 *     void free_fn(void *ptr, ssize_t size, int device, cudaStream_t stream);
 *
 * (ptrdiff_t is ssize_t on the platforms memarea builds for, and a cudaStream_t is a pointer;
 * memarea includes no CUDA header.) They draw from one memarea pool per device, ordered on the
 * stream PyTorch passes, so tensors made this way are ordinary memarea memory: lookup, copies
 * and IPC handles work on them. Python: memarea.torch.use_pool(pool) and memarea.torch.install()
 * (docs/python.md, "PyTorch and CuPy"). */
#ifndef MEMAREA_TORCH_H
#define MEMAREA_TORCH_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/memarea.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Allocates size bytes from the pool of `device` (memarea_torch_get_pool), ordered on the
 *  native stream `stream` of that device (NULL: its legacy default stream; any stream
 *  memarea_stream_wrap takes). size 0 returns NULL and is not an error (PyTorch never frees a
 *  null pointer of an empty tensor). On failure returns NULL, and memarea_last_error_message()
 *  on the calling thread says why (PyTorch then raises its out-of-memory error). Thread-safe.
 *  Streams are wrapped once per thread and kept: a stream's owner that destroys it must call
 *  memarea_stream_forget first, as for every stream memarea uses. */
MEMAREA_API void *memarea_torch_malloc(ptrdiff_t size, int device, void *stream);

/** Frees ptr, which memarea_torch_malloc returned, back to the pool it came from (whichever
 *  pool is set for the device now), ordered on `stream` (PyTorch passes the allocation's
 *  stream). Any thread may free. size is the size allocated, or 0 for any; device is not
 *  needed (the piece knows its pool) and not checked. NULL does nothing when size is 0. A
 *  pointer the pair did not hand out (or freed already), NULL with a size, or another size
 *  than allocated is refused without a change: the calling thread's last error is
 *  MEMAREA_ERROR_INVALID_VALUE, and memarea_torch_get_stats counts it. */
MEMAREA_API void memarea_torch_free(void *ptr, ptrdiff_t size, int device, void *stream);

/** Sets the pool memarea_torch_malloc draws from on `device` (-1: the current device): a pool
 *  of device or managed memory on that device (else MEMAREA_ERROR_INVALID_VALUE); NULL goes
 *  back to the default pool. Pieces already handed out go back to their own pool when freed,
 *  so the caller must keep a pool alive (not destroy it) while any of its pieces live:
 *  memarea_torch_get_stats(pool) counts them. */
MEMAREA_API memarea_status memarea_torch_set_pool(int device, memarea_pool_t pool);

/** The pool memarea_torch_malloc draws from on `device` (-1: the current device) now: the one
 *  set, else the device's default pool, a pool of device memory with default options that the
 *  library makes on first use and keeps for the life of the process. */
MEMAREA_API memarea_status memarea_torch_get_pool(memarea_pool_t *pool, int device);

/** What memarea_torch_malloc has handed out and not yet had back. */
typedef struct memarea_torch_stats {
  size_t live_pieces;   /**< pieces live now (of the pool asked about, or of all pools) */
  size_t live_bytes;    /**< the bytes they were asked for */
  size_t refused_frees; /**< memarea_torch_free calls refused so far, in the whole process */
} memarea_torch_stats;

/** The pieces memarea_torch_malloc handed out from `pool` (NULL: from every pool) that are
 *  still live, and the refused frees. */
MEMAREA_API memarea_status memarea_torch_get_stats(memarea_torch_stats *stats,
                                                   memarea_pool_t pool);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* MEMAREA_TORCH_H */
