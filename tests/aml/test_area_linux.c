/* AML's linux area (aml/area/linux.h) on memarea's host NUMA memory. What the kernel says is
 * the ground truth: get_mempolicy(MPOL_F_ADDR) for the policy of every page (read before any
 * page is touched, to show the policy came first), move_pages for where touched pages are,
 * mincore for whether a page was touched. The machine may have one NUMA node only, so node
 * sets come from the allowed set the kernel reports, and a node outside it is made up.
 * The system calls are made through syscall(2): an AML program does not link libnuma. */
#include <aml.h>
#include <aml/area/linux.h>
#include <memarea/memarea.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

/* --- Kernel helpers ------------------------------------------------------------------------ */

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

static long kernel_mode_at(const void *p, unsigned long nodes[NODE_WORDS]) {
  int mode = -1;
  memset(nodes, 0, NODE_WORDS * sizeof *nodes);
  const long rc = syscall(SYS_get_mempolicy, &mode, nodes,
                          (unsigned long)(NODE_WORDS - 1) * WORD_BITS + 1, p, 2 /* F_ADDR */);
  return rc == 0 ? (mode & ~K_MODE_FLAGS) : -1;
}

/** The kernel's node mask as an aml_bitmap (nodes past AML_BITMAP_MAX do not exist here). */
static void mask_to_bitmap(const unsigned long nodes[NODE_WORDS], struct aml_bitmap *b) {
  aml_bitmap_zero(b);
  aml_bitmap_copy_from_ulong(b, nodes, AML_BITMAP_MAX);
}

/** Whether every page of [p, p+n) has policy mode over exactly the nodes of set (set NULL:
 *  any nodes). */
