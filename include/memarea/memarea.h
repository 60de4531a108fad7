/* memarea — C API. Places, shares and moves memory across GPUs, the host and processes.
 *
 * Every function returns a memarea_status; on failure memarea_last_error_message() gives a
 * thread-local message that names the driver's own error where one caused it, and the call
 * changed nothing. Usable from C99 and C++. */
#ifndef MEMAREA_MEMAREA_H
#define MEMAREA_MEMAREA_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MEMAREA_API __attribute__((visibility("default")))
#else
#define MEMAREA_API
#endif

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

/** Status of every call. Values are stable. */
typedef enum memarea_status {
  MEMAREA_SUCCESS = 0,
  MEMAREA_ERROR_INVALID_VALUE,             /**< a bad argument (pointer, size, flags) */
  MEMAREA_ERROR_INVALID_DEVICE,            /**< a device ordinal that does not exist or fits not */
  MEMAREA_ERROR_OUT_OF_MEMORY,             /**< the allocation did not fit */
  MEMAREA_ERROR_NOT_SUPPORTED,             /**< the backend or device cannot do this */
  MEMAREA_ERROR_NO_DEVICE,                 /**< no GPU backend has devices */
  MEMAREA_ERROR_NOT_FOUND,                 /**< the pointer or object is not known */
  MEMAREA_ERROR_BUSY,                      /**< the memory is still in use (e.g. imported), or
                                                a stream's or event's work has not completed */
  MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED,   /**< the device cannot reach that peer */
  MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED, /**< enable was called twice */
  MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED,   /**< disable without enable */
  MEMAREA_ERROR_TOO_MANY_PEERS,            /**< the peer-connection budget is spent */
  MEMAREA_ERROR_INVALID_HANDLE,            /**< an IPC handle that is stale or garbage */
  MEMAREA_ERROR_INVALID_CONTEXT,           /**< the driver has no valid context for this */
  MEMAREA_ERROR_NOT_PERMITTED,             /**< the operation is not permitted */
  MEMAREA_ERROR_INITIALIZATION,            /**< the backend failed to initialise */
  MEMAREA_ERROR_UNKNOWN                    /**< a driver error memarea does not know */
} memarea_status;

/** The status's name, e.g. "MEMAREA_ERROR_INVALID_VALUE"; "MEMAREA_ERROR_UNKNOWN" for others. */
MEMAREA_API const char *memarea_status_name(memarea_status s);
/** The calling thread's message for its last failed call ("" when none failed). */
MEMAREA_API const char *memarea_last_error_message(void);
/** Sets the calling thread's last error message (what memarea_last_error_message returns) to
 *  message (NULL: "") and returns status, unchanged. For libraries built on memarea whose own C
 *  functions report failures as memarea does, a status and this thread's message
 *  (libmemarea-aml and libmemarea_mpi do): `return memarea_set_last_error(s, "my_call: why");`. */
MEMAREA_API memarea_status memarea_set_last_error(memarea_status status, const char *message);

/* ---------------------------------------------------------------------------------------- */
/* Backends, devices and streams                                                            */

/** The device id of the host, as hipCpuDeviceId / cudaCpuDeviceId. */
#define MEMAREA_CPU_DEVICE_ID (-1)
/** No device, as hipInvalidDeviceId / cudaInvalidDeviceId. */
#define MEMAREA_INVALID_DEVICE_ID (-2)

/** Number of devices of the active GPU backend (0 when there is none). */
MEMAREA_API memarea_status memarea_get_device_count(int *count);
/** Sets the calling thread's current device. */
MEMAREA_API memarea_status memarea_set_device(int device);
/** The calling thread's current device (0 until set). */
MEMAREA_API memarea_status memarea_get_device(int *device);
/** The active GPU backend: "cuda", "hip", "sim", or "none" when no backend has devices. */
MEMAREA_API memarea_status memarea_backend_name(const char **name);

/** Properties of one device. */
typedef struct memarea_device_properties {
  char name[256];                  /**< the vendor's device name */
  char backend[16];                /**< "cuda", "hip" or "sim" */
  int ordinal;                     /**< the backend's ordinal */
  char pci_bus_id[32];             /**< "0000:17:00.0", or "" when unknown */
  size_t total_memory;             /**< bytes */
  size_t free_memory;              /**< bytes, at the time of the call */
  int unified_addressing;          /**< 1 when host and device share one address space */
  int managed_memory;              /**< 1 when managed memory can be allocated */
  int concurrent_managed_access;   /**< 1 when host and device may touch managed memory at once */
  int pageable_memory_access;      /**< 1 when the device can read pageable host memory */
  int can_map_host_memory;         /**< 1 when pinned host memory can be mapped */
  int virtual_memory_management;   /**< 1 when VMM (cuMemCreate/cuMemMap) is supported */
  int ipc;                         /**< 1 when legacy IPC handles are supported */
  int compute_major, compute_minor;/**< compute capability (sim: 0.0) */
} memarea_device_properties;

/** Fills *props for device. */
MEMAREA_API memarea_status memarea_get_device_properties(memarea_device_properties *props,
                                                         int device);

/** An in-order queue of work on one device; NULL is the device's default stream. */
typedef struct memarea_stream *memarea_stream_t;
/** Creates a stream on the calling thread's current device. */
MEMAREA_API memarea_status memarea_stream_create(memarea_stream_t *stream);
/** Destroys a stream after its work completes. A wrapped stream (memarea_stream_wrap) is not
 *  memarea's to destroy: MEMAREA_ERROR_INVALID_VALUE. */
