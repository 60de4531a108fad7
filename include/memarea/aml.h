/* memarea — AML-compatible generic area API (the parts of AML's <aml.h> that areas use).
 * Programs written against AML's area interface compile and run against memarea unchanged. */
#ifndef MEMAREA_AML_H
#define MEMAREA_AML_H

#include <memarea/memarea.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Error codes; functions return their negation, aml_errno holds the positive value. */
#define AML_SUCCESS 0 /**< success */
#define AML_FAILURE 1 /**< a generic failure (e.g. the backend failed to initialise) */
#define AML_ENOMEM 2  /**< out of memory */
#define AML_EINVAL 3  /**< invalid argument */
#define AML_EDOM 4    /**< value out of range */
#define AML_ENOTSUP 5 /**< not supported (no device, insufficient driver) */
#define AML_EBUSY 6   /**< resource busy */
#define AML_EPERM 7   /**< not permitted */
#define AML_ERROR_MAX 8

/** The calling thread's last AML error (a positive code). Thread-local, unlike AML's global. */
MEMAREA_API int *memarea_aml_errno_location(void);
#define aml_errno (*memarea_aml_errno_location())
/** A description of an AML error code (either sign). */
MEMAREA_API const char *aml_strerror(const int errnum);

/** Opaque implementation data of an area. */
struct aml_area_data;
/** Opaque per-call options (each area implementation has its own struct). */
struct aml_area_mmap_options;

/** An area's operations. */
struct aml_area_ops {
  /** Allocates size bytes; NULL on failure with aml_errno set. */
  void *(*mmap)(const struct aml_area_data *data, size_t size,
                struct aml_area_mmap_options *opts);
  /** Frees what mmap returned; AML_SUCCESS or a negative code. */
  int (*munmap)(const struct aml_area_data *data, void *ptr, size_t size);
  /** Prints the area to stream, each line prefixed. */
  int (*fprintf)(const struct aml_area_data *data, FILE *stream, const char *prefix);
};

/** An area: operations plus their data. */
struct aml_area {
  struct aml_area_ops *ops;
  struct aml_area_data *data;
};

/** Allocates through area->ops->mmap; NULL with aml_errno = AML_EINVAL for a bad area. */
MEMAREA_API void *aml_area_mmap(const struct aml_area *area, size_t size,
                                struct aml_area_mmap_options *opts);
/** Frees through area->ops->munmap; -AML_EINVAL for a bad area. */
MEMAREA_API int aml_area_munmap(const struct aml_area *area, void *ptr, size_t size);
/** Prints through area->ops->fprintf; -AML_EINVAL for a bad area or stream. */
MEMAREA_API int aml_area_fprintf(FILE *stream, const char *prefix, const struct aml_area *area);

#ifdef __cplusplus
}
#endif
#endif /* MEMAREA_AML_H */
