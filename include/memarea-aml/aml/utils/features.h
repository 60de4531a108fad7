/* memarea's AML drop-in: which backends this build can serve (aml/utils/features.h). */
#ifndef AML_FEATURES_H
#define AML_FEATURES_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/* Compiled-in support. The CUDA and HIP areas are always there: memarea runs them on whichever
 * of its backends is active (CUDA, HIP or sim devices). OpenCL, Level Zero and hwloc areas are
 * not part of memarea's drop-in. */
#define AML_HAVE_BACKEND_LIBNUMA 1
#define AML_HAVE_BACKEND_CUDA 1
#define AML_HAVE_BACKEND_OPENCL 0
#define AML_HAVE_BACKEND_HWLOC 0
#define AML_HAVE_BACKEND_ZE 0
#define AML_HAVE_BACKEND_HIP 1

#define AML_BACKEND_LIBNUMA (1UL << 1) /**< host NUMA memory (the linux area) */
#define AML_BACKEND_CUDA (1UL << 2)    /**< the CUDA area */
#define AML_BACKEND_HWLOC (1UL << 3)   /**< hwloc areas: never supported here */
#define AML_BACKEND_OPENCL (1UL << 4)  /**< OpenCL areas: never supported here */
#define AML_BACKEND_ZE (1UL << 5)      /**< Level Zero areas: never supported here */
#define AML_BACKEND_HIP (1UL << 6)     /**< the HIP area */

/** 1 when every backend in the mask works now, else 0. CUDA and HIP: memarea's active backend
 *  has at least one device (sim devices count: the areas run on them). LIBNUMA: always. */
int aml_support_backends(const unsigned long backends);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_FEATURES_H */
