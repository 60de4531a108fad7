/* memarea's pooled AML area (memarea_aml.h): aml_area_mmap / aml_area_munmap drawing from a
 * memarea pool of pageable host memory (every configuration) and of device memory (with
 * devices): the pool serves every mmap after its first block, bytes round-trip, munmap refuses
 * what the pool did not hand out, and the create/destroy errors. */
#include <aml.h>
#include <memarea_aml.h>

#include "check.h"

static int round_trip(void *p, size_t n, uint64_t seed) {
  unsigned char in[4096], out[4096];
  if (n > sizeof in) return 0;
  fill_random(in, n, &seed);
  memset(out, 0, n);
  return memarea_memcpy(p, in, n) == MEMAREA_SUCCESS &&
         memarea_memcpy(out, p, n) == MEMAREA_SUCCESS && memcmp(in, out, n) == 0;
}

static void exercise(memarea_pool_t pool, memarea_memory_kind kind) {
  struct aml_area *area = NULL;
  REQUIRE(memarea_aml_area_create_pooled(&area, pool) == AML_SUCCESS);
  REQUIRE(area != NULL);
  CHECK(area->ops == &memarea_aml_pooled_area_ops);
  void *p[100];
  for (int i = 0; i < 100; ++i) {
    p[i] = aml_area_mmap(area, 4096, NULL);
    REQUIRE(p[i] != NULL);
    CHECK(round_trip(p[i], 4096, (uint64_t)i + 1));
  }
  memarea_allocation_info info;
  CHECK_EQ(memarea_pointer_get_info(&info, p[7]), MEMAREA_SUCCESS);
  CHECK_EQ(info.kind, kind);
  CHECK(info.base == p[7]);
  memarea_pool_stats st;
  CHECK_EQ(memarea_pool_get_stats(pool, &st), MEMAREA_SUCCESS);
  CHECK_EQ(st.live_allocations, 100);
  CHECK_EQ(st.driver_allocations, 1); /* 100 mmaps, one block from the driver */
  /* Refused, changing nothing: a size past the piece, a pointer the pool did not hand out,
   * options. */
  CHECK_EQ(aml_area_munmap(area, p[0], 1 << 20), -AML_EINVAL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  int local = 0;
  CHECK_EQ(aml_area_munmap(area, &local, 4), -AML_EINVAL);
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&local;
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(area, 64, opts) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(memarea_pool_get_stats(pool, &st), MEMAREA_SUCCESS);
  CHECK_EQ(st.live_allocations, 100);
  for (int i = 0; i < 100; ++i) CHECK_EQ(aml_area_munmap(area, p[i], 4096), AML_SUCCESS);
  CHECK_EQ(aml_area_munmap(area, p[3], 4096), -AML_EINVAL); /* twice */
  CHECK_EQ(memarea_pool_get_stats(pool, &st), MEMAREA_SUCCESS);
  CHECK_EQ(st.live_allocations, 0);
  /* Reused: the next mmap needs no new block. */
  void *q = aml_area_mmap(area, 4096, NULL);
  REQUIRE(q != NULL);
  CHECK_EQ(memarea_pool_get_stats(pool, &st), MEMAREA_SUCCESS);
  CHECK_EQ(st.driver_allocations, 1);
  CHECK_EQ(aml_area_munmap(area, q, 100), AML_SUCCESS); /* a size up to the piece's */
  char text[256];
  FILE *f = fmemopen(text, sizeof text, "w");
  REQUIRE(f != NULL);
  CHECK_EQ(aml_area_fprintf(f, "x", area), AML_SUCCESS);
  fclose(f);
  CHECK(strstr(text, "x: area-memarea-pool: ") != NULL);
  memarea_aml_area_destroy_pooled(&area);
  CHECK(area == NULL);
  memarea_aml_area_destroy_pooled(&area); /* NULL: nothing */
}

int main(void) {
  struct aml_area *area = (struct aml_area *)&area;
  CHECK_EQ(memarea_aml_area_create_pooled(NULL, NULL), -AML_EINVAL);
  CHECK_EQ(memarea_aml_area_create_pooled(&area, NULL), -AML_EINVAL);
  CHECK(area == NULL);
  memarea_aml_area_destroy_pooled(NULL);

  memarea_pool_t host_pool = NULL;
  REQUIRE(memarea_pool_create(&host_pool, NULL, NULL) == MEMAREA_SUCCESS);
  exercise(host_pool, MEMAREA_MEMORY_HOST);
  CHECK_EQ(memarea_pool_destroy(host_pool), MEMAREA_SUCCESS);

  int devices = 0;
  if (memarea_get_device_count(&devices) == MEMAREA_SUCCESS && devices > 0) {
    memarea_area_t device_area = NULL;
    memarea_pool_t device_pool = NULL;
    REQUIRE(memarea_area_create(&device_area, devices - 1, MEMAREA_AREA_DEFAULT) ==
            MEMAREA_SUCCESS);
    REQUIRE(memarea_pool_create(&device_pool, device_area, NULL) == MEMAREA_SUCCESS);
    exercise(device_pool, MEMAREA_MEMORY_DEVICE);
    CHECK_EQ(memarea_pool_destroy(device_pool), MEMAREA_SUCCESS);
    CHECK_EQ(memarea_area_destroy(device_area), MEMAREA_SUCCESS);
  }
  return check_report("test_pooled_area");
}