MEMAREA_API memarea_status memarea_stream_destroy(memarea_stream_t stream);
/** Waits for all work queued on stream (NULL: the current device's default stream). */
MEMAREA_API memarea_status memarea_stream_synchronize(memarea_stream_t stream);
/** Waits for all work on the current device. */
MEMAREA_API memarea_status memarea_device_synchronize(void);
/** Resets device (-1: the current device), as cudaDeviceReset / hipDeviceReset do: the driver
 *  destroys everything its context holds and makes it anew at its next use. MEMAREA_ERROR_BUSY,
 *  changing nothing, while memarea holds anything there: memory of the device (device, pinned,
 *  mapped, registered, managed, shareable, pool pieces, open IPC mappings, frees waiting for
 *  another process), peer access held by a C++ peer::scoped_access, streams or events made on
 *  it; the message lists them. Otherwise drops memarea's caches of the device, disables peer
 *  access to and from it, gives its pools' blocks back (pools stay usable), then resets. No
 *  other thread may use the device meanwhile (docs/areas.md, "Resetting a device"). */
MEMAREA_API memarea_status memarea_device_reset(int device);

/* ---------------------------------------------------------------------------------------- */
/* Areas (seed 004, AML's HIP area)                                                         */

/** Where memory lives and who sees it. */
typedef struct memarea_area *memarea_area_t;
enum {
  MEMAREA_AREA_DEFAULT = 0,       /**< device memory, one device */
  MEMAREA_AREA_HOST = 1u << 0,    /**< pinned host memory */
  MEMAREA_AREA_UNIFIED = 1u << 1, /**< managed memory (HOST and MAPPED are ignored) */
  MEMAREA_AREA_MAPPED = 1u << 2,  /**< host memory mapped on the device */
  MEMAREA_AREA_GLOBAL = 1u << 3   /**< visible to all devices (portable / attach global) */
};
/** Per-call options of memarea_area_mmap; start from MEMAREA_MMAP_OPTIONS_INIT. The library
 *  reads all three members and the structure has no size field, so its layout is the ABI: a
 *  program compiled against a memarea.h whose memarea_mmap_options has no `tag` passes a
 *  smaller structure, which memarea_area_mmap would read past its end. Rebuild such a program
 *  against this header (libmemarea 0.x keeps no ABI between versions: docs/addons.md). */
typedef struct memarea_mmap_options {
  int device; /**< -1: the area's device; any valid ordinal, 0 included, overrides it */
  void *ptr;  /**< MAPPED without HOST: the existing host range to register */
  const void *tag; /**< the allocation's tag (NULL: none): see memarea_pointer_get_tag */
} memarea_mmap_options;
#define MEMAREA_MMAP_OPTIONS_INIT {-1, NULL, NULL}

/** Creates an area on device (-1: the calling thread's current device at each mmap). Another
 *  id that is not a device: MEMAREA_ERROR_INVALID_DEVICE. */
MEMAREA_API memarea_status memarea_area_create(memarea_area_t *area, int device, unsigned flags);
/** Destroys an area; its live allocations stay valid and are freed by munmap or memarea_free. */
MEMAREA_API memarea_status memarea_area_destroy(memarea_area_t area);
/** Allocates size bytes from area. options may be NULL. The thread's device is unchanged. */
MEMAREA_API memarea_status memarea_area_mmap(memarea_area_t area, void **ptr, size_t size,
                                             const memarea_mmap_options *options);
/** Frees what memarea_area_mmap returned; ptr and size must match it exactly. */
MEMAREA_API memarea_status memarea_area_munmap(memarea_area_t area, void *ptr, size_t size);
/** The device pointer of mapped host memory. */
MEMAREA_API memarea_status memarea_host_get_device_pointer(void **device_ptr, void *host_ptr);
/** Base and size of the allocation that contains ptr. */
MEMAREA_API memarea_status memarea_mem_get_address_range(void **base, size_t *size,
                                                         const void *ptr);
/** Copies size bytes between any two memarea pointers (like hipMemcpyDefault); synchronous. */
MEMAREA_API memarea_status memarea_memcpy(void *dst, const void *src, size_t size);

/** What a pointer is. */
typedef enum memarea_memory_kind {
  MEMAREA_MEMORY_UNKNOWN = 0,     /**< not memarea's, and the driver does not know it */
  MEMAREA_MEMORY_DEVICE = 1,      /**< device memory */
  MEMAREA_MEMORY_HOST_PINNED = 2, /**< pinned host memory */
  MEMAREA_MEMORY_MANAGED = 3,     /**< managed (unified) memory */
  MEMAREA_MEMORY_MAPPED = 4,      /**< pinned host memory mapped on devices */
  MEMAREA_MEMORY_REGISTERED = 5,  /**< an existing host range registered (and mapped) */
  MEMAREA_MEMORY_IPC_IMPORTED = 6,/**< memory of another process, opened through IPC */
  MEMAREA_MEMORY_HOST = 7         /**< pageable host memory of memarea's host area */
} memarea_memory_kind;

/** The allocation that contains a pointer. capacity was added last: code built against a
 *  memarea.h without it passes a smaller struct and must be rebuilt (memarea 0.x makes no ABI
 *  promise). */
typedef struct memarea_allocation_info {
  void *base;                 /**< start of the allocation */
  size_t size;                /**< its size in bytes as asked for (a pool piece's allocation
                                   size; IPC-imported memory: the buffer that was exported) */
  memarea_memory_kind kind;   /**< what it is */
  int device;                 /**< the device the memory lives on (IPC-imported memory: the
                                   exporter's), or MEMAREA_CPU_DEVICE_ID for host memory */
  size_t capacity;            /**< bytes usable from base, >= size: a pool piece's rounded
                                   size; equal to size otherwise */
} memarea_allocation_info;
/** Looks up any pointer inside an allocation (memarea's own first, then the driver's). */
MEMAREA_API memarea_status memarea_pointer_get_info(memarea_allocation_info *info,
                                                    const void *ptr);