static int pages_have_policy(const void *p, size_t n, long mode, const struct aml_bitmap *set) {
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
static int has_area_policy(const void *p, size_t n, enum aml_area_linux_policy policy,
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
static int untouched(void *p, size_t n) {
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
static int pages_on(void *p, size_t n, const struct aml_bitmap *set) {
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
static int write_read_random(void *p, size_t n, uint64_t seed) {
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
static int memarea_host_memory(const void *p, size_t n) {
  memarea_allocation_info info;
  memset(&info, 0, sizeof info);
  if (memarea_pointer_get_info(&info, (const char *)p + n - 1) != MEMAREA_SUCCESS) return 0;
  return info.kind == MEMAREA_MEMORY_HOST && info.device == MEMAREA_CPU_DEVICE_ID &&
         info.base == p && info.size >= n;
}

/** Whether memarea knows nothing of p (not in its registry). */
static int unknown_to_memarea(const void *p) {
  memarea_allocation_info info;
  memset(&info, 0, sizeof info);
  const memarea_status s = memarea_pointer_get_info(&info, p);
  return s != MEMAREA_SUCCESS || info.kind == MEMAREA_MEMORY_UNKNOWN;
}

/** A node that this process may not allocate on (bit AML_BITMAP_MAX - 1 if all are allowed). */
static unsigned node_outside_allowed(void) {
  const int last = aml_bitmap_last(&allowed);
  return last + 1 < AML_BITMAP_MAX ? (unsigned)(last + 1) : AML_BITMAP_MAX - 1;
}

/* --- Tests --------------------------------------------------------------------------------- */

static void test_declarations(void) {
  CHECK_EQ(AML_AREA_LINUX_POLICY_DEFAULT, 0);
  CHECK_EQ(AML_AREA_LINUX_POLICY_BIND, 1);
  CHECK_EQ(AML_AREA_LINUX_POLICY_PREFERRED, 2);
  CHECK_EQ(AML_AREA_LINUX_POLICY_INTERLEAVE, 3);
  CHECK_EQ(offsetof(struct aml_area_linux_data, nodeset), 0);
  CHECK_EQ(offsetof(struct aml_area_linux_mmap_options, ptr), 0);
  CHECK(offsetof(struct aml_area_linux_mmap_options, flags) <
        offsetof(struct aml_area_linux_mmap_options, mode));
  CHECK(offsetof(struct aml_area_linux_mmap_options, mode) <
        offsetof(struct aml_area_linux_mmap_options, fd));
  CHECK(offsetof(struct aml_area_linux_mmap_options, fd) <
        offsetof(struct aml_area_linux_mmap_options, offset));
  CHECK(aml_area_linux.ops == &aml_area_linux_ops);
  CHECK(aml_area_linux_ops.mmap != NULL && aml_area_linux_ops.munmap != NULL &&
        aml_area_linux_ops.fprintf != NULL);
  const struct aml_area_linux_data *d = (const struct aml_area_linux_data *)aml_area_linux.data;
  REQUIRE(d != NULL);
  CHECK(d->nodeset == NULL);
  CHECK_EQ(d->policy, AML_AREA_LINUX_POLICY_DEFAULT);
  CHECK_EQ(aml_support_backends(AML_BACKEND_LIBNUMA), 1);
}

/** The ready-made area: memarea host memory, default policy, every size. */
static void test_default_area(void) {
  const size_t sizes[] = {1, 4096, 3 * 4096 + 5, (1u << 20) + 3};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
    const size_t n = sizes[k];
    void *p = aml_area_mmap(&aml_area_linux, n, NULL);
    REQUIRE(p != NULL);
    CHECK_EQ((uintptr_t)p % page, 0);
    CHECK(untouched(p, n));
    CHECK(pages_have_policy(p, n, K_DEFAULT, NULL));
    CHECK(memarea_host_memory(p, n));
    CHECK(write_read_random(p, n, 0x1234 + k));
    CHECK(pages_on(p, n, &allowed));
    CHECK_EQ(aml_area_linux_check_binding((struct aml_area_linux_data *)aml_area_linux.data, p,
                                          n),
             1);
    CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), AML_SUCCESS);
    CHECK(unknown_to_memarea(p));
  }
  /* size 0 and NULL through the generic calls, as AML */
  CHECK(aml_area_mmap(&aml_area_linux, 0, NULL) == NULL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, NULL, 10), AML_SUCCESS);
}

/** Every policy over the allowed set and over each allowed node alone: the kernel holds the
 *  policy on every page before any is touched, the pages land on the set, the data survives,
 *  and memarea's copies and managed-memory calls take the memory. */
static void check_area(const struct aml_bitmap *nodemask, enum aml_area_linux_policy policy) {
  const struct aml_bitmap *set = nodemask ? nodemask : &allowed;
  struct aml_area *area = (struct aml_area *)0x1;
  REQUIRE(aml_area_linux_create(&area, nodemask, policy) == AML_SUCCESS);
  REQUIRE(area != NULL && area != (struct aml_area *)0x1);
  CHECK(area->ops == &aml_area_linux_ops);
  struct aml_area_linux_data *data = (struct aml_area_linux_data *)area->data;
  REQUIRE(data != NULL && data->nodeset != NULL);
  CHECK_EQ(data->policy, policy);
  /* the data's libnuma node set holds exactly the chosen nodes */
  struct aml_bitmap held;
  aml_bitmap_zero(&held);
  aml_bitmap_copy_from_ulong(&held, data->nodeset->maskp, data->nodeset->size);
  CHECK_EQ(aml_bitmap_isequal(&held, set), 1);

  const size_t sizes[] = {3 * 4096 + 5, (1u << 20) + 3};
  for (size_t k = 0; k < 2; ++k) {
    const size_t n = sizes[k];
    void *p = aml_area_mmap(area, n, NULL);
    REQUIRE(p != NULL);
    CHECK(untouched(p, n));
    CHECK(has_area_policy(p, n, policy, set));
    CHECK(memarea_host_memory(p, n));
    CHECK(write_read_random(p, n, 77 + k + 10 * (unsigned)policy));
    CHECK(pages_on(p, n, policy == AML_AREA_LINUX_POLICY_DEFAULT ? &allowed : set));
    CHECK(has_area_policy(p, n, policy, set)); /* touching does not change it */
    CHECK_EQ(aml_area_linux_check_binding(data, p, n), 1);

    /* memarea copies it, both ways */
    unsigned char *copy = malloc(n);
    REQUIRE(copy != NULL);
    CHECK_EQ(memarea_memcpy(copy, p, n), MEMAREA_SUCCESS);
    CHECK(memcmp(copy, p, n) == 0);
    memset(copy, 0x5c, n);
    CHECK_EQ(memarea_memcpy(p, copy, n), MEMAREA_SUCCESS);
    CHECK(memcmp(copy, p, n) == 0);
    free(copy);

    /* managed-memory advice: preferring a node changes the policy, unset puts the area's back */
    const int node = aml_bitmap_first(set);
    CHECK_EQ(memarea_mem_advise_host_numa(p, n, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, node),
             MEMAREA_SUCCESS);
    struct aml_bitmap one;
    aml_bitmap_zero(&one);
    aml_bitmap_set(&one, (unsigned)node);
    CHECK(pages_have_policy(p, n, K_PREFERRED, &one));
    CHECK_EQ(memarea_mem_advise_host_numa(p, n, MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
                                          node),
             MEMAREA_SUCCESS);
    CHECK(has_area_policy(p, n, policy, set));
    CHECK_EQ(memarea_mem_prefetch_host_numa_async(p, n, node, NULL), MEMAREA_SUCCESS);
    CHECK(pages_on(p, n, &one));

    CHECK_EQ(aml_area_munmap(area, p, n), AML_SUCCESS);
    CHECK(unknown_to_memarea(p));
  }
  aml_area_linux_destroy(&area);
  CHECK(area == NULL);
}

static void test_policies(void) {
  const enum aml_area_linux_policy policies[] = {
      AML_AREA_LINUX_POLICY_DEFAULT, AML_AREA_LINUX_POLICY_BIND, AML_AREA_LINUX_POLICY_PREFERRED,
      AML_AREA_LINUX_POLICY_INTERLEAVE};
  for (int k = 0; k < 4; ++k) {
    check_area(NULL, policies[k]);
    check_area(&allowed, policies[k]);
    int tried = 0;
    for (int n = aml_bitmap_first(&allowed); n >= 0 && n < AML_BITMAP_MAX && tried < 4; ++n) {
      if (aml_bitmap_isset(&allowed, (unsigned)n) != 1) continue;
      struct aml_bitmap one;
      aml_bitmap_zero(&one);
      aml_bitmap_set(&one, (unsigned)n);
      check_area(&one, policies[k]);
      ++tried;
    }
  }
}

static void test_create_errors(void) {
  struct aml_area *area = (struct aml_area *)0x1;
  struct aml_bitmap mask;

  /* a node outside the allowed set: -AML_EDOM, also with allowed nodes beside it */
  aml_bitmap_zero(&mask);
  aml_bitmap_set(&mask, node_outside_allowed());
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_BIND), -AML_EDOM);
  CHECK(area == NULL);
  aml_bitmap_copy(&mask, &allowed);
  aml_bitmap_set(&mask, AML_BITMAP_MAX - 1);
  area = (struct aml_area *)0x1;
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_INTERLEAVE), -AML_EDOM);
  CHECK(area == NULL);

  /* no node, no area pointer, policies that do not exist */
  aml_bitmap_zero(&mask);
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_BIND), -AML_EINVAL);
  CHECK(area == NULL);
  CHECK_EQ(aml_area_linux_create(NULL, NULL, AML_AREA_LINUX_POLICY_BIND), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_create(&area, NULL, (enum aml_area_linux_policy)4), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_create(&area, NULL, (enum aml_area_linux_policy)-1), -AML_EINVAL);
  CHECK(area == NULL);

  /* destroy tolerates NULL, and never frees the ready-made area */
  aml_area_linux_destroy(NULL);
  area = NULL;
  aml_area_linux_destroy(&area);
  struct aml_area *ready = &aml_area_linux;
  aml_area_linux_destroy(&ready);
  CHECK(ready == NULL);
  CHECK(aml_area_linux.ops == &aml_area_linux_ops);

  /* a data whose policy is garbage cannot map */
  struct aml_area_linux_data bad = {NULL, (enum aml_area_linux_policy)9};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_ops.mmap((struct aml_area_data *)&bad, page, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_ops.mmap(NULL, page, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
}

/** Options asking for plain private anonymous memory get memarea host memory at the hint. */
static void test_options_plain_with_hint(void) {
  /* a free address: reserve and release a range, then ask for its middle */
  char *hole = mmap(NULL, 16 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(hole != MAP_FAILED);
  REQUIRE(munmap(hole, 16 * page) == 0);
  struct aml_area_linux_mmap_options o = {hole + 4 * page, MAP_PRIVATE | MAP_ANONYMOUS,
                                          PROT_READ | PROT_WRITE, -1, 0};
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, NULL, AML_AREA_LINUX_POLICY_BIND) == AML_SUCCESS);
  void *p = aml_area_mmap(area, 2 * page, (struct aml_area_mmap_options *)&o);
  REQUIRE(p != NULL);
  CHECK(p == hole + 4 * page);
  CHECK(memarea_host_memory(p, 2 * page));
  CHECK(untouched(p, 2 * page));
  CHECK(has_area_policy(p, 2 * page, AML_AREA_LINUX_POLICY_BIND, &allowed));
  CHECK(write_read_random(p, 2 * page, 99));
  CHECK_EQ(aml_area_munmap(area, p, 2 * page), AML_SUCCESS);
  CHECK(unknown_to_memarea(p));
  aml_area_linux_destroy(&area);
}

