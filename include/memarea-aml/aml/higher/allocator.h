/* memarea's AML drop-in: AML's generic allocator API (aml/higher/allocator.h).
 *
 * An allocator hands out pieces of memory drawn from an area, faster than one area mmap per
 * piece. memarea's three allocators (area.h, buddy.h, sized.h) draw from a memarea pool
 * (docs/pools.md) when their area is one of memarea's CUDA or HIP areas, or AML's linux area
 * without options and with the DEFAULT policy or BIND to one node (a pool of pageable host
 * memory): an allocation and a free then take tens of nanoseconds and never call the driver
 * once the pool holds memory. Over any other area they work as AML's do, through aml_area_mmap
 * and aml_area_munmap.
 * docs/aml.md lists where they differ from AML. */
#ifndef AML_HIGHER_ALLOCATOR_H
#define AML_HIGHER_ALLOCATOR_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "../../aml.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An allocator implementation's data, opaque to the generic API. */
struct aml_allocator_data;
/** An allocator's operations (below). */
struct aml_allocator_ops;

/** An allocator: its data and its operations. */
struct aml_allocator {
  struct aml_allocator_data *data; /**< the implementation's data */
  struct aml_allocator_ops *ops;   /**< its operations */
};

/** A piece of memory handed out with its size, by aml_allocator_alloc_chunk. */
struct aml_allocator_chunk {
  void *ptr;       /**< the memory (read only) */
  size_t size;     /**< its usable size, at least the size asked for (read only) */
  void *user_data; /**< the caller's own pointer, NULL at first (read and write) */
};

/** An allocator's operations. alloc and free are required; the chunk calls are optional
 *  (NULL: aml_allocator_alloc_chunk and aml_allocator_free_chunk answer AML_ENOTSUP). */
struct aml_allocator_ops {
  /** At least size bytes; NULL with aml_errno set (positive) on failure. */
  void *(*alloc)(struct aml_allocator_data *data, size_t size);
  /** Gives back what alloc returned: AML_SUCCESS or a negative AML error code. */
  int (*free)(struct aml_allocator_data *data, void *ptr);
  /** As alloc, but returns the memory with its size and a user_data slot. */
  struct aml_allocator_chunk *(*alloc_chunk)(struct aml_allocator_data *data, size_t size);
  /** Gives back what alloc_chunk returned. */
  int (*free_chunk)(struct aml_allocator_data *data, struct aml_allocator_chunk *chunk);
};

/** At least size bytes from allocator. NULL on failure with aml_errno set (positive):
 *  AML_EINVAL for a NULL allocator (or one without data or ops), else the allocator's code. */
void *aml_alloc(struct aml_allocator *allocator, size_t size);

/** Gives ptr back to the allocator that returned it. ptr NULL: AML_SUCCESS, nothing done.
 *  -AML_EINVAL for a NULL allocator (or one without data or ops), and (memarea's allocators)
 *  for a pointer this allocator did not return or that was freed already: nothing changes. */
int aml_free(struct aml_allocator *allocator, void *ptr);

/** At least size bytes as a chunk (its ptr, size and user_data). NULL on failure with
 *  aml_errno set: AML_EINVAL for a NULL allocator, AML_ENOTSUP when the allocator has no
 *  chunk calls (memarea's area and sized allocators, as AML's), else the allocator's code. */
struct aml_allocator_chunk *aml_allocator_alloc_chunk(struct aml_allocator *allocator,
                                                      size_t size);

/** Gives back a chunk that aml_allocator_alloc_chunk returned; the chunk itself is then gone.
 *  chunk NULL: AML_SUCCESS. -AML_EINVAL for a NULL allocator, -AML_ENOTSUP without chunk
 *  calls, and (memarea's buddy) -AML_EINVAL for a chunk it did not return or freed already. */
int aml_allocator_free_chunk(struct aml_allocator *allocator, struct aml_allocator_chunk *chunk);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_HIGHER_ALLOCATOR_H */