/* Tags. An allocation may carry a tag, an address its maker chose (memarea_mmap_options.tag,
 * memarea_host_malloc_options.tag), by which a library on top of memarea tells its own
 * allocations from everyone else's: the address of one of its own objects is a tag no other
 * code can pick by accident. memarea never reads through a tag. */

/** *tag: the tag of the allocation that holds ptr (NULL when it was made without one; pool
 *  pieces and IPC mappings have none). MEMAREA_ERROR_NOT_FOUND when ptr is not inside memory
 *  memarea allocated or mapped. */
MEMAREA_API memarea_status memarea_pointer_get_tag(const void **tag, const void *ptr);
/** Frees the allocation that starts at ptr, as memarea_free does, only when it was made with
 *  tag (not NULL) and, for size other than 0, asked for exactly size bytes; anything else is
 *  MEMAREA_ERROR_INVALID_VALUE and frees nothing. The check and the free are one step: another
 *  thread's free and a new allocation at the same address cannot come between them. */
MEMAREA_API memarea_status memarea_free_tagged(void *ptr, size_t size, const void *tag);
/** *overlaps: 1 when a byte of [ptr, ptr+size) lies in memory memarea allocated or mapped (an
 *  area's, a pool's blocks, managed and pageable host memory, IPC and shareable mappings), else
 *  0. For code that maps memory at a fixed address (mmap's MAP_FIXED) and must not replace
 *  memory memarea keeps records of. Advisory: a snapshot of memarea's records, which another
 *  thread may change as soon as it returns (memory mapped but not yet recorded, or freed just
 *  after, is not seen), so a check followed by MAP_FIXED is a race; map with
 *  MAP_FIXED_NOREPLACE where the range may hold free pages. Size 0:
 *  MEMAREA_ERROR_INVALID_VALUE. */
MEMAREA_API memarea_status memarea_range_overlaps(int *overlaps, const void *ptr, size_t size);

/* ---------------------------------------------------------------------------------------- */
/* Pools (docs/pools.md)                                                                    */

/** A stream-ordered pool of memory drawn from one area (or from pageable host memory). */
typedef struct memarea_pool *memarea_pool_t;
/** Options of memarea_pool_create; start from MEMAREA_POOL_OPTIONS_INIT. */
typedef struct memarea_pool_options {
  size_t initial_size;      /**< bytes reserved at creation (0: none until the first alloc) */
  size_t maximum_size;      /**< bytes the pool may reserve at most (0: no limit) */
  size_t release_threshold; /**< free bytes kept when a free empties a block; past it, empty
                                 blocks go back to the driver (SIZE_MAX: keep everything) */
  size_t alignment;         /**< of every allocation: a power of two, 16 to 4096 (0: 256) */
  int host_node;            /**< area NULL: pageable host memory on this NUMA node (-1: any) */
  unsigned flags;           /**< reserved: must be 0 */
} memarea_pool_options;
#define MEMAREA_POOL_OPTIONS_INIT {0, 0, (size_t)-1, 256, -1, 0u}
/** What a pool holds. */
typedef struct memarea_pool_stats {
  size_t bytes_reserved;      /**< from the driver, in blocks */
  size_t bytes_in_use;        /**< in live allocations, in freed ones another process still
                                   has open through IPC (held from reuse until it closes them),
                                   and in freed ones other streams may still use
                                   (memarea_pool_record_stream) */
  size_t peak_bytes_reserved; /**< the most ever reserved */
  size_t peak_bytes_in_use;   /**< the most ever handed out (live, or cached by a thread) */
  size_t driver_allocations;  /**< blocks ever allocated from the driver */
  size_t largest_free_block;  /**< the largest free span any stream may use now */
  size_t live_allocations;    /**< allocations not yet freed (held ones excluded) */
} memarea_pool_stats;
/** Creates a pool over area (NULL: pageable host memory, options->host_node). options may be
 *  NULL (MEMAREA_POOL_OPTIONS_INIT). The area's device (-1: the current device now) is the
 *  pool's. */
MEMAREA_API memarea_status memarea_pool_create(memarea_pool_t *pool, memarea_area_t area,
                                               const memarea_pool_options *options);
/** Destroys a pool and gives its memory back. BUSY (and nothing changes) while allocations of
 *  it are live: free them first. */
MEMAREA_API memarea_status memarea_pool_destroy(memarea_pool_t pool);
/** Allocates size bytes, ordered on stream (NULL: the pool's device's default stream): memory
 *  freed on that stream is reused at once, memory freed on another only after that stream
 *  passed the free. */
MEMAREA_API memarea_status memarea_pool_alloc(memarea_pool_t pool, void **ptr, size_t size,
                                              memarea_stream_t stream);
/** Frees what memarea_pool_alloc returned, ordered on stream (NULL: the default stream): the
 *  memory is reused once work queued on stream before this call has completed. */
MEMAREA_API memarea_status memarea_pool_free(memarea_pool_t pool, void *ptr,
                                             memarea_stream_t stream);
/** memarea_pool_free with the size the caller allocated (sized deallocation):
 *  MEMAREA_ERROR_INVALID_VALUE, freeing nothing, when size is 0 or larger than the piece (its
 *  capacity, memarea_allocation_info.capacity), so that a size mix-up is caught, not absorbed. */