/** A file mapped MAP_SHARED through fd: the bytes written appear in the file, the policy is
 *  set, memarea does not record it, munmap refuses a wrong size and frees the right one. */
static void test_options_file_shared(void) {
  char name[] = "/tmp/memarea_aml_linux_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  unlink(name);
  REQUIRE(ftruncate(fd, (off_t)(4 * page)) == 0);
  /* the second page of the file carries a known pattern, to check the offset */
  unsigned char *pattern_page = malloc(page);
  REQUIRE(pattern_page != NULL);
  memset(pattern_page, 0xa7, page);
  REQUIRE(pwrite(fd, pattern_page, page, (off_t)page) == (ssize_t)page);

  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, &allowed, AML_AREA_LINUX_POLICY_BIND) == AML_SUCCESS);
  struct aml_area_linux_mmap_options o = {NULL, MAP_SHARED, PROT_READ | PROT_WRITE, fd, 0};
  const size_t n = 2 * page + 100;
  unsigned char *p = aml_area_mmap(area, n, (struct aml_area_mmap_options *)&o);
  REQUIRE(p != NULL);
  CHECK(unknown_to_memarea(p));
  CHECK(pages_have_policy(p, n, K_BIND, &allowed));
  CHECK_EQ(aml_area_linux_check_binding((struct aml_area_linux_data *)area->data, p, n), 1);
  CHECK_EQ(p[page], 0xa7); /* the file's bytes are there */

  unsigned char *expected = malloc(n);
  REQUIRE(expected != NULL);
  uint64_t state = 4242;
  fill_random(expected, n, &state);
  memcpy(p, expected, n);
  REQUIRE(msync(p, page * 3, MS_SYNC) == 0);
  unsigned char *in_file = malloc(n);
  REQUIRE(in_file != NULL);
  CHECK_EQ(pread(fd, in_file, n, 0), (ssize_t)n);
  CHECK(memcmp(in_file, expected, n) == 0);

  /* refused: a size it was not mapped with, an interior pointer; the mapping stays */
  aml_errno = AML_SUCCESS;
  CHECK_EQ(aml_area_munmap(area, p, n + 1), -AML_EINVAL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_area_munmap(area, p, 3 * page), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(area, p + page, n - page), -AML_EINVAL);
  CHECK(memcmp(p, expected, n) == 0);
  CHECK_EQ(aml_area_munmap(area, p, n), AML_SUCCESS);
  CHECK_EQ(aml_area_munmap(area, p, n), -AML_EINVAL); /* twice */

  /* an offset into the file, read-only */
  struct aml_area_linux_mmap_options ro = {NULL, MAP_SHARED, PROT_READ, fd, (off_t)page};
  const unsigned char *q = aml_area_mmap(area, page, (struct aml_area_mmap_options *)&ro);
  REQUIRE(q != NULL);
  CHECK(memcmp(q, expected + page, page) == 0);
  CHECK_EQ(aml_area_munmap(area, (void *)q, page), AML_SUCCESS);

  /* a bad descriptor: mmap(2)'s failure, nothing recorded */
  struct aml_area_linux_mmap_options bad_fd = {NULL, MAP_SHARED, PROT_READ, 1 << 20, 0};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, page, (struct aml_area_mmap_options *)&bad_fd) == NULL);
  CHECK(aml_errno != AML_SUCCESS);

  free(expected);
  free(in_file);
  free(pattern_page);
  close(fd);
  aml_area_linux_destroy(&area);
}

