/* memarea's AML drop-in: AML's area allocator (aml/higher/allocator/area.h): each allocation
 * is one piece of the area.
 *
 * Over memarea's CUDA or HIP area (unless the options ask for MAPPED without HOST, which
 * registers the caller's memory) the pieces come from a memarea pool on the area's device (the
 * options' device when >= 0; an area of "the current device" means the creating thread's
 * current device at creation), 256-byte aligned, and a free makes the memory reusable at once
 * by the next allocation; so does the linux area without options, DEFAULT or BIND to one node
 * (a pool of pageable host memory). Over any other area each allocation is one aml_area_mmap with the
 * allocator's options, each free one aml_area_munmap with the size allocated. */
#ifndef AML_HIGHER_ALLOCATOR_AREA_H
#define AML_HIGHER_ALLOCATOR_AREA_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "../../../aml.h"
#include "../allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The area allocator's data (the same fields in the same order as AML's). The area and the
 *  options are the caller's: both must outlive the allocator. */
struct aml_allocator_area_data {
  struct aml_area *area;              /**< where memory comes from */
  struct aml_area_mmap_options *opts; /**< passed to each aml_area_mmap (may be NULL) */
  pthread_mutex_t lock;               /**< initialised; memarea's own state has its own */
  void *chunks;                       /**< memarea's state of the allocator (opaque) */
};

/** The area allocator's operations (no chunk calls, as AML's). */
extern struct aml_allocator_ops aml_allocator_area_ops;

/** Creates an area allocator over area with opts (both must outlive it). AML_SUCCESS;
 *  -AML_EINVAL for out or area NULL; -AML_ENOMEM; -AML_FAILURE when the lock cannot be made. */
int aml_allocator_area_create(struct aml_allocator **out, struct aml_area *area,
                              struct aml_area_mmap_options *opts);

/** Destroys an area allocator (not its area); *allocator is NULL afterwards. -AML_EINVAL for a
 *  NULL or foreign allocator. -AML_EBUSY while allocations of it are live: free them first
 *  (AML's unmaps them, which its documentation does not promise; memarea never frees memory
 *  that may still be in use). Nothing changes on failure. */
int aml_allocator_area_destroy(struct aml_allocator **allocator);

/** The alloc operation: size (> 0) bytes. NULL with aml_errno: AML_EINVAL for data NULL or
 *  size 0, AML_ENOMEM, or the area's code. */
void *aml_allocator_area_alloc(struct aml_allocator_data *data, size_t size);

/** The free operation: AML_SUCCESS; -AML_EINVAL (nothing changes) for data NULL or a pointer
 *  this allocator did not return or freed already; the area's code when its munmap fails. */
int aml_allocator_area_free(struct aml_allocator_data *data, void *ptr);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_HIGHER_ALLOCATOR_AREA_H */
