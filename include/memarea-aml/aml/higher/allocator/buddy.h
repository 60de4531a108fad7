/* memarea's AML drop-in: AML's buddy allocator (aml/higher/allocator/buddy.h).
 *
 * Over memarea's CUDA or HIP area (unless the options ask for MAPPED without HOST) the buddy
 * allocator draws from a memarea pool on the area's device (the options' device when >= 0; an
 * area of "the current device" means the creating thread's current device at creation): pieces
 * are 256-byte aligned and sized as asked (not rounded to a power of two), and freed memory is
 * reusable at once; so does the linux area without options, DEFAULT or BIND to one node (a
 * pool of pageable host memory). Over any other area it is a buddy allocator as AML's: it maps power-of-two
 * regions, each at least twice the last, and splits and merges power-of-two blocks of at least
 * 64 bytes within them, with the bookkeeping kept on the host (device memory is never read).
 * Both are thread safe. */
#ifndef AML_HIGHER_ALLOCATOR_BUDDY_H
#define AML_HIGHER_ALLOCATOR_BUDDY_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "../../../aml.h"
#include "../allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A low-level buddy allocator: blocks of memory ranges given to it with
 *  buddy_allocator_extend. It maps nothing and takes no lock: one thread at a time. */
struct buddy_allocator;

/** Makes an empty low-level buddy allocator in *out. AML_SUCCESS; -AML_EINVAL for out NULL;
 *  -AML_ENOMEM. */
int buddy_allocator_create(struct buddy_allocator **out);

/** Gives b the range [ptr, ptr + size) to allocate from. size must be a power of two, at
 *  least 64; the range must not overlap one b has. AML_SUCCESS; -AML_EINVAL for b or ptr
 *  NULL, a size 0, not a power of two, below 64 or past the address space, or an overlap;
 *  -AML_ENOMEM. */
int buddy_allocator_extend(struct buddy_allocator *b, void *ptr, size_t size);

/** Destroys a low-level buddy allocator (its ranges are not unmapped); *buddy is NULL
 *  afterwards. -AML_EINVAL for buddy or *buddy NULL; -AML_EBUSY (nothing changes) while
 *  blocks of it are allocated. */
int buddy_allocator_destroy(struct buddy_allocator **buddy);

/** Frees ptr, a block buddy_allocator_alloc returned, and merges it with its free buddies.
 *  AML_SUCCESS; -AML_EINVAL (nothing changes) for b NULL or a pointer that is not an
 *  allocated block of b (never given, freed already, or inside a block). */
int buddy_allocator_free(struct buddy_allocator *b, void *ptr);

/** Allocates a block of the smallest power of two >= size (at least 64 bytes) into *out.
 *  AML_SUCCESS; -AML_EINVAL for b or out NULL or size 0; -AML_ENOMEM when no free block is
 *  that large (nothing changes). */
int buddy_allocator_alloc(struct buddy_allocator *b, void **out, size_t size);

/** The buddy allocator's data (the same fields in the same order as AML's). */
struct aml_allocator_buddy {
  void *pools;                        /**< memarea's state of the allocator (opaque) */
  struct buddy_allocator *allocator;  /**< the low-level allocator over the mapped regions
                                           (NULL when the allocator draws from a pool) */
  pthread_mutex_t lock;               /**< initialised; memarea's own state has its own */
  struct aml_area *area;              /**< where memory comes from (outlives the allocator) */
  struct aml_area_mmap_options *opts; /**< the area's options (outlive the allocator) */
};

/** The buddy allocator's operations (with chunk calls). */
extern struct aml_allocator_ops aml_allocator_buddy_ops;

/** Creates a buddy allocator over area with opts (both must outlive it). AML_SUCCESS;
 *  -AML_EINVAL for allocator or area NULL; -AML_ENOMEM; -AML_FAILURE when the lock cannot be
 *  made. */
int aml_allocator_buddy_create(struct aml_allocator **allocator, struct aml_area *area,
                               struct aml_area_mmap_options *opts);

/** Destroys a buddy allocator and unmaps its memory; *allocator is NULL afterwards.
 *  -AML_EINVAL for a NULL or foreign allocator; -AML_EBUSY (nothing changes) while allocations
 *  or chunks of it are live; the area's code when an munmap fails (the allocator can then only
 *  be destroyed again). */
int aml_allocator_buddy_destroy(struct aml_allocator **allocator);

/** The alloc operation: at least size bytes (size 0: a smallest piece). NULL with aml_errno
 *  (positive): AML_EINVAL for data NULL, AML_ENOMEM, or the area's code. */
void *aml_allocator_buddy_alloc(struct aml_allocator_data *data, size_t size);

/** The free operation: AML_SUCCESS; -AML_EINVAL (nothing changes) for data NULL or a pointer
 *  that aml_allocator_buddy_alloc of this allocator did not return or that was freed already
 *  (a chunk's memory is freed with aml_allocator_free_chunk). */
int aml_allocator_buddy_free(struct aml_allocator_data *data, void *ptr);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_HIGHER_ALLOCATOR_BUDDY_H */