/** Options memarea does not record: shared anonymous memory, populated private memory (its
 *  pages exist before the policy, which moves them), MAP_FIXED into the caller's reservation,
 *  and MAP_FIXED over memarea's memory (refused). */
static void test_options_other(void) {
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, NULL, AML_AREA_LINUX_POLICY_INTERLEAVE) == AML_SUCCESS);
  const size_t n = 5 * page;

  struct aml_area_linux_mmap_options shared = {NULL, MAP_SHARED | MAP_ANONYMOUS,
                                               PROT_READ | PROT_WRITE, -1, 0};
  void *p = aml_area_mmap(area, n, (struct aml_area_mmap_options *)&shared);
  REQUIRE(p != NULL);
  CHECK(unknown_to_memarea(p));
  CHECK(pages_have_policy(p, n, K_INTERLEAVE, &allowed));
  CHECK(write_read_random(p, n, 5));
  CHECK_EQ(aml_area_munmap(area, p, n), AML_SUCCESS);

  struct aml_area_linux_mmap_options populated = {
      NULL, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, PROT_READ | PROT_WRITE, -1, 0};
  p = aml_area_mmap(area, n, (struct aml_area_mmap_options *)&populated);
  REQUIRE(p != NULL);
  CHECK(pages_have_policy(p, n, K_INTERLEAVE, &allowed));
  CHECK(pages_on(p, n, &allowed));
  CHECK_EQ(aml_area_munmap(area, p, n), AML_SUCCESS);

  /* MAP_FIXED into the caller's own reservation */
  char *reservation = mmap(NULL, 8 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(reservation != MAP_FAILED);
  struct aml_area_linux_mmap_options fixed = {reservation + 2 * page,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                                              PROT_READ | PROT_WRITE, -1, 0};
  p = aml_area_mmap(area, 3 * page, (struct aml_area_mmap_options *)&fixed);
  CHECK(p == reservation + 2 * page);
  if (p) {
    CHECK(pages_have_policy(p, 3 * page, K_INTERLEAVE, &allowed));
    CHECK(write_read_random(p, 3 * page, 6));
    CHECK_EQ(aml_area_munmap(area, p, 3 * page), AML_SUCCESS);
  }
  REQUIRE(munmap(reservation, 8 * page) == 0);

  /* MAP_FIXED over memarea's memory, or over a mapping the area made: refused, data intact */
  void *mine = aml_area_mmap(area, n, NULL);
  REQUIRE(mine != NULL);
  REQUIRE(write_read_random(mine, n, 7));
  unsigned char *before = malloc(n);
  REQUIRE(before != NULL);
  memcpy(before, mine, n);
  fixed.ptr = (char *)mine + page;
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, page, (struct aml_area_mmap_options *)&fixed) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK(memcmp(before, mine, n) == 0);
  CHECK(memarea_host_memory(mine, n));

  void *own = aml_area_mmap(area, n, (struct aml_area_mmap_options *)&shared);
  REQUIRE(own != NULL);
  fixed.ptr = own;
  CHECK(aml_area_mmap(area, page, (struct aml_area_mmap_options *)&fixed) == NULL);
  CHECK_EQ(aml_area_munmap(area, own, n), AML_SUCCESS);
  CHECK_EQ(aml_area_munmap(area, mine, n), AML_SUCCESS);
  free(before);
  aml_area_linux_destroy(&area);
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older C libraries do not name it */
#endif

