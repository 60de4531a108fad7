/* memarea — C API of contexts the user makes (docs/contexts.md): CUDA's cuCtx* over CUDA, HIP's
 * hipCtx* and the sim's model of them. memarea.h includes this header; it may be included alone. */
#ifndef MEMAREA_CONTEXT_H
#define MEMAREA_CONTEXT_H

#include <memarea/memarea.h>

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/** A context (CUcontext, hipCtx_t, a sim context): the handle is the vendor's own. */
typedef struct memarea_context_s *memarea_context_t;

/** Flags of memarea_context_create, with CUDA's CU_CTX_* values; at most one MEMAREA_CONTEXT_SCHED_*. */
enum memarea_context_flags {
  MEMAREA_CONTEXT_SCHED_AUTO = 0x0,          /**< the driver picks how a waiting thread waits */
  MEMAREA_CONTEXT_SCHED_SPIN = 0x1,          /**< waiting threads spin */
  MEMAREA_CONTEXT_SCHED_YIELD = 0x2,         /**< waiting threads yield */
  MEMAREA_CONTEXT_SCHED_BLOCKING_SYNC = 0x4, /**< waiting threads block */
  MEMAREA_CONTEXT_MAP_HOST = 0x8,            /**< pinned host memory may be mapped */
  MEMAREA_CONTEXT_LMEM_RESIZE_TO_MAX = 0x10  /**< local memory is kept at its largest size */
};

/** Makes a context on device (-1: the current device) and pushes it on the calling thread's
 *  stack, so it is current. MEMAREA_ERROR_INVALID_VALUE for unknown flags or two SCHED flags;
 *  MEMAREA_ERROR_INVALID_DEVICE for a bad device; MEMAREA_ERROR_NOT_SUPPORTED where the backend
 *  has no user contexts. */
MEMAREA_API memarea_status memarea_context_create(memarea_context_t *ctx, unsigned flags,
                                                  int device);
/** Destroys ctx, and pops it where the calling thread has it current. A destroyed (or unknown)
 *  context: MEMAREA_ERROR_INVALID_CONTEXT. */
MEMAREA_API memarea_status memarea_context_destroy(memarea_context_t ctx);
/** Takes a context the user made with the driver (cuCtxCreate, hipCtxCreate): checks that it is
 *  live (else MEMAREA_ERROR_INVALID_CONTEXT) and gives it back as a memarea_context_t. It stays
 *  the user's: they destroy it, with the driver or memarea_context_destroy. */
MEMAREA_API memarea_status memarea_context_wrap(memarea_context_t *ctx, void *native);
/** Replaces the top of the calling thread's stack with ctx; NULL pops the top. */
MEMAREA_API memarea_status memarea_context_set_current(memarea_context_t ctx);
/** *ctx: the calling thread's current context; NULL when it has none. */
MEMAREA_API memarea_status memarea_context_get_current(memarea_context_t *ctx);
/** Pushes ctx on the calling thread's stack. */
MEMAREA_API memarea_status memarea_context_push(memarea_context_t ctx);
/** Pops the calling thread's current context into *ctx (ctx may be NULL);
 *  MEMAREA_ERROR_INVALID_CONTEXT when none is current. */
MEMAREA_API memarea_status memarea_context_pop(memarea_context_t *ctx);
/** Waits for all work of ctx; the thread's current context is unchanged. */
MEMAREA_API memarea_status memarea_context_synchronize(memarea_context_t ctx);
/** *device: ctx's device. */
MEMAREA_API memarea_status memarea_context_get_device(int *device, memarea_context_t ctx);
/** *flags: the flags ctx was made with. */
MEMAREA_API memarea_status memarea_context_get_flags(unsigned *flags, memarea_context_t ctx);
/** Enables access from the calling thread's current context to peer_ctx's memory (one
 *  direction). MEMAREA_ERROR_INVALID_CONTEXT: no context is current, peer_ctx is not live or is
 *  the current one; MEMAREA_ERROR_INVALID_VALUE: flags not 0;
 *  MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED: the devices cannot reach each other (or are one);
 *  MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED; MEMAREA_ERROR_TOO_MANY_PEERS. */
MEMAREA_API memarea_status memarea_context_enable_peer_access(memarea_context_t peer_ctx,
                                                              unsigned flags);
/** Disables it. MEMAREA_ERROR_INVALID_CONTEXT: no context is current or peer_ctx is not live;
 *  MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED: access was not enabled. */
MEMAREA_API memarea_status memarea_context_disable_peer_access(memarea_context_t peer_ctx);

#ifdef __cplusplus
} /* extern "C" */
#endif

#pragma GCC visibility pop

#endif /* MEMAREA_CONTEXT_H */