MEMAREA_API memarea_status memarea_pool_free_sized(memarea_pool_t pool, void *ptr, size_t size,
                                                   memarea_stream_t stream);
/** An area whose memarea_area_mmap draws from pool (on the pool's device's default stream) and
 *  whose memarea_area_munmap gives back to it (size: at most the piece's). Device and flags
 *  are the pool's; per-call mmap options are INVALID_VALUE. The pool must outlive the area; a
 *  pool of pageable host memory is INVALID_VALUE. Destroy it with memarea_area_destroy. */
MEMAREA_API memarea_status memarea_area_create_pooled(memarea_area_t *area, memarea_pool_t pool);
/** What area was made with: *device (-1: the calling thread's current device at each mmap),
 *  *flags (MEMAREA_AREA_*), *pool (the pool of memarea_area_create_pooled, else NULL). Any
 *  output may be NULL. */
MEMAREA_API memarea_status memarea_area_get_attributes(memarea_area_t area, int *device,
                                                       unsigned *flags, memarea_pool_t *pool);
/** Gives free blocks back to the driver until at most keep_bytes stay reserved (blocks still
 *  holding live memory, or freed on a stream whose work has not completed, stay). */
MEMAREA_API memarea_status memarea_pool_trim(memarea_pool_t pool, size_t keep_bytes);
/** Copies the pool's counters now into *stats. */
MEMAREA_API memarea_status memarea_pool_get_stats(memarea_pool_t pool, memarea_pool_stats *stats);

/* ---------------------------------------------------------------------------------------- */
/* Memory usage (docs/usage.md)                                                             */

/** What this process holds on one device (or the host), in bytes; docs/usage.md defines each
 *  figure. Set size to sizeof(memarea_memory_usage_t) before the call (MEMAREA_MEMORY_USAGE_INIT
 *  does): later versions append fields, and fill only the size the caller says it has. */
typedef struct memarea_memory_usage_t {
  size_t size;          /**< set by the caller: the struct's size as the caller was built */
  int device;           /**< filled in: the device asked for */
  size_t live;          /**< handed to the program: allocations and pool pieces not yet freed */
  size_t cached;        /**< in pools' blocks, not handed out (free, or kept in a thread's cache) */
  size_t reserved;      /**< taken from the driver: live allocations not from pools + pool blocks */
  size_t exported;      /**< exported through IPC, and not yet freed or still open elsewhere */
  size_t imported;      /**< mapped from other processes (IPC handles, shareable descriptors) */
  size_t peak_live;     /**< the most live since the process started or the peaks' last reset */
  size_t peak_cached;   /**< likewise for cached */
  size_t peak_reserved; /**< likewise for reserved */
  size_t peak_exported; /**< likewise for exported */
  size_t peak_imported; /**< likewise for imported */
} memarea_memory_usage_t;
#define MEMAREA_MEMORY_USAGE_INIT {sizeof(memarea_memory_usage_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
/** This process's usage on device (an ordinal, or MEMAREA_CPU_DEVICE_ID for host memory: here
 *  -1 is the host, not the current device). MEMAREA_ERROR_INVALID_VALUE for a NULL out or a size
 *  smaller than this version's first fields; MEMAREA_ERROR_INVALID_DEVICE for any other device;
 *  *out is unchanged on failure. */
MEMAREA_API memarea_status memarea_memory_usage(int device, memarea_memory_usage_t *out);
/** Sets device's peaks to its figures now (device as memarea_memory_usage). */
MEMAREA_API memarea_status memarea_memory_usage_reset_peaks(int device);

/* ---------------------------------------------------------------------------------------- */
/* Memory limits and out-of-memory handlers (docs/usage.md)                                 */

/** Why an allocation was refused. */
typedef enum memarea_oom_reason {
  MEMAREA_OOM_LIMIT = 0, /**< it would take the device's reserved bytes past its cap */
  MEMAREA_OOM_DRIVER = 1 /**< the driver answered OUT_OF_MEMORY */
} memarea_oom_reason;
/** What an out-of-memory handler is told. */
typedef struct memarea_oom_info {
  int device;                /**< the device whose memory was asked for */
  size_t bytes;              /**< the bytes asked of the driver */
  memarea_oom_reason reason; /**< cap or driver */
  size_t limit;              /**< the device's cap (0: none) */
  size_t reserved;           /**< the device's reserved bytes when it was refused */
} memarea_oom_info;
/** A handler: may free memory; returns nonzero to have the allocation retried once. */
typedef int (*memarea_oom_handler_fn)(const memarea_oom_info *info, void *user_data);
/** Caps what this process reserves (takes from the driver: memarea_memory_usage's reserved) on
 *  device, in bytes; 0 removes the cap. device: an ordinal, or -1 for the calling thread's
 *  current device; MEMAREA_ERROR_INVALID_DEVICE for any other value. Device and managed memory
 *  (areas and pools' blocks) are judged against it; host memory and IPC imports are not. */
MEMAREA_API memarea_status memarea_set_memory_limit(int device, size_t bytes);
/** The cap of device into *bytes (0: none); device as memarea_set_memory_limit.
 *  MEMAREA_ERROR_INVALID_VALUE for a NULL bytes. */
MEMAREA_API memarea_status memarea_get_memory_limit(int device, size_t *bytes);
/** Adds a handler, run (in the order added) when an allocation was refused and still failed
 *  after the device's pools gave back what they cache; *id names it for removal.
 *  MEMAREA_ERROR_INVALID_VALUE for a NULL handler or id. */
