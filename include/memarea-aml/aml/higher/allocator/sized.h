/* memarea's AML drop-in: AML's sized allocator (aml/higher/allocator/sized.h): pieces of one
 * size, the chunk size given at creation.
 *
 * Over memarea's CUDA or HIP area (unless the options ask for MAPPED without HOST) the pieces
 * come from a memarea pool on the area's device (the options' device when >= 0; an area of
 * "the current device" means the creating thread's current device at creation), aligned on
 * the largest power of two that divides the chunk size, from 256 to 4096 bytes; so do the
 * linux area's without options, DEFAULT or BIND to one node (a pool of pageable host memory).
 * Over any other
 * area each piece is one aml_area_mmap of the chunk size, kept for reuse when freed. Unlike
 * AML's, it is thread safe. */
#ifndef AML_HIGHER_ALLOCATOR_SIZED_H
#define AML_HIGHER_ALLOCATOR_SIZED_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "../../../aml.h"
#include "../allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The sized allocator's data (the same fields in the same order as AML's). */
struct aml_allocator_sized {
  size_t chunk_size;                  /**< the size of every piece */
  void *free_pools;                   /**< memarea's state of the allocator (opaque) */
  void *occupied_pools;               /**< unused by memarea (NULL) */
  struct aml_area *area;              /**< where memory comes from (outlives the allocator) */
  struct aml_area_mmap_options *opts; /**< the area's options (outlive the allocator) */
};

/** The sized allocator's operations (no chunk calls, as AML's). The variable has the name of
 *  the struct above, as in AML. */
extern struct aml_allocator_ops aml_allocator_sized;

/** Creates a sized allocator of pieces of size bytes over area with opts (both must outlive
 *  it); one piece is allocated and freed at once, so that an area that cannot give one fails
 *  here. AML_SUCCESS; -AML_EINVAL for allocator or area NULL or size 0; -AML_ENOMEM; the
 *  area's code (negative) when it cannot map a piece. */
int aml_allocator_sized_create(struct aml_allocator **allocator, size_t size,
                               struct aml_area *area, struct aml_area_mmap_options *opts);

/** Destroys a sized allocator and frees all its memory, pieces still allocated included (as
 *  AML documents: their pointers dangle afterwards); *allocator is NULL afterwards.
 *  AML_SUCCESS; -AML_EINVAL for a NULL or foreign allocator; the area's code when an munmap
 *  fails, or, over memarea's pool, the code of the pool's failed destroy (the allocator is
 *  destroyed all the same). A pool with pieces still live is destroyed by force, and memarea
 *  reports a failure of that only to its release-failure record (docs/aml.md). */
int aml_allocator_sized_destroy(struct aml_allocator **allocator);

/** The alloc operation: one piece of the chunk size, for any size up to it (0 included). NULL
 *  with aml_errno (positive): AML_EINVAL for data NULL or a size larger than the chunk size
 *  (AML sets -AML_EINVAL, a negative aml_errno), AML_ENOMEM, or the area's code. */
void *aml_allocator_sized_alloc(struct aml_allocator_data *data, size_t size);

/** The free operation: AML_SUCCESS; -AML_EINVAL (nothing changes) for data NULL or a pointer
 *  this allocator did not return or that was freed already. */
int aml_allocator_sized_free(struct aml_allocator_data *data, void *ptr);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_HIGHER_ALLOCATOR_SIZED_H */
