/* memarea — C API of the reports `memarea info --json`, `memarea topo --json` and
 * `memarea ps --json` print, for programs and language bindings (the Python package's
 * memarea.info(), memarea.topo() and memarea.ps()).
 *
 * Each call returns one NUL-terminated JSON document in memory the library allocates, because
 * its length is only known once it is built (and a topology is measured, which a "call again
 * with a larger buffer" protocol would have to do twice). Free it with memarea_string_free. */
#ifndef MEMAREA_REPORT_H
#define MEMAREA_REPORT_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/memarea.h>

#ifdef __cplusplus
extern "C" {
#endif

/** `memarea info --json`: version, backends (found or not, and why), devices and their
 *  properties, host NUMA nodes. *json gets a string to free with memarea_string_free. */
MEMAREA_API memarea_status memarea_info_json(char **json);

/** `memarea topo --json --size size --reps reps`: peer access, links, and the bandwidth and
 *  latency of memarea's copies between every ordered pair of devices (measured now: seconds on
 *  a GPU). size 0 and reps <= 0 take the CLI's defaults (256 MiB and 10; sim 4 MiB and 3).
 *  *json gets a string to free with memarea_string_free. */
MEMAREA_API memarea_status memarea_topo_json(char **json, size_t size, int reps);

/** Flags of memarea_topo_json_ex. */
#define MEMAREA_TOPO_BASELINE 1u /**< also time the bare driver calls by the same method ("raw") */

/** Hears what memarea_topo_json_ex is measuring (e.g. "measuring 0 -> 1"), on the calling
 *  thread, between measurements. */
typedef void (*memarea_topo_progress_fn)(const char *what, void *user);

/** memarea_topo_json with the options of `memarea topo`: flags MEMAREA_TOPO_BASELINE adds a
 *  "raw" object with the same figures for the bare driver calls (cuMemcpyPeerAsync,
 *  cuMemcpyAsync), measured by the same method in the same run; progress (may be NULL) hears
 *  each step, with user. Unknown flags: MEMAREA_ERROR_INVALID_VALUE. docs/topo.md describes the
 *  document and each matrix's "methods" entry. */
MEMAREA_API memarea_status memarea_topo_json_ex(char **json, size_t size, int reps,
                                                unsigned flags,
                                                memarea_topo_progress_fn progress, void *user);

/** `memarea ps --json`: every live process on this machine that uses memarea and published its
 *  usage (those of the caller's user; every user's for root), each with its pid (as it sees
 *  itself, and as the caller sees it where visible and that process holds the lease), command,
 *  figures per device (docs/usage.md), the buffers it exported and who has them open, and what
 *  it imported from whom. device NULL: every device; else that device's figures and sharing only
 *  (MEMAREA_CPU_DEVICE_ID: the host's). *json gets a string to free with memarea_string_free. */
MEMAREA_API memarea_status memarea_ps_json(char **json, const int *device);

/* ---- Allocation tracking and snapshots (docs/usage.md "Tracking" and "Snapshots") ---- */

/** Turns allocation tracking on (nonzero) or off (0): while on, every allocation memarea makes
 *  (areas, pool pieces and blocks, host, managed) keeps a record of its size, kind, device,
 *  pool, stream, time, thread and raw stack until it is freed. Allocations made before it was
 *  turned on have none. Off drops every record. MEMAREA_TRACK=1 turns it on at load. */
MEMAREA_API memarea_status memarea_set_tracking(int on);

/** Whether tracking is on: *on gets 1 or 0. */
MEMAREA_API memarea_status memarea_tracking(int *on);

/** A snapshot of the memory memarea holds (docs/usage.md "Snapshots"): device -1 every device
 *  and the host, else that device. *json gets a string to free with memarea_string_free.
 *  Another device: MEMAREA_ERROR_INVALID_DEVICE. */
MEMAREA_API memarea_status memarea_snapshot_json(char **json, int device);

/* ---- end of tracking and snapshots ---- */

/** Frees a string memarea_info_json or memarea_topo_json returned; NULL does nothing. */
MEMAREA_API void memarea_string_free(char *s);

#ifdef __cplusplus
} /* extern "C" */
#endif

#pragma GCC visibility pop

#endif /* MEMAREA_REPORT_H */