MEMAREA_API memarea_status memarea_add_oom_handler(memarea_oom_handler_fn handler,
                                                   void *user_data, unsigned long long *id);
/** Removes a handler; a call running in another thread finishes. MEMAREA_ERROR_INVALID_VALUE
 *  for an id that names no handler. */
MEMAREA_API memarea_status memarea_remove_oom_handler(unsigned long long id);

/* ---------------------------------------------------------------------------------------- */
/* Peer-to-peer (seeds 000 and 003)                                                         */

MEMAREA_API memarea_status memarea_device_can_access_peer(int *can_access, int device,
                                                          int peer_device);
/** Enables access from the calling thread's current device to peer_device's memory. */
MEMAREA_API memarea_status memarea_device_enable_peer_access(int peer_device, unsigned flags);
/** Disables access from the calling thread's current device to peer_device's memory. */
MEMAREA_API memarea_status memarea_device_disable_peer_access(int peer_device);
typedef enum memarea_p2p_attribute {
  MEMAREA_P2P_ATTR_PERFORMANCE_RANK = 1,
  MEMAREA_P2P_ATTR_ACCESS_SUPPORTED,
  MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED,
  MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED
} memarea_p2p_attribute;
MEMAREA_API memarea_status memarea_device_get_p2p_attribute(int *value,
                                                            memarea_p2p_attribute attr,
                                                            int src_device, int dst_device);
MEMAREA_API memarea_status memarea_memcpy_peer(void *dst, int dst_device, const void *src,
                                               int src_device, size_t size);
MEMAREA_API memarea_status memarea_memcpy_peer_async(void *dst, int dst_device, const void *src,
                                                     int src_device, size_t size,
                                                     memarea_stream_t stream);