/** Whether [p, p+n) holds no mapping at all (mincore fails with ENOMEM on every page). */
static int unmapped(const void *p, size_t n) {
  unsigned char vec;
  for (uintptr_t a = (uintptr_t)p; a < (uintptr_t)p + n; a += page)
    if (mincore((void *)a, page, &vec) == 0 || errno != ENOMEM) return 0;
  return 1;
}

/** A fixed address never replaces a mapping that another thread could be making meanwhile:
 *  MAP_FIXED into free address space lands there; MAP_FIXED over a range with a hole (where
 *  any thread's mmap could land between a check and the map) is refused, and so is
 *  MAP_FIXED_NOREPLACE over any mapping; what the caller mapped stays as it was. */
static void test_options_fixed(void) {
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, NULL, AML_AREA_LINUX_POLICY_DEFAULT) == AML_SUCCESS);
  struct aml_area_linux_mmap_options fixed = {NULL, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                                              PROT_READ | PROT_WRITE, -1, 0};

  /* free address space (a range given back just before) */
  char *r = mmap(NULL, 8 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(r != MAP_FAILED);
  REQUIRE(munmap(r, 8 * page) == 0);
  fixed.ptr = r + page;
  void *p = aml_area_mmap(area, 2 * page, (struct aml_area_mmap_options *)&fixed);
  CHECK(p == r + page);
  if (p) {
    CHECK(write_read_random(p, 2 * page, 8));
    CHECK_EQ(aml_area_munmap(area, p, 2 * page), AML_SUCCESS);
  }

  /* the caller's pages 0-1 and 4-7 with data, pages 2-3 a hole */
  r = mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(r != MAP_FAILED);
  REQUIRE(write_read_random(r, 8 * page, 9));
  REQUIRE(munmap(r + 2 * page, 2 * page) == 0);
  unsigned char *before = malloc(8 * page);
  REQUIRE(before != NULL);
  memcpy(before, r, 2 * page);
  memcpy(before + 4 * page, r + 4 * page, 4 * page);

  fixed.ptr = r + page; /* pages 1-4: mapped, hole, hole, mapped */
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, 4 * page, (struct aml_area_mmap_options *)&fixed) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK(unmapped(r + 2 * page, 2 * page));

  struct aml_area_linux_mmap_options noreplace = {
      r + 4 * page, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, PROT_READ | PROT_WRITE,
      -1, 0};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, page, (struct aml_area_mmap_options *)&noreplace) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK(memcmp(before, r, 2 * page) == 0);
  CHECK(memcmp(before + 4 * page, r + 4 * page, 4 * page) == 0);

  /* NOREPLACE into the hole alone lands there; then MAP_FIXED over the whole range, all mapped
   * now, is refused: part of it is the area's own mapping */
  noreplace.ptr = r + 2 * page;
  p = aml_area_mmap(area, 2 * page, (struct aml_area_mmap_options *)&noreplace);
  CHECK(p == r + 2 * page);
  fixed.ptr = r;
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, 8 * page, (struct aml_area_mmap_options *)&fixed) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  if (p) CHECK_EQ(aml_area_munmap(area, p, 2 * page), AML_SUCCESS);
  CHECK(memcmp(before, r, 2 * page) == 0);
  CHECK(memcmp(before + 4 * page, r + 4 * page, 4 * page) == 0);
  REQUIRE(munmap(r, 8 * page) == 0);
  free(before);
  aml_area_linux_destroy(&area);
}

