/* memarea's AML drop-in: AML's linux area (aml/area/linux.h), host memory placed on NUMA nodes
 * by a memory policy.
 *
 * An mmap without options returns memarea's pageable host memory (memarea_pointer_get_info
 * reports MEMAREA_MEMORY_HOST on MEMAREA_CPU_DEVICE_ID; copies and the managed-memory calls take
 * it; memarea_free frees it too), with the area's policy set over its node set before any page
 * is touched. So does an mmap whose options ask for exactly that memory (flags MAP_PRIVATE |
 * MAP_ANONYMOUS, mode PROT_READ | PROT_WRITE, offset 0), their ptr being an address hint. Any
 * other options are the caller's own mmap(2) (file-backed, shared, fixed, other protections or
 * flags): mapped with exactly those arguments, the policy then applied to the pages (moving
 * those already there), and not recorded in memarea, since memarea cannot vouch for such memory
 * (it may be a file, shared with other processes, or not writable); the area keeps a list of
 * them so that its munmap frees exactly what it mapped. A fixed address never replaces another
 * thread's mapping (AML_EINVAL instead): MAP_FIXED replaces only a range that is entirely
 * mapped already (the caller's reservation) and holds no memory that memarea or that list
 * records; over a range with unmapped pages, where another thread could map meanwhile, it maps
 * with MAP_FIXED_NOREPLACE, which the kernel refuses when anything is there by then. docs/aml.md
 * lists the differences from AML. */
#ifndef AML_AREA_LINUX_NUMA_H
#define AML_AREA_LINUX_NUMA_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct aml_area;
struct aml_area_data;
struct aml_area_mmap_options;
struct aml_area_ops;
struct aml_bitmap;
/* libnuma's node set (<numa.h>: { unsigned long size; unsigned long *maskp; }, size in bits),
 * declared here so that this header compiles without libnuma's headers. */
struct bitmask;

/** The linux area's operations: mmap with the area's policy (failing as aml_area_linux_mmap
 *  does, and also with AML_EINVAL for a NULL data, an unknown policy or a node without memory,
 *  or AML_FAILURE, errno set, when the kernel refuses the policy on a caller's own mapping),
 *  aml_area_linux_munmap and aml_area_linux_fprintf. */
extern struct aml_area_ops aml_area_linux_ops;

/** A ready-made linux area: no node set (every allowed node) and the default policy. */
extern struct aml_area aml_area_linux;

/** Where a linux area's pages go. */
enum aml_area_linux_policy {
  /** The process's own policy (MPOL_DEFAULT); the node set is not used. */
  AML_AREA_LINUX_POLICY_DEFAULT,
  /** Only the set's nodes (MPOL_BIND); the allocation fails when they are full. */
  AML_AREA_LINUX_POLICY_BIND,
  /** The set's nodes first, other nodes when they are full: MPOL_PREFERRED for one node,
   *  MPOL_PREFERRED_MANY for several (Linux 5.15+; MPOL_PREFERRED on the lowest node before). */
  AML_AREA_LINUX_POLICY_PREFERRED,
  /** Page by page, round robin over the set's nodes (MPOL_INTERLEAVE). */
  AML_AREA_LINUX_POLICY_INTERLEAVE,
};

/** A linux area's data. */
struct aml_area_linux_data {
  /** The nodes to place pages on; NULL: every node the process may use. */
  struct bitmask *nodeset;
  /** How pages are placed over them. */
  enum aml_area_linux_policy policy;
};

/** Per-call options of the linux area's mmap: mmap(2)'s arguments (see its manual). */
struct aml_area_linux_mmap_options {
  void *ptr;     /**< address hint (or the address, with MAP_FIXED) */
  int flags;     /**< MAP_* flags */
  int mode;      /**< PROT_* protections */
  int fd;        /**< the file to map, or -1 */
  off_t offset;  /**< where in the file the mapping starts */
};

/** Creates a linux area that places pages on the nodes of nodemask (NULL: every node the
 *  process may use) by policy. *area gets the area (NULL on failure). AML_SUCCESS;
 *  -AML_EINVAL for area NULL, an unknown policy or an empty nodemask; -AML_EDOM when nodemask
 *  holds a node outside the set the process may allocate on; -AML_ENOMEM; -AML_FAILURE when the
 *  kernel does not say which nodes are allowed. The area's node set is a libnuma struct bitmask
 *  of numa_num_possible_nodes() bits. Destroy it with aml_area_linux_destroy. */
int aml_area_linux_create(struct aml_area **area, const struct aml_bitmap *nodemask,
                          const enum aml_area_linux_policy policy);

/** Frees an area from aml_area_linux_create (memory it mapped stays mapped) and sets *area to
 *  NULL. Nothing for area or *area NULL. */
void aml_area_linux_destroy(struct aml_area **area);

/** Sets bind's policy over its node set (NULL: every allowed node) on [ptr, ptr + size),
 *  moving the pages already placed elsewhere (MPOL_MF_MOVE). ptr must be page-aligned; size is
 *  rounded up to pages. AML_SUCCESS; -AML_EINVAL for bind or ptr NULL, size 0, an unaligned ptr,
 *  an unknown policy, an empty set or an unmapped range; -AML_FAILURE when the kernel refuses
 *  (errno says why). aml_errno is set on failure. */
int aml_area_linux_mbind(struct aml_area_linux_data *bind, void *ptr, size_t size);

/** Whether every page of [ptr, ptr + size) has the policy area_data describes, as the kernel
 *  reports it (get_mempolicy): 1 or 0. DEFAULT: the default policy. BIND and INTERLEAVE: that
 *  policy over exactly the data's node set (NULL: the allowed nodes) as the kernel narrows it to
 *  the allowed nodes. PREFERRED: one node of the set preferred, or (MPOL_PREFERRED_MANY) the
 *  set. -AML_EINVAL for area_data or ptr NULL, size 0, an unknown policy or an unmapped range;
 *  -AML_ENOMEM (aml_errno set on these). Without NUMA support: 1 when node 0 can satisfy the
 *  data, else 0. One get_mempolicy call per page. */
int aml_area_linux_check_binding(struct aml_area_linux_data *area_data, void *ptr, size_t size);

/** Maps size bytes without setting any policy (area_data is not read): memarea host memory
 *  without options, as described at the top of this header otherwise. NULL with aml_errno set
 *  on failure: AML_EINVAL for size 0, a fixed address the area refuses (see the top of this
 *  header) or mmap(2)'s EINVAL; AML_ENOMEM; AML_EPERM for mmap(2)'s EPERM or EACCES;
 *  AML_FAILURE for its other errors (errno says why). */
void *aml_area_linux_mmap(const struct aml_area_data *area_data, size_t size,
                          struct aml_area_mmap_options *opts);

/** Unmaps what a linux area mapped: ptr and size exactly as mmap returned and was given
 *  (area_data is not read). AML_SUCCESS; -AML_EINVAL, changing nothing, for a pointer or size
 *  that no linux area's mmap returned (AML would munmap(2) it anyway); -AML_FAILURE when
 *  munmap(2) fails. aml_errno is set on failure. memarea host memory may also be freed with
 *  memarea_free; the area then no longer knows it. */
int aml_area_linux_munmap(const struct aml_area_data *area_data, void *ptr, const size_t size);

/** Prints data's settings (its address, node set and policy), one line each, each starting with
 *  prefix and ": ". AML_SUCCESS; -AML_EINVAL for stream NULL. */
int aml_area_linux_fprintf(const struct aml_area_data *data, FILE *stream, const char *prefix);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_AREA_LINUX_NUMA_H */