MEMAREA_API memarea_status memarea_memcpy_async(void *dst, const void *src, size_t size,
                                                memarea_stream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Managed memory (seed 002)                                                                */

#define MEMAREA_MEM_ATTACH_GLOBAL 0x1
#define MEMAREA_MEM_ATTACH_HOST 0x2
#define MEMAREA_MEM_ATTACH_SINGLE 0x4
typedef enum memarea_mem_advice {
  MEMAREA_MEM_ADVISE_SET_READ_MOSTLY = 1,
  MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY = 2,
  MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION = 3,
  MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4,
  MEMAREA_MEM_ADVISE_SET_ACCESSED_BY = 5,
  MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY = 6,
  /** HIP's coarse grain: the range need be coherent only at dispatch boundaries (HIP on AMD;
   *  sim models it; CUDA and HIP's NVIDIA platform: MEMAREA_ERROR_NOT_SUPPORTED). The location
   *  is ignored. */
  MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN = 100,
  /** Back to fine grain, the default (where SET_COARSE_GRAIN is supported). */
  MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN = 101
} memarea_mem_advice;
typedef enum memarea_mem_range_attribute {
  MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY = 1,
  MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION = 2,
  MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY = 3,
  MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION = 4,
  /** One 4-byte memarea_mem_range_coherency_mode (where coarse-grain advice is supported). */
  MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE = 100
} memarea_mem_range_attribute;
/** What MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE answers (HIP's hipMemRangeCoherencyMode). */
typedef enum memarea_mem_range_coherency_mode {
  MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN = 0,    /**< every page fine grain (the default) */
  MEMAREA_MEM_RANGE_COHERENCY_MODE_COARSE_GRAIN = 1,  /**< every page coarse grain */
  MEMAREA_MEM_RANGE_COHERENCY_MODE_INDETERMINATE = 2  /**< the pages differ */
} memarea_mem_range_coherency_mode;
/** Allocates managed memory on the current device; flags GLOBAL or HOST. A size that is not a
 *  multiple of 4 KiB is rounded up internally. */
MEMAREA_API memarea_status memarea_malloc_managed(void **ptr, size_t size, unsigned flags);
/** Frees what memarea_malloc_managed (or any memarea allocation) returned. */
MEMAREA_API memarea_status memarea_free(void *ptr);
MEMAREA_API memarea_status memarea_mem_prefetch_async(const void *ptr, size_t count, int device,
                                                      memarea_stream_t stream);
MEMAREA_API memarea_status memarea_mem_advise(const void *ptr, size_t count,
                                              memarea_mem_advice advice, int device);
MEMAREA_API memarea_status memarea_mem_range_get_attribute(void *data, size_t data_size,
                                                           memarea_mem_range_attribute attribute,
                                                           const void *ptr, size_t count);
MEMAREA_API memarea_status memarea_mem_range_get_attributes(
    void **data, size_t *data_sizes, memarea_mem_range_attribute *attributes,
    size_t num_attributes, const void *ptr, size_t count);
/** Attaches memory to stream (NULL: the current device's default stream); flags GLOBAL, HOST or
 *  SINGLE. A managed allocation of memarea's whole: ptr its start, length 0 or its size. Memory
 *  memarea did not allocate (malloc'd, mmap'd, the stack): where the stream's device has
 *  pageable_memory_access, [ptr, ptr+length) with length not 0, mapped; elsewhere
 *  MEMAREA_ERROR_NOT_SUPPORTED. Any other memory memarea knows: MEMAREA_ERROR_INVALID_VALUE. */
MEMAREA_API memarea_status memarea_stream_attach_mem_async(memarea_stream_t stream, void *ptr,
                                                           size_t length, unsigned flags);
/** As memarea_mem_prefetch_async, to host NUMA node numa_node (CUDA 13's host NUMA location):
 *  managed memory on CUDA 12.2+ drivers (sim: the host; HIP: MEMAREA_ERROR_NOT_SUPPORTED), and
 *  memarea's pageable host memory, whose pages move there. A node that does not exist:
 *  MEMAREA_ERROR_INVALID_DEVICE. */
MEMAREA_API memarea_status memarea_mem_prefetch_host_numa_async(const void *ptr, size_t count,
                                                                int numa_node,
                                                                memarea_stream_t stream);
/** As memarea_mem_advise with host NUMA node numa_node as the location (preferred location,
 *  accessed by); the other advice ignores it but still requires an existing node. */
MEMAREA_API memarea_status memarea_mem_advise_host_numa(const void *ptr, size_t count,
                                                        memarea_mem_advice advice, int numa_node);

/* ---------------------------------------------------------------------------------------- */
/* Pageable host memory on NUMA nodes (docs/managed.md)                                     */

/** Allocates size bytes of pageable host memory, page-aligned and rounded up to whole pages,
 *  bound to NUMA node numa_node (-1: no node, first touch decides). memarea records it (kind
 *  MEMAREA_MEMORY_HOST): memarea_pointer_get_info, the copies and the managed-memory range
 *  calls take it; memarea_free frees it. Works without any GPU. Size 0:
 *  MEMAREA_ERROR_INVALID_VALUE; a node that does not exist (or has no memory):
 *  MEMAREA_ERROR_INVALID_DEVICE. */
MEMAREA_API memarea_status memarea_host_malloc(void **ptr, size_t size, int numa_node);

/** A NUMA memory policy: where the pages of pageable host memory go when first touched. */
typedef enum memarea_host_policy {
  MEMAREA_HOST_POLICY_DEFAULT = 0,   /**< the process's policy (first touch, or numactl's) */
  MEMAREA_HOST_POLICY_BIND = 1,      /**< the set's nodes only (MPOL_BIND) */
  MEMAREA_HOST_POLICY_PREFERRED = 2, /**< the set's nodes first, others when they are full */
  MEMAREA_HOST_POLICY_INTERLEAVE = 3 /**< page by page, round robin over the set */
} memarea_host_policy;
/** Options of memarea_host_malloc_placed; start from MEMAREA_HOST_MALLOC_OPTIONS_INIT. */
typedef struct memarea_host_malloc_options {
  memarea_host_policy policy; /**< the pages' policy */
  const unsigned long *nodes; /**< its node set (ignored for DEFAULT): node n is bit n % B of
                                   word n / B, B the bits of an unsigned long (libnuma's
                                   bitmask and mbind(2)'s layout) */
  size_t node_words;          /**< words at nodes */
  void *hint;                 /**< mmap(2)'s address hint (NULL: none); never MAP_FIXED, so the
                                   memory may land elsewhere */
  const void *tag;            /**< the allocation's tag (NULL: none): see memarea_pointer_get_tag */
} memarea_host_malloc_options;
#define MEMAREA_HOST_MALLOC_OPTIONS_INIT {MEMAREA_HOST_POLICY_DEFAULT, NULL, 0, NULL, NULL}
/** memarea_host_malloc with any policy over any set of nodes (options NULL: the default
 *  policy). The pages get the policy before any is touched, and it is what advice "unset
 *  preferred location" puts back. PREFERRED over several nodes is MPOL_PREFERRED_MANY where the
 *  kernel has it (Linux 5.15), else the lowest node of the set; without NUMA support the
 *  placement is only checked. MEMAREA_ERROR_INVALID_VALUE: size 0, an unknown policy, an empty
 *  node set (other than for DEFAULT), nodes NULL with node_words not 0;
 *  MEMAREA_ERROR_INVALID_DEVICE: a node that does not exist or has no memory. */
MEMAREA_API memarea_status memarea_host_malloc_placed(void **ptr, size_t size,
                                                      const memarea_host_malloc_options *options);

/* ---------------------------------------------------------------------------------------- */
/* Inter-process sharing (seed 001)                                                         */

/** Plain bytes that can travel over any channel. */
typedef struct memarea_ipc_handle {
  unsigned char bytes[128];
} memarea_ipc_handle_t;
#define MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS 0x1
MEMAREA_API memarea_status memarea_ipc_get_mem_handle(memarea_ipc_handle_t *handle, void *ptr);
MEMAREA_API memarea_status memarea_ipc_open_mem_handle(void **ptr, memarea_ipc_handle_t handle,
                                                       unsigned flags);
MEMAREA_API memarea_status memarea_ipc_close_mem_handle(void *ptr);
/** Removes from /dev/shm the shared objects of processes that died without removing them
 *  (killed, aborted, _exit), never a live process's or another user's; *removed (if not NULL)
 *  gets how many. memarea's background thread also does it (docs/ipc.md, "Liveness"). */
MEMAREA_API memarea_status memarea_ipc_remove_stale_objects(size_t *removed);
/** What a sweep of /dev/shm found (memarea_ipc_sweep). */
typedef struct memarea_ipc_sweep_report {
  size_t removed;     /**< objects of dead processes removed (a dry run: to remove) */
  size_t live_owners; /**< processes alive: their objects left alone */
  size_t left_alone;  /**< objects of other users, or whose owner could not be read */
  size_t busy;        /**< dead processes another sweep held on to: the next sweep's */
} memarea_ipc_sweep_report;
/** memarea_ipc_remove_stale_objects with the whole report; dry_run not 0: removes nothing and
 *  counts what it would remove. report may be NULL. */
MEMAREA_API memarea_status memarea_ipc_sweep(memarea_ipc_sweep_report *report, int dry_run);
/** This process's owner id (*owner): the 16 hex digits in the names of the /dev/shm objects it
 *  makes ("memarea-<kind>-<owner>-...", its lease "memarea-lease-<owner>"); 0 until it makes
 *  its first shared object, which draws the id (a child of fork() draws its own). Makes
 *  nothing. INVALID_VALUE for owner NULL. */
MEMAREA_API memarea_status memarea_ipc_owner_id(unsigned long long *owner);

/* ---------------------------------------------------------------------------------------- */
/* Shareable memory and file descriptors (seed 001: what legacy IPC cannot share)           */

/** Allocates at least size bytes that can be exported as a POSIX file descriptor (CUDA VMM;
 *  memfd on sim) on device (-1: the current device); *allocated (may be NULL) gets the rounded
 *  size. MEMAREA_ERROR_NOT_SUPPORTED where the device cannot. */
MEMAREA_API memarea_status memarea_shareable_create(void **ptr, size_t *allocated, size_t size,
                                                    int device);
/** A new file descriptor naming the shareable memory at ptr (its start); the caller closes it. */
MEMAREA_API memarea_status memarea_shareable_export_fd(int *fd, void *ptr);
/** Maps the memory fd names (size as exported) on device (-1: current); fd stays the caller's. */
MEMAREA_API memarea_status memarea_shareable_import_fd(void **ptr, int fd, size_t size,
                                                       int device);
/** Unmaps and releases shareable memory, created or imported. */
MEMAREA_API memarea_status memarea_shareable_release(void *ptr);
/** Sends fd and size payload bytes (at most 65536; payload may be NULL when size is 0) over a
 *  connected Unix socket (SCM_RIGHTS). */
MEMAREA_API memarea_status memarea_ipc_send_fd(int socket, int fd, const void *payload,
                                               size_t size);
/** Receives what memarea_ipc_send_fd sent: *fd (close-on-exec, the caller's to close), the
 *  payload into payload (capacity bytes; larger is MEMAREA_ERROR_INVALID_VALUE) and its size
 *  into *received (may be NULL). */
MEMAREA_API memarea_status memarea_ipc_recv_fd(int socket, int *fd, void *payload,
                                               size_t capacity, size_t *received);
/** memarea_ipc_recv_fd with a deadline: timeout_ms >= 0 bounds the whole message (nothing
 *  arrived: MEMAREA_ERROR_NOT_FOUND; cut short: MEMAREA_ERROR_INVALID_VALUE). With timeout_ms < 0
 *  (and in memarea_ipc_recv_fd) the first byte may take any time and the rest must follow
 *  within 5 s. */
MEMAREA_API memarea_status memarea_ipc_recv_fd_timeout(int socket, int *fd, void *payload,
                                                       size_t capacity, size_t *received,
                                                       int timeout_ms);

/* ---------------------------------------------------------------------------------------- */
/* Memset and pitched 2D copies (docs/copies.md)                                            */

/** Sets count elements of element_size bytes (1, 2 or 4: cuMemsetD8, D16, D32) from dst to
 *  value, in any memory memarea_memcpy takes; returns when done. One call for the three widths,
 *  as memarea::memset: the width is a checked argument, not a name to pick. count 0 sets
 *  nothing. MEMAREA_ERROR_INVALID_VALUE for another element_size, a value wider than an
 *  element, a NULL or misaligned dst, or a range past its allocation. */
MEMAREA_API memarea_status memarea_memset(void *dst, unsigned int value, size_t count,
                                          size_t element_size);
/** memarea_memset queued on stream (NULL: the default stream of dst's device, else of the
 *  current device). Plain host memory is filled by the calling thread once the stream's
 *  earlier work is done. */
MEMAREA_API memarea_status memarea_memset_async(void *dst, unsigned int value, size_t count,
                                                size_t element_size, memarea_stream_t stream);
/** Copies height rows of width bytes, row i from src + i * src_pitch to dst + i * dst_pitch,
 *  between any two pointers memarea_memcpy takes; returns when done. width or height 0 copies
 *  nothing. MEMAREA_ERROR_INVALID_VALUE for NULL pointers, a pitch below width, an extent
 *  ((height - 1) * pitch + width) that overflows or runs past its allocation. */
MEMAREA_API memarea_status memarea_memcpy_2d(void *dst, size_t dst_pitch, const void *src,
                                             size_t src_pitch, size_t width, size_t height);
/** memarea_memcpy_2d queued on stream (NULL: as memarea_memcpy_async's default stream). */
MEMAREA_API memarea_status memarea_memcpy_2d_async(void *dst, size_t dst_pitch, const void *src,
                                                   size_t src_pitch, size_t width, size_t height,
                                                   memarea_stream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Streams made outside memarea, events, pieces used on several streams (docs/streams.md)    */

/** The legacy default stream (CUDA's CU_STREAM_LEGACY; NULL names it too), for
 *  memarea_stream_wrap. */
#define MEMAREA_STREAM_LEGACY ((void *)0x1)
/** The calling thread's per-thread default stream (CUDA's CU_STREAM_PER_THREAD, HIP's
 *  hipStreamPerThread), for memarea_stream_wrap. */
#define MEMAREA_STREAM_PER_THREAD ((void *)0x2)

/** A handle for native stream `native` of device (-1: the calling thread's current device),
 *  made outside memarea (a CUstream or
 *  cudaStream_t, a hipStream_t, torch.cuda.Stream.cuda_stream, cupy's Stream.ptr; on sim,
 *  memarea::sim::create_native_stream), NULL or MEMAREA_STREAM_LEGACY (the legacy default
 *  stream) or MEMAREA_STREAM_PER_THREAD, which every call that takes a memarea_stream_t takes:
 *  their work is queued on `native`. The handle needs no release: it is valid for the life of
 *  the process, and wrapping the same native stream again gives the same handle (pools take
 *  both for one stream). memarea never destroys the native stream (memarea_stream_destroy of
 *  the handle is MEMAREA_ERROR_INVALID_VALUE); its owner must keep it alive while memarea uses
 *  it and call memarea_stream_forget before destroying it. MEMAREA_ERROR_INVALID_DEVICE for a
 *  device that does not exist; MEMAREA_ERROR_INVALID_VALUE where the driver can tell that
 *  native is no live stream (sim and HIP can; CUDA cannot tell a garbage pointer, and may crash
 *  on one) or is another device's. */
MEMAREA_API memarea_status memarea_stream_wrap(memarea_stream_t *stream, void *native,
                                               int device);
/** Before the owner destroys a native stream that memarea used: waits for the work queued on
 *  it and makes every pool forget it (pieces freed on it become free for every stream), as
 *  memarea_stream_destroy does for memarea's streams. The handle stays valid. Nothing for NULL
 *  or a default stream. */
MEMAREA_API memarea_status memarea_stream_forget(memarea_stream_t stream);
/** MEMAREA_SUCCESS once all work queued on stream (NULL: the current device's default stream)
 *  so far has completed; MEMAREA_ERROR_BUSY while some has not. Never blocks. */
MEMAREA_API memarea_status memarea_stream_query(memarea_stream_t stream);
/** The vendor's stream under stream (CUstream, hipStream_t; sim: an opaque pointer), for vendor
 *  calls or kernels queued in order with memarea's work: memarea's own or the wrapped one.
 *  NULL for the default stream. */
MEMAREA_API memarea_status memarea_stream_get_native(void **native, memarea_stream_t stream);

/** A marker in a stream's work (CUDA's and HIP's events). */
typedef struct memarea_event *memarea_event_t;
enum {
  MEMAREA_EVENT_DEFAULT = 0,          /**< timed; a host thread waiting for it may spin */
  MEMAREA_EVENT_BLOCKING_SYNC = 0x1,  /**< a host thread waiting for it blocks */
  MEMAREA_EVENT_DISABLE_TIMING = 0x2, /**< keeps no time; cheaper to record */
  MEMAREA_EVENT_INTERPROCESS = 0x4    /**< MEMAREA_ERROR_NOT_SUPPORTED: memarea shares no events */
};
/** Creates an event on the calling thread's current device; flags MEMAREA_EVENT_* (others:
 *  MEMAREA_ERROR_INVALID_VALUE). */
MEMAREA_API memarea_status memarea_event_create(memarea_event_t *event, unsigned flags);
/** Destroys an event (a pending record still completes). */
MEMAREA_API memarea_status memarea_event_destroy(memarea_event_t event);
/** Captures the work queued on stream so far (NULL: the default stream of the event's device);
 *  a later record replaces the capture. A stream of another device:
 *  MEMAREA_ERROR_INVALID_VALUE. */
MEMAREA_API memarea_status memarea_event_record(memarea_event_t event, memarea_stream_t stream);
/** MEMAREA_SUCCESS once the work of event's latest record has completed (or it was never
 *  recorded); MEMAREA_ERROR_BUSY while it has not (CUDA's CUDA_ERROR_NOT_READY). Never
 *  blocks. */
MEMAREA_API memarea_status memarea_event_query(memarea_event_t event);
/** Waits until the work of event's latest record has completed. */
MEMAREA_API memarea_status memarea_event_synchronize(memarea_event_t event);
/** *ms: milliseconds between the latest records of start and end. MEMAREA_ERROR_INVALID_HANDLE
 *  when either was made with MEMAREA_EVENT_DISABLE_TIMING or never recorded;
 *  MEMAREA_ERROR_BUSY while either's work has not completed. */
MEMAREA_API memarea_status memarea_event_elapsed(float *ms, memarea_event_t start,
                                                 memarea_event_t end);
/** Makes work queued on stream from now on (NULL: the current device's default stream) wait
 *  until the work of event's latest record has completed; event may be another device's. */
MEMAREA_API memarea_status memarea_stream_wait_event(memarea_stream_t stream,
                                                     memarea_event_t event);

/** The live allocation of pool holding ptr (any pointer inside it) is used on stream too
 *  (PyTorch's record_stream): its free waits for the work queued on stream up to the free
 *  before any stream gets the memory again. MEMAREA_ERROR_INVALID_VALUE for a pointer in no
 *  live allocation of pool, a stream of another device, or MEMAREA_STREAM_PER_THREAD;
 *  MEMAREA_ERROR_NOT_SUPPORTED for a pool of pageable host memory. */
MEMAREA_API memarea_status memarea_pool_record_stream(memarea_pool_t pool, void *ptr,
                                                      memarea_stream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Language bindings                                                                        */

/** The PyCapsule destructor of DLPack capsules made in Python (the memarea package): a capsule
 *  destroyed unconsumed (still named "dltensor" or "dltensor_versioned") has its managed
 *  tensor's deleter called, with the Python error indicator saved and restored around it, so
 *  that a consumer that drops it while raising keeps its exception. Only for a Python process,
 *  with the GIL held (as capsule destructors run); elsewhere it does nothing. */
MEMAREA_API void memarea_dlpack_capsule_destructor(void *capsule);

#ifdef __cplusplus
} /* extern "C" */
#endif

#pragma GCC visibility pop

/* Contexts the user makes, in their own header; memarea.h keeps declaring them for its users. */
#include <memarea/context.h>

#endif /* MEMAREA_MEMAREA_H */