/** munmap frees only what a linux area mapped, with the size it was given. */
static void test_munmap_refusals(void) {
  const size_t n = 3 * page;
  unsigned char *p = aml_area_mmap(&aml_area_linux, n, NULL);
  REQUIRE(p != NULL);
  memset(p, 0x11, n);

  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n - 1), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n + 1), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p + page, 2 * page), -AML_EINVAL);
  CHECK(memarea_host_memory(p, n));
  CHECK_EQ(p[n - 1], 0x11);

  /* malloc'ed memory, a stack address, an address never mapped */
  void *heap = malloc(100);
  REQUIRE(heap != NULL);
  int on_stack = 0;
  CHECK_EQ(aml_area_munmap(&aml_area_linux, heap, 100), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, &on_stack, sizeof on_stack), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, (void *)(uintptr_t)page, page), -AML_EINVAL);
  memset(heap, 1, 100); /* still ours */
  free(heap);

  /* memarea's own host memory that no linux area made */
  void *other = NULL;
  REQUIRE(memarea_host_malloc(&other, n, -1) == MEMAREA_SUCCESS);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, other, n), -AML_EINVAL);
  CHECK(memarea_host_memory(other, n));
  CHECK_EQ(memarea_free(other), MEMAREA_SUCCESS);

  /* a mapping the caller made with mmap(2) itself */
  void *theirs = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(theirs != MAP_FAILED);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, theirs, page), -AML_EINVAL);
  memset(theirs, 2, page);
  munmap(theirs, page);

  /* the direct call refuses NULL and 0 (the generic call treats them as nothing to do) */
  CHECK_EQ(aml_area_linux_munmap(NULL, NULL, page), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_munmap(NULL, p, 0), -AML_EINVAL);

  /* memarea_free takes the area's memory too; the area then refuses it */
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), AML_SUCCESS);
  p = aml_area_mmap(&aml_area_linux, n, NULL);
  REQUIRE(p != NULL);
  CHECK_EQ(memarea_free(p), MEMAREA_SUCCESS);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), -AML_EINVAL);
}

