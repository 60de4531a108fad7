/* memarea's AML drop-in: the parts of AML's <aml.h> that areas and allocators use (AML 0.2.1's
 * API), implemented over memarea by libmemarea-aml. A program written against AML's areas and
 * allocators builds unchanged with `pkg-config --cflags --libs memarea-aml` (or CMake's
 * memarea::aml) and runs on memarea's CUDA, HIP or sim backend. docs/aml.md lists what is
 * implemented, where memarea deliberately differs from AML, and what is absent (layouts,
 * tilings, DMA engines, mappers, replicasets, the OpenCL and Level Zero areas). */
#ifndef AML_H
#define AML_H 1

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

/* The standard headers AML's aml.h brings in, which AML programs rely on. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
/* libnuma's headers, as AML's aml.h includes them, where they are installed (the linux area's
 * data names libnuma's struct bitmask). */
#if defined(__has_include)
#if __has_include(<numa.h>) && __has_include(<numaif.h>)
#include <numa.h>
#include <numaif.h>
#endif
#endif

#include "aml/utils/bitmap.h"
#include "aml/utils/error.h"
#include "aml/utils/features.h"
#include "aml/utils/inner-malloc.h"
#include "aml/utils/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Initialises the library (memarea's backend is chosen at the first call of any function, so
 *  this only checks that it can start). argc and argv are not read and may be NULL.
 *  AML_SUCCESS, or -AML_FAILURE when the backend fails to start. */
int aml_init(int *argc, char **argv[]);
/** Ends the library's use by this program: AML_SUCCESS. Memory still mapped stays valid. */
int aml_finalize(void);

/** An area implementation's data, opaque to the generic API. */
struct aml_area_data;
/** Per-call mmap options; each area implementation defines its own struct. */
struct aml_area_mmap_options;

/** An area's operations. */
struct aml_area_ops {
  /** Maps size (> 0) bytes; NULL with aml_errno set on failure. opts may be NULL. */
  void *(*mmap)(const struct aml_area_data *data, size_t size,
                struct aml_area_mmap_options *opts);
  /** Unmaps what mmap returned: AML_SUCCESS or a negative AML error code. */
  int (*munmap)(const struct aml_area_data *data, void *ptr, size_t size);
  /** Prints the area's settings to stream, each line starting with prefix. */
  int (*fprintf)(const struct aml_area_data *data, FILE *stream, const char *prefix);
};

/** An area: where memory comes from. */
struct aml_area {
  struct aml_area_ops *ops;   /**< its operations */
  struct aml_area_data *data; /**< its implementation's data */
};

/** Maps size bytes from area. Size 0: NULL, aml_errno unchanged (as AML). area NULL (or without
 *  ops): NULL, aml_errno AML_EINVAL; an area without mmap: AML_ENOTSUP. */
void *aml_area_mmap(const struct aml_area *area, size_t size, struct aml_area_mmap_options *opts);
/** Unmaps what aml_area_mmap returned. ptr NULL or size 0: AML_SUCCESS, nothing done (as AML).
 *  area NULL (or without ops): -AML_EINVAL; an area without munmap: -AML_ENOTSUP. */
int aml_area_munmap(const struct aml_area *area, void *ptr, size_t size);
/** Prints area through its fprintf (prefix NULL: ""). -AML_EINVAL for a NULL stream, area or
 *  ops (AML asserts); -AML_ENOTSUP for an area without fprintf. */
int aml_area_fprintf(FILE *stream, const char *prefix, const struct aml_area *area);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_H */
