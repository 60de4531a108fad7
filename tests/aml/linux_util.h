/* Helpers of the tests of AML's linux area (test_area_linux*.c): what the kernel says of a
 * range, the ground truth those tests check the area against. get_mempolicy(MPOL_F_ADDR) gives
 * the policy of every page (read before any page is touched, to show the policy came first),
 * move_pages where touched pages are, mincore whether a page was touched or mapped at all. The
 * machine may have one NUMA node only, so node sets come from the allowed set the kernel reports
 * (linux_util_init), and a node outside it is made up. The system calls are made through
 * syscall(2): an AML program does not link libnuma. */
#ifndef MEMAREA_TESTS_AML_LINUX_UTIL_H
#define MEMAREA_TESTS_AML_LINUX_UTIL_H

#include <aml.h>
#include <aml/area/linux.h>
#include <memarea/memarea.h>

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

#define WORD_BITS (8 * (int)sizeof(unsigned long))
#define NODE_WORDS 65 /* 4096 node bits and a spare word: more than any kernel's node count */
#define K_DEFAULT 0
#define K_PREFERRED 1
#define K_BIND 2
#define K_INTERLEAVE 3
#define K_PREFERRED_MANY 5
#define K_MODE_FLAGS ((1 << 15) | (1 << 14) | (1 << 13))

static size_t page;
static struct aml_bitmap allowed; /* the nodes this process may allocate on */
static int allowed_count;

static inline long kernel_mode_at(const void *p, unsigned long nodes[NODE_WORDS]) {
  int mode = -1;
  memset(nodes, 0, NODE_WORDS * sizeof *nodes);
  const long rc = syscall(SYS_get_mempolicy, &mode, nodes,
                          (unsigned long)(NODE_WORDS - 1) * WORD_BITS + 1, p, 2 /* F_ADDR */);
  return rc == 0 ? (mode & ~K_MODE_FLAGS) : -1;
}

/** The kernel's node mask as an aml_bitmap (nodes past AML_BITMAP_MAX do not exist here). */
static inline void mask_to_bitmap(const unsigned long nodes[NODE_WORDS],
                                  struct aml_bitmap *b) {
  aml_bitmap_zero(b);
  aml_bitmap_copy_from_ulong(b, nodes, AML_BITMAP_MAX);
}

/** Whether every page of [p, p+n) has policy mode over exactly the nodes of set (set NULL:
 *  any nodes). */
static inline int pages_have_policy(const void *p, size_t n, long mode,
                                    const struct aml_bitmap *set) {
  unsigned long nodes[NODE_WORDS];
  struct aml_bitmap got;
  const uintptr_t first = (uintptr_t)p / page * page;
  for (uintptr_t a = first; a < (uintptr_t)p + n; a += page) {
    const long m = kernel_mode_at((const void *)a, nodes);
    if (m != mode) {
      fprintf(stderr, "  page %p: mode %ld, expected %ld\n", (void *)a, m, mode);
      return 0;
    }
    mask_to_bitmap(nodes, &got);
    if (set && !aml_bitmap_isequal(&got, set)) {
      fprintf(stderr, "  page %p: node set differs (first %d, expected first %d)\n", (void *)a,
              aml_bitmap_first(&got), aml_bitmap_first(set));
      return 0;
    }
  }
  return 1;
}

/** Whether the kernel placed the area's policy on [p, p+n): for PREFERRED over several nodes,
 *  MPOL_PREFERRED_MANY over the set, or MPOL_PREFERRED on its lowest node on older kernels. */
static inline int has_area_policy(const void *p, size_t n, enum aml_area_linux_policy policy,
                                  const struct aml_bitmap *set) {
  switch (policy) {
    case AML_AREA_LINUX_POLICY_DEFAULT: return pages_have_policy(p, n, K_DEFAULT, NULL);
    case AML_AREA_LINUX_POLICY_BIND: return pages_have_policy(p, n, K_BIND, set);
    case AML_AREA_LINUX_POLICY_INTERLEAVE: return pages_have_policy(p, n, K_INTERLEAVE, set);
    case AML_AREA_LINUX_POLICY_PREFERRED:
      if (aml_bitmap_nset(set) == 1) return pages_have_policy(p, n, K_PREFERRED, set);
      if (pages_have_policy(p, n, K_PREFERRED_MANY, set)) return 1;
      {
        struct aml_bitmap lowest;
        aml_bitmap_zero(&lowest);
        aml_bitmap_set(&lowest, (unsigned)aml_bitmap_first(set));
        return pages_have_policy(p, n, K_PREFERRED, &lowest);
      }
  }
  return 0;
}

