/* memarea — MPI, C API (libmemarea_mpi): device memory shared by the ranks of each node.
 *
 * The C face of memarea/mpi.hpp (docs/mpi.md). Every function returns a memarea_status; on
 * failure memarea_last_error_message() gives the message and memarea_mpi_last_failure() says
 * why a collective failed and which rank. Calls marked "collective" must be made by every rank
 * of the communicator, in the same order. Each step waits at most the options' timeout for
 * the other ranks (only memarea_mpi_window_node_comm's first call blocks without a deadline).
 * Ranks whose calls differ fail with MEMAREA_MPI_FAILURE_MISMATCH. After
 * MEMAREA_MPI_FAILURE_TIMEOUT or _MPI the communicator is unusable (MPI's rule) and the process
 * should abort or exit. */
#ifndef MEMAREA_MPI_H
#define MEMAREA_MPI_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/memarea.h>
#include <mpi.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Options of the collective calls; start from MEMAREA_MPI_OPTIONS_INIT. */
typedef struct memarea_mpi_options {
  double timeout_seconds; /**< the longest one step waits for the other ranks, in (0, 1e7]; 60 */
  int device;             /**< no area: its device; -1: node rank % count; < -1: INVALID_DEVICE */
  unsigned flags;         /**< reserved: must be 0 */
} memarea_mpi_options;
#define MEMAREA_MPI_OPTIONS_INIT {60.0, -1, 0u}

/** Why a collective call failed. */
typedef enum memarea_mpi_failure {
  MEMAREA_MPI_FAILURE_NONE = 0,    /**< it did not fail (or failed before talking to others) */
  MEMAREA_MPI_FAILURE_RANK = 1,    /**< one rank's step failed, every rank failed alike; the
                                        communicator is still usable */
  MEMAREA_MPI_FAILURE_TIMEOUT = 2, /**< a rank did not arrive in time: communicator unusable */
  MEMAREA_MPI_FAILURE_MPI = 3,     /**< an MPI call failed: communicator unusable */
  MEMAREA_MPI_FAILURE_MISMATCH = 4 /**< ranks made different collective calls (the rank is one
                                        whose call differed): the communicator is still usable,
                                        the window or shared buffers are not (destroy them) */
} memarea_mpi_failure;

/** About the calling thread's last call of this header (any call but this one, collective or
 *  not, resets it): when it failed collectively, *kind and *rank (the failing rank of the
 *  call's communicator, -1 when none can be named); else MEMAREA_MPI_FAILURE_NONE and -1.
 *  Either pointer may be NULL. */
MEMAREA_API memarea_status memarea_mpi_last_failure(memarea_mpi_failure *kind, int *rank);

/* ---------------------------------------------------------------------------------------- */
/* Windows                                                                                  */

/** A window of device memory over the ranks of each node. */
typedef struct memarea_mpi_window *memarea_mpi_window_t;

/** Collective over comm: every rank allocates bytes_per_rank bytes (the same on every rank of
 *  a node) from area (NULL: device memory of options->device, by default node rank % device
 *  count; a pooled area draws from its pool, which must outlive the window: the area itself
 *  may be destroyed) and opens every other segment of its node. options may be NULL. Fails on
 *  every rank alike, naming the rank, when any rank's allocation, export or open fails or its
 *  bytes_per_rank differs. */
MEMAREA_API memarea_status memarea_mpi_window_create(memarea_mpi_window_t *window, MPI_Comm comm,
                                                     size_t bytes_per_rank, memarea_area_t area,
                                                     const memarea_mpi_options *options);
/** Collective over the node: closes every import, waits until every rank has closed this
 *  rank's segment, frees it. The window is gone afterwards whatever the status. */
MEMAREA_API memarea_status memarea_mpi_window_destroy(memarea_mpi_window_t window);
/** This rank's segment. */
MEMAREA_API memarea_status memarea_mpi_window_local(memarea_mpi_window_t window, void **ptr);
/** Node rank node_rank's segment, valid in this process; MEMAREA_ERROR_INVALID_VALUE for a
 *  rank outside the node (ranks of other nodes are never reachable). */
MEMAREA_API memarea_status memarea_mpi_window_remote(memarea_mpi_window_t window, int node_rank,
                                                     void **ptr);
/** This rank's node rank and its node's size (either pointer may be NULL). */
MEMAREA_API memarea_status memarea_mpi_window_node_rank(memarea_mpi_window_t window,
                                                        int *node_rank, int *node_size);
/** A communicator of the node's ranks, for the caller's use; valid until destroy. The first
 *  call makes it, collective over the node's ranks: a step bounded by the window's timeout (a
 *  rank that never calls it fails the others with a timeout), then MPI_Comm_create_group,
 *  which has no deadline of its own. */
MEMAREA_API memarea_status memarea_mpi_window_node_comm(memarea_mpi_window_t window,
                                                        MPI_Comm *comm);
/** *can_access: 1 when this rank's device reaches node_rank's segment directly, else 0
 *  (memarea_memcpy on it still works: it stages through the host). */
MEMAREA_API memarea_status memarea_mpi_window_can_access(memarea_mpi_window_t window,
                                                         int node_rank, int *can_access);
/** Completes this rank's device work, then waits for every rank of the node. Collective over
 *  the node. */
MEMAREA_API memarea_status memarea_mpi_window_fence(memarea_mpi_window_t window);

/* ---------------------------------------------------------------------------------------- */
/* Sharing existing buffers                                                                 */

/** Every node peer's buffer, opened in this process. */
typedef struct memarea_mpi_shared *memarea_mpi_shared_t;

/** Collective over comm: shares buffer (any pointer in a memarea device allocation or device
 *  pool piece) with the ranks of this rank's node and opens theirs. options may be NULL. */
MEMAREA_API memarea_status memarea_mpi_share(memarea_mpi_shared_t *shared, MPI_Comm comm,
                                             const void *buffer,
                                             const memarea_mpi_options *options);
/** Node rank node_rank's buffer (*ptr) and its bytes to the end of its allocation (*size, may
 *  be NULL). */
MEMAREA_API memarea_status memarea_mpi_shared_get(memarea_mpi_shared_t shared, int node_rank,
                                                  void **ptr, size_t *size);
/** This rank's node rank and its node's size (either pointer may be NULL). */
MEMAREA_API memarea_status memarea_mpi_shared_node_rank(memarea_mpi_shared_t shared,
                                                        int *node_rank, int *node_size);
/** *can_access: 1 when this rank's device reaches node_rank's buffer directly, else 0. */
MEMAREA_API memarea_status memarea_mpi_shared_can_access(memarea_mpi_shared_t shared,
                                                         int node_rank, int *can_access);
/** Collective over the node: closes every peer's buffer and waits until every rank has closed
 *  its own; each may free its buffer afterwards. shared is gone afterwards whatever the status. */
MEMAREA_API memarea_status memarea_mpi_shared_close(memarea_mpi_shared_t shared);

#ifdef __cplusplus
} /* extern "C" */
#endif

#pragma GCC visibility pop

#endif /* MEMAREA_MPI_H */
