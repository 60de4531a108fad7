/* memarea — AML-compatible Hip area (seed 004, aml/area/hip.h). The area runs on memarea's
 * active backend: Hip devices when present, else the other GPU backend's, else sim devices. */
#ifndef MEMAREA_AML_AREA_HIP_H
#define MEMAREA_AML_AREA_HIP_H

#include <memarea/aml.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Device memory, visible to one device, not mapped on the host. */
#define AML_AREA_HIP_FLAG_DEFAULT 0
/** Allocate on the host (pinned) instead of the device. */
#define AML_AREA_HIP_FLAG_ALLOC_HOST (1 << 0)
/** Unified (managed) memory; ALLOC_HOST and ALLOC_MAPPED are then ignored. */
#define AML_AREA_HIP_FLAG_ALLOC_UNIFIED (1 << 1)
/** Host memory mapped on the device; with ALLOC_HOST it is allocated, else options.ptr is
 *  registered (and must not be NULL). */
#define AML_AREA_HIP_FLAG_ALLOC_MAPPED (1 << 2)
/** Visible to all devices: attach global for unified memory, portable for host memory. */
#define AML_AREA_HIP_FLAG_ALLOC_GLOBAL (1 << 3)

/** Implementation data of a Hip area. */
struct aml_area_hip_data {
  int device; /**< a device ordinal, or < 0 for the current device at each mmap */
  int flags;  /**< AML_AREA_HIP_FLAG_* */
};

/** Options of aml_area_hip_mmap (pass as struct aml_area_mmap_options *). */
struct aml_area_hip_mmap_options {
  int device; /**< > 0 selects the device (0 does not: AML compatibility; see docs/areas.md) */
  void *ptr;  /**< host memory to map when ALLOC_MAPPED is set without ALLOC_HOST */
};

/** Creates an area. Returns AML_SUCCESS, -AML_FAILURE when the device count cannot be read,
 *  -AML_EINVAL for device >= the count or unknown flag bits, -AML_ENOMEM when the area
 *  cannot be allocated. */
MEMAREA_API int aml_area_hip_create(struct aml_area **area, const int device, const int flags);
/** Destroys an area made by aml_area_hip_create; *area is NULL afterwards. */
MEMAREA_API void aml_area_hip_destroy(struct aml_area **area);
/** Allocates; NULL on failure with aml_errno AML_ENOTSUP, AML_EINVAL, AML_EBUSY, AML_ENOMEM or
 *  AML_FAILURE. The calling thread's current device is unchanged. */
MEMAREA_API void *aml_area_hip_mmap(const struct aml_area_data *area_data, size_t size,
                                   struct aml_area_mmap_options *options);
/** Frees what aml_area_hip_mmap returned: AML_SUCCESS, or -AML_EINVAL for a pointer (or size)
 *  that is not a live allocation. area_data is ignored. */
MEMAREA_API int aml_area_hip_munmap(const struct aml_area_data *area_data, void *ptr,
                                   const size_t size);
/** Prints the area's device and flags. */
MEMAREA_API int aml_area_hip_fprintf(const struct aml_area_data *data, FILE *stream,
                                    const char *prefix);

/** The Hip area operations. */
MEMAREA_API extern struct aml_area_ops aml_area_hip_ops;
/** Default area: device memory on the current device, one device, not mapped. */
MEMAREA_API extern struct aml_area aml_area_hip;
/** Unified memory on the current device, attached globally. */
MEMAREA_API extern struct aml_area aml_area_hip_unified;

#ifdef __cplusplus
}
#endif
#endif