/** Whether no page of [p, p+n) is resident yet (never touched). */
static inline int untouched(void *p, size_t n) {
  const uintptr_t first = (uintptr_t)p / page * page;
  const size_t pages = ((uintptr_t)p + n - first + page - 1) / page;
  unsigned char *vec = calloc(pages, 1);
  REQUIRE(vec != NULL);
  REQUIRE(mincore((void *)first, pages * page, vec) == 0);
  int none = 1;
  for (size_t i = 0; i < pages; ++i)
    if (vec[i] & 1) none = 0;
  free(vec);
  return none;
}

/** Whether every (touched) page of [p, p+n) is on a node of set. */
static inline int pages_on(void *p, size_t n, const struct aml_bitmap *set) {
  const uintptr_t first = (uintptr_t)p / page * page;
  const size_t pages = ((uintptr_t)p + n - first + page - 1) / page;
  void **addrs = calloc(pages, sizeof *addrs);
  int *status = calloc(pages, sizeof *status);
  REQUIRE(addrs && status);
  for (size_t i = 0; i < pages; ++i) addrs[i] = (void *)(first + i * page);
  int ok = syscall(SYS_move_pages, 0, (unsigned long)pages, addrs, NULL, status, 0) == 0;
  for (size_t i = 0; ok && i < pages; ++i)
    if (status[i] < 0 || aml_bitmap_isset(set, (unsigned)status[i]) != 1) {
      fprintf(stderr, "  page %p is on node %d\n", addrs[i], status[i]);
      ok = 0;
    }
  free(addrs);
  free(status);
  return ok;
}

/** Writes random bytes to [p, p+n), reads them back byte for byte: 1 when all match. */
static inline int write_read_random(void *p, size_t n, uint64_t seed) {
  unsigned char *expected = malloc(n);
  REQUIRE(expected != NULL);
  uint64_t state = seed;
  fill_random(expected, n, &state);
  memcpy(p, expected, n);
  const unsigned char *got = p;
  int same = 1;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != expected[i]) {
      same = 0;
      break;
    }
  free(expected);
  return same;
}

/** Whether memarea records p as its host memory: base p, at least n bytes. */
static inline int memarea_host_memory(const void *p, size_t n) {
  memarea_allocation_info info;
  memset(&info, 0, sizeof info);
  if (memarea_pointer_get_info(&info, (const char *)p + n - 1) != MEMAREA_SUCCESS) return 0;
  return info.kind == MEMAREA_MEMORY_HOST && info.device == MEMAREA_CPU_DEVICE_ID &&
         info.base == p && info.size >= n;
}

/** Whether memarea knows nothing of p (not in its registry). */
static inline int unknown_to_memarea(const void *p) {
  memarea_allocation_info info;
  memset(&info, 0, sizeof info);
  const memarea_status s = memarea_pointer_get_info(&info, p);
  return s != MEMAREA_SUCCESS || info.kind == MEMAREA_MEMORY_UNKNOWN;
}

/** A node that this process may not allocate on (bit AML_BITMAP_MAX - 1 if all are allowed). */
static inline unsigned node_outside_allowed(void) {
  const int last = aml_bitmap_last(&allowed);
  return last + 1 < AML_BITMAP_MAX ? (unsigned)(last + 1) : AML_BITMAP_MAX - 1;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older C libraries do not name it */
#endif

/** Whether [p, p+n) holds no mapping at all (mincore fails with ENOMEM on every page). */
static inline int unmapped(const void *p, size_t n) {
  unsigned char vec;
  for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + n; a += page)
    if (mincore((void *)a, page, &vec) == 0 || errno != ENOMEM) return 0;
  return 1;
}

/** Reads the page size and the allowed node set (the kernel's MEMS_ALLOWED); stops the program
 *  when the kernel does not say. Call first in main. */
static inline void linux_util_init(void) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned long nodes[NODE_WORDS];
  memset(nodes, 0, sizeof nodes);
  REQUIRE(syscall(SYS_get_mempolicy, NULL, nodes,
                  (unsigned long)(NODE_WORDS - 1) * WORD_BITS + 1, NULL, 4 /* MEMS_ALLOWED */) ==
          0);
  mask_to_bitmap(nodes, &allowed);
  allowed_count = aml_bitmap_nset(&allowed);
  REQUIRE(allowed_count > 0);
  printf("allowed NUMA nodes: %d (first %d, last %d)\n", allowed_count,
         aml_bitmap_first(&allowed), aml_bitmap_last(&allowed));
}

#endif
