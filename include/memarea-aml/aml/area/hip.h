/* memarea's AML drop-in: AML's HIP area (aml/area/hip.h; seed 004). It runs on memarea's active
 * backend: HIP devices, else CUDA devices, else sim devices. Unlike AML it never changes the
 * calling thread's current device. */
#ifndef AML_AREA_HIP_H
#define AML_AREA_HIP_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include "../../aml.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device memory, visible to one device, not mapped on the host. */
#define AML_AREA_HIP_FLAG_DEFAULT 0
/** Pinned host memory instead of device memory. */
#define AML_AREA_HIP_FLAG_ALLOC_HOST (1 << 0)
/** Managed (unified) memory; ALLOC_HOST and ALLOC_MAPPED are then ignored. */
#define AML_AREA_HIP_FLAG_ALLOC_UNIFIED (1 << 1)
/** Host memory mapped on the device: allocated with ALLOC_HOST, else the options' ptr is
 *  registered (and must not be NULL). */
#define AML_AREA_HIP_FLAG_ALLOC_MAPPED (1 << 2)
/** Visible to every device: attach-global managed memory, or portable host memory. */
#define AML_AREA_HIP_FLAG_ALLOC_GLOBAL (1 << 3)

/** Options of one aml_area_hip_mmap call (pass as struct aml_area_mmap_options *). */
struct aml_area_hip_mmap_options {
  int device; /**< >= 0: allocate on this device instead of the area's (0 included; AML
                   ignores 0, see docs/aml.md); -1: the area's device */
  void *ptr;  /**< ALLOC_MAPPED without ALLOC_HOST: the host range to register */
};

/** The HIP area's operations. */
extern struct aml_area_ops aml_area_hip_ops;
/** Device memory on the calling thread's current device. */
extern struct aml_area aml_area_hip;
/** Managed memory (attached to the host, as AML's) on the calling thread's current device. */
extern struct aml_area aml_area_hip_unified;

/** A HIP area's data (the same fields in the same order as AML's). */
struct aml_area_hip_data {
  int flags;  /**< AML_AREA_HIP_FLAG_* */
  int device; /**< a device ordinal; -1: the calling thread's current device at each mmap */
};

/** Creates an area on device (-1: the current device at each mmap) with flags.
 *  AML_SUCCESS; -AML_FAILURE when the backend cannot count its devices; -AML_EINVAL for area
 *  NULL, device < -1 or >= the device count, or unknown flag bits; -AML_ENOMEM. */
int aml_area_hip_create(struct aml_area **area, const int device, const int flags);
/** Destroys an area made by aml_area_hip_create; *area is NULL afterwards. Its mappings stay
 *  valid. */
void aml_area_hip_destroy(struct aml_area **area);
/** Maps size bytes as area_data says. NULL on failure with aml_errno: AML_ENOTSUP (no device,
 *  no managed memory), AML_EINVAL (bad device or flags, MAPPED without HOST and without
 *  options' ptr), AML_EBUSY, AML_ENOMEM, AML_FAILURE (any other backend error). */
void *aml_area_hip_mmap(const struct aml_area_data *area_data, size_t size,
                         struct aml_area_mmap_options *options);
/** Unmaps what aml_area_hip_mmap returned (area_data is not read): AML_SUCCESS, or
 *  -AML_EINVAL (changing nothing) when ptr is not a live mapping of a HIP or HIP area or size
 *  is not the size it was mapped with. */
int aml_area_hip_munmap(const struct aml_area_data *area_data, void *ptr, const size_t size);
/** Prints the area's device and flags: AML_SUCCESS, -AML_EINVAL for a NULL stream. */
int aml_area_hip_fprintf(const struct aml_area_data *data, FILE *stream, const char *prefix);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_AREA_HIP_H */
