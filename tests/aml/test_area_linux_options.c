/* AML's linux area (aml/area/linux.h) on memarea's host NUMA memory: the mmap options (a
 * hint, a file mapped shared, what memarea does not record, fixed addresses) and munmap's
 * refusals. What the kernel says is the ground truth (linux_util.h). The area's policies and
 * the rest of its calls: test_area_linux.c. */
#include <aml.h>
#include <aml/area/linux.h>
#include <memarea/memarea.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "linux_util.h"

/* --- Tests --------------------------------------------------------------------------------- */

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

int main(void) {
  REQUIRE(aml_init(NULL, NULL) == AML_SUCCESS);
  linux_util_init();
  test_options_plain_with_hint();
  test_options_file_shared();
  test_options_other();
  test_options_fixed();
  test_munmap_refusals();
  aml_finalize();
  return check_report("test_area_linux_options");
}