/** aml_area_linux_mmap maps without any policy, whatever the area's data says. */
static void test_mmap_without_binding(void) {
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, NULL, AML_AREA_LINUX_POLICY_BIND) == AML_SUCCESS);
  void *p = aml_area_linux_mmap(area->data, 2 * page, NULL);
  REQUIRE(p != NULL);
  CHECK(pages_have_policy(p, 2 * page, K_DEFAULT, NULL));
  CHECK(memarea_host_memory(p, 2 * page));
  CHECK_EQ(aml_area_linux_check_binding((struct aml_area_linux_data *)area->data, p, 2 * page),
           0);
  CHECK_EQ(aml_area_linux_munmap(area->data, p, 2 * page), AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_mmap(NULL, 0, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_area_linux_destroy(&area);
}

/** mbind and check_binding: true and false cases, ranges split in two, bad arguments. */
static void test_mbind_and_check_binding(void) {
  const size_t n = 4 * page;
  char *p = aml_area_mmap(&aml_area_linux, n, NULL);
  REQUIRE(p != NULL);
  struct aml_area_linux_data bind = {NULL, AML_AREA_LINUX_POLICY_BIND};
  struct aml_area_linux_data interleave = {NULL, AML_AREA_LINUX_POLICY_INTERLEAVE};
  struct aml_area_linux_data preferred = {NULL, AML_AREA_LINUX_POLICY_PREFERRED};
  struct aml_area_linux_data deflt = {NULL, AML_AREA_LINUX_POLICY_DEFAULT};

  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p, n), 0);

  CHECK_EQ(aml_area_linux_mbind(&bind, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_BIND, &allowed));
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&preferred, p, n), 0);

  /* the last page differs: the whole range no longer matches, the first three still do */
  CHECK_EQ(aml_area_linux_mbind(&interleave, p + 3 * page, page), AML_SUCCESS);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, 3 * page), 1);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p + 3 * page, 1), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p + 3 * page - 1, 2), 0);

  /* preferred over one node */
  struct aml_bitmap first_node;
  aml_bitmap_zero(&first_node);
  aml_bitmap_set(&first_node, (unsigned)aml_bitmap_first(&allowed));
  CHECK_EQ(aml_area_linux_mbind(&preferred, p, n), AML_SUCCESS);
  CHECK(has_area_policy(p, n, AML_AREA_LINUX_POLICY_PREFERRED, &allowed));
  CHECK_EQ(aml_area_linux_check_binding(&preferred, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);

  /* DEFAULT resets the policy (AML's mbind passed a node set with MPOL_DEFAULT: EINVAL) */
  CHECK_EQ(aml_area_linux_mbind(&deflt, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_DEFAULT, NULL));
  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 1);

  /* a data whose node set is a created area's (libnuma's struct bitmask) */
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, &first_node, AML_AREA_LINUX_POLICY_BIND) ==
          AML_SUCCESS);
  struct aml_area_linux_data *ad = (struct aml_area_linux_data *)area->data;
  CHECK_EQ(aml_area_linux_mbind(ad, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_BIND, &first_node));
  CHECK_EQ(aml_area_linux_check_binding(ad, p, n), 1);
  if (allowed_count > 1) { /* the whole allowed set is not the first node alone */
    CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  }

  /* the data survives: touching does not change the binding */
  CHECK(write_read_random(p, n, 3));
  CHECK_EQ(aml_area_linux_check_binding(ad, p, n), 1);
  CHECK(pages_on(p, n, &first_node));

  /* bad arguments change nothing and set aml_errno */
  aml_errno = AML_SUCCESS;
  CHECK_EQ(aml_area_linux_mbind(NULL, p, n), -AML_EINVAL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, NULL, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, p, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, p + 1, page), -AML_EINVAL); /* not page-aligned */
  struct aml_area_linux_data garbage = {NULL, (enum aml_area_linux_policy)7};
  CHECK_EQ(aml_area_linux_mbind(&garbage, p, n), -AML_EINVAL);
  CHECK(pages_have_policy(p, n, K_BIND, &first_node));

  CHECK_EQ(aml_area_linux_check_binding(NULL, p, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(ad, NULL, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(ad, p, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(&garbage, p, n), -AML_EINVAL);

  aml_area_linux_destroy(&area);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), AML_SUCCESS);

  /* an unmapped range */
  char *gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(gone != MAP_FAILED);
  REQUIRE(munmap(gone, page) == 0);
  CHECK_EQ(aml_area_linux_check_binding(&deflt, gone, page), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, gone, page), -AML_EINVAL);
}

/** Reads what fprintf wrote to a memory stream. */
static char *printed(const struct aml_area *area, const char *prefix, int *rc) {
  char *text = NULL;
  size_t len = 0;
  FILE *stream = open_memstream(&text, &len);
  REQUIRE(stream != NULL);
  *rc = aml_area_fprintf(stream, prefix, area);
  fclose(stream);
  return text;
}

static int count_lines(const char *text) {
  int lines = 0;
  for (const char *c = text; *c; ++c) lines += *c == '\n';
  return lines;
}

