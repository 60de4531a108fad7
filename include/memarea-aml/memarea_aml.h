/* memarea's extensions to AML's API (libmemarea-aml; not part of AML): an AML area that draws
 * from a memarea pool, so that code written against aml_area_mmap / aml_area_munmap gets a
 * pool's speed without changing its calls. */
#ifndef MEMAREA_AML_H
#define MEMAREA_AML_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "aml.h"

#include <memarea/memarea.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Makes *area an AML area whose mmap draws from pool (memarea_pool_alloc on the default stream
 *  of the pool's device; any pool, pageable host memory included) and whose munmap gives back
 *  to it (size: at most the piece's). mmap options must be NULL. The pool must outlive the area.
 *  AML_SUCCESS; -AML_EINVAL for area or pool NULL; -AML_ENOMEM. */
int memarea_aml_area_create_pooled(struct aml_area **area, memarea_pool_t pool);
/** Destroys an area made by memarea_aml_area_create_pooled (not its pool, nor the memory it
 *  handed out); *area is NULL afterwards. */
void memarea_aml_area_destroy_pooled(struct aml_area **area);
/** The pooled area's operations (to tell such an area by its ops). */
extern struct aml_area_ops memarea_aml_pooled_area_ops;

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* MEMAREA_AML_H */
