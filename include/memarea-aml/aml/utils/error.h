/* memarea's AML drop-in: AML's error codes (aml/utils/error.h). Functions that return int
 * return AML_SUCCESS or a negative code; functions that return a pointer return NULL and set
 * aml_errno to the positive code. */
#ifndef AML_ERROR_H
#define AML_ERROR_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/** Where the calling thread's aml_errno lives (use aml_errno). */
int *memarea_aml_errno_location(void);
/** The calling thread's last AML error, a positive code. AML keeps one global int; memarea keeps
 *  one per thread, as errno, so that threads cannot overwrite each other's error. */
#define aml_errno (*memarea_aml_errno_location())

/** A description of an AML error code; either sign is accepted. "Unknown error" otherwise. For
 *  the code aml_errno holds after a failure memarea refused, memarea's reason follows
 *  ("Operation not supported: <reason>"), valid until the thread's next aml_strerror call. */
const char *aml_strerror(const int err);
/** Prints "msg:description of aml_errno" and a newline to stderr (as AML does), with memarea's
 *  reason as aml_strerror gives it. */
void aml_perror(const char *msg);

#define AML_SUCCESS 0 /**< success */
#define AML_FAILURE 1 /**< a failure with no better code (the backend failed) */
#define AML_ENOMEM 2  /**< not enough memory */
#define AML_EINVAL 3  /**< an invalid argument */
#define AML_EDOM 4    /**< a value out of its domain (a node outside the allowed set) */
#define AML_ENOTSUP 5 /**< not supported here (no device, no driver support) */
#define AML_EBUSY 6   /**< the resource is busy (allocations still live) */
#define AML_EPERM 7   /**< not permitted */
#define AML_ERROR_MAX 8 /**< one past the largest code */

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_ERROR_H */