static void test_fprintf(void) {
  int rc = -1;
  char *text = printed(&aml_area_linux, "dflt", &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  CHECK(strstr(text, "dflt: area-linux: ") == text);
  CHECK(strstr(text, "\ndflt: bitmask: 0x0\n") != NULL);
  CHECK(strstr(text, "\ndflt: policy: default\n") != NULL);
  CHECK_EQ(count_lines(text), 3);
  CHECK_EQ(text[strlen(text) - 1], '\n');
  free(text);

  struct aml_area *area = NULL;
  struct aml_bitmap first_node;
  aml_bitmap_zero(&first_node);
  aml_bitmap_set(&first_node, (unsigned)aml_bitmap_first(&allowed));
  REQUIRE(aml_area_linux_create(&area, &first_node, AML_AREA_LINUX_POLICY_INTERLEAVE) ==
          AML_SUCCESS);
  text = printed(area, "mine", &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  char expected[128];
  snprintf(expected, sizeof expected, "mine: area-linux: %p\n", (void *)area->data);
  CHECK(strstr(text, expected) == text);
  snprintf(expected, sizeof expected, "\nmine: bitmask: size: %lu\n",
           ((struct aml_area_linux_data *)area->data)->nodeset->size);
  CHECK(strstr(text, expected) != NULL);
  CHECK(strstr(text, "\nmine: bitmask: maskp: ") != NULL);
  CHECK(strstr(text, "\nmine: policy: interleave\n") != NULL);
  CHECK_EQ(count_lines(text), 4); /* each item on its own line */
  free(text);

  /* NULL prefix prints as "", NULL stream is refused */
  text = printed(area, NULL, &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  CHECK(strstr(text, ": area-linux: ") == text);
  free(text);
  CHECK_EQ(aml_area_fprintf(NULL, "x", area), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_fprintf(area->data, NULL, "x"), -AML_EINVAL);
  aml_area_linux_destroy(&area);
}

/* --- A custom area wrapping the linux area, as AML's first area tutorial builds one -------- */

struct counting_data {
  struct aml_area *inner; /* the linux area that places the pages */
  int maps, unmaps;
};

static void *counting_mmap(const struct aml_area_data *data, size_t size,
                           struct aml_area_mmap_options *opts) {
  struct counting_data *d = (struct counting_data *)data;
  ++d->maps;
  return d->inner->ops->mmap(d->inner->data, size, opts);
}

static int counting_munmap(const struct aml_area_data *data, void *ptr, size_t size) {
  struct counting_data *d = (struct counting_data *)data;
  ++d->unmaps;
  return d->inner->ops->munmap(d->inner->data, ptr, size);
}

static void test_custom_area(void) {
  struct aml_area *custom =
      AML_INNER_MALLOC(struct aml_area, struct aml_area_ops, struct counting_data);
  REQUIRE(custom != NULL);
  custom->ops = AML_INNER_MALLOC_GET_FIELD(custom, 2, struct aml_area, struct aml_area_ops,
                                           struct counting_data);
  custom->data = AML_INNER_MALLOC_GET_FIELD(custom, 3, struct aml_area, struct aml_area_ops,
                                            struct counting_data);
  /* the fields are where a struct would put them, zeroed, and apart from each other */
  CHECK((char *)custom->ops >= (char *)custom + sizeof(struct aml_area));
  CHECK((uintptr_t)custom->ops % sizeof(void *) == 0);
  CHECK((char *)custom->data >= (char *)custom->ops + sizeof(struct aml_area_ops));
  CHECK(custom->ops->mmap == NULL && custom->ops->fprintf == NULL);
  struct counting_data *d = (struct counting_data *)custom->data;
  CHECK(d->inner == NULL && d->maps == 0);

  custom->ops->mmap = counting_mmap;
  custom->ops->munmap = counting_munmap;
  REQUIRE(aml_area_linux_create(&d->inner, NULL, AML_AREA_LINUX_POLICY_INTERLEAVE) ==
          AML_SUCCESS);

  const size_t n = 16 * page;
  void *p = aml_area_mmap(custom, n, NULL);
  REQUIRE(p != NULL);
  CHECK_EQ(d->maps, 1);
  CHECK(untouched(p, n));
  CHECK(pages_have_policy(p, n, K_INTERLEAVE, &allowed));
  CHECK(memarea_host_memory(p, n));
  CHECK(write_read_random(p, n, 11));
  CHECK(pages_on(p, n, &allowed));
  CHECK_EQ(aml_area_fprintf(stdout, "custom", custom), -AML_ENOTSUP); /* no fprintf op */
  CHECK_EQ(aml_area_munmap(custom, p, n), AML_SUCCESS);
  CHECK_EQ(d->unmaps, 1);
  aml_area_linux_destroy(&d->inner);
  free(custom);
}

int main(void) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  REQUIRE(aml_init(NULL, NULL) == AML_SUCCESS);

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

  test_declarations();
  test_default_area();
  test_policies();
  test_create_errors();
  test_options_plain_with_hint();
  test_options_file_shared();
  test_options_other();
  test_options_fixed();
  test_munmap_refusals();
  test_mmap_without_binding();
  test_mbind_and_check_binding();
  test_fprintf();
  test_custom_area();
  aml_finalize();
  return check_report("test_area_linux");
}
