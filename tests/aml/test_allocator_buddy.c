/* AML's user-level buddy allocator: over the CUDA and HIP areas (a memarea pool) and over a
 * user-defined area (power-of-two regions, each at least twice the last, split into blocks
 * aligned on their size within the region); aml_alloc and aml_free, the chunk calls with
 * their user_data, every documented error (unknown and double frees, destroy while
 * allocations or chunks are live), the area's errors passed on, random bytes in every piece
 * and interleaved random sizes with overlap checks. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <aml/area/linux.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/buddy.h>
#include <memarea/memarea.h>

#include "alloc_util.h"

static int g_devices = 0;

static void test_arguments(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  struct aml_allocator *a = NULL;
  CHECK_EQ(aml_allocator_buddy_create(NULL, &host, NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_buddy_create(&a, NULL, NULL), -AML_EINVAL);
  CHECK(a == NULL);
  CHECK_EQ(aml_allocator_buddy_destroy(NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_buddy_alloc(NULL, 64) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_allocator_buddy_free(NULL, &hs), -AML_EINVAL);

  CHECK(aml_allocator_buddy_ops.alloc == aml_allocator_buddy_alloc);
  CHECK(aml_allocator_buddy_ops.free == aml_allocator_buddy_free);
  CHECK(aml_allocator_buddy_ops.alloc_chunk != NULL);
  CHECK(aml_allocator_buddy_ops.free_chunk != NULL);

  int opts_storage = 0;
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&opts_storage;
  REQUIRE(aml_allocator_buddy_create(&a, &host, opts) == AML_SUCCESS);
  CHECK(a->ops == &aml_allocator_buddy_ops);
  struct aml_allocator_buddy *d = (struct aml_allocator_buddy *)a->data;
  CHECK(d->area == &host);
  CHECK(d->opts == opts);
  CHECK(d->allocator != NULL); /* a user-defined area: the low-level allocator */
  CHECK(pthread_mutex_lock(&d->lock) == 0 && pthread_mutex_unlock(&d->lock) == 0);
  CHECK_EQ(hs.mmaps, 0); /* nothing mapped before the first allocation */
  CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
}

/* Chunks: ptr, size and user_data; freed only through free_chunk, once. */
static void test_chunks(struct aml_allocator *a, int device) {
  struct aml_allocator_chunk *c1 = aml_allocator_alloc_chunk(a, 1000);
  struct aml_allocator_chunk *c2 = aml_allocator_alloc_chunk(a, 0);
  REQUIRE(c1 != NULL && c2 != NULL);
  CHECK(c1->ptr != NULL && c2->ptr != NULL && c1->ptr != c2->ptr);
  CHECK(c1->size >= 1000);
  CHECK(c2->size >= 1);
  CHECK(c1->user_data == NULL && c2->user_data == NULL);
  int tag = 0;
  c1->user_data = &tag;
  CHECK(write_seeded(c1->ptr, 1000, 31, device));
  CHECK(c1->user_data == &tag);
  /* A chunk's memory is freed with free_chunk: aml_free refuses it. */
  CHECK_EQ(aml_free(a, c1->ptr), -AML_EINVAL);
  CHECK(check_seeded(c1->ptr, 1000, 31, device));
  /* Chunks it did not hand out: a copy on the stack, a pointer into a chunk. */
  struct aml_allocator_chunk fake = *c1;
  CHECK_EQ(aml_allocator_free_chunk(a, &fake), -AML_EINVAL);
  CHECK_EQ(aml_allocator_free_chunk(a, (struct aml_allocator_chunk *)((char *)c1 + 1)),
           -AML_EINVAL);
  CHECK(check_seeded(c1->ptr, 1000, 31, device));
  /* Many chunks at once (the table grows), each with its own bytes. */
  struct aml_allocator_chunk *many[100];
  for (int i = 0; i < 100; ++i) {
    many[i] = aml_allocator_alloc_chunk(a, 64 + (size_t)i * 40);
    REQUIRE(many[i] != NULL);
    many[i]->user_data = many + i;
    CHECK(write_seeded(many[i]->ptr, many[i]->size, 1000 + (uint64_t)i, device));
  }
  for (int i = 0; i < 100; ++i) {
    CHECK(many[i]->user_data == many + i);
    CHECK(check_seeded(many[i]->ptr, many[i]->size, 1000 + (uint64_t)i, device));
    CHECK_EQ(aml_allocator_free_chunk(a, many[i]), AML_SUCCESS);
  }
  /* Destroy refuses while a chunk is live. */
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EBUSY);
  REQUIRE(a != NULL);
  CHECK_EQ(aml_allocator_free_chunk(a, c1), AML_SUCCESS);
  CHECK_EQ(aml_allocator_free_chunk(a, c2), AML_SUCCESS);
  /* Twice: the record may be handed out again, but not freed again through this pointer. */
  CHECK_EQ(aml_allocator_free_chunk(a, c1), -AML_EINVAL);
}

static void test_user_area(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_buddy_create(&a, &host, NULL) == AML_SUCCESS);

  /* The first region holds the first allocation: the power of two above it. */
  unsigned char *p = aml_alloc(a, 3000);
  REQUIRE(p != NULL);
  CHECK_EQ(hs.mmaps, 1);
  CHECK_EQ(hs.last_size, 4096);
  CHECK(host_area_contains(&hs, p, 3000));
  uint64_t seed = 5;
  unsigned char bytes[3000];
  fill_random(bytes, sizeof bytes, &seed);
  memcpy(p, bytes, sizeof bytes);
  /* Each new region at least twice the last. */
  unsigned char *q = aml_alloc(a, 100);
  REQUIRE(q != NULL);
  CHECK_EQ(hs.mmaps, 2);
  CHECK_EQ(hs.last_size, 8192);
  CHECK(host_area_contains(&hs, q, 100));
  /* Size 0: a smallest block (64 bytes), from the region already mapped. */
  unsigned char *z = aml_alloc(a, 0);
  CHECK(z != NULL);
  CHECK_EQ(hs.mmaps, 2);
  CHECK((uintptr_t)z % 64 == 0);
  CHECK(memcmp(p, bytes, sizeof bytes) == 0);

  /* Pointers it did not give, inside blocks, freed twice: -AML_EINVAL. */
  CHECK_EQ(aml_free(a, p + 64), -AML_EINVAL);
  CHECK_EQ(aml_free(a, bytes), -AML_EINVAL);
  CHECK_EQ(aml_free(a, z), AML_SUCCESS);
  CHECK_EQ(aml_free(a, z), -AML_EINVAL);
  CHECK(memcmp(p, bytes, sizeof bytes) == 0);

  /* Destroy refuses while allocations are live: nothing unmapped. */
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EBUSY);
  REQUIRE(a != NULL);
  CHECK_EQ(hs.munmaps, 0);
  CHECK(memcmp(p, bytes, sizeof bytes) == 0);
  CHECK_EQ(aml_free(a, p), AML_SUCCESS);
  CHECK_EQ(aml_free(a, q), AML_SUCCESS);

  /* The area's failure and code reach the caller. */
  hs.fail_code = AML_EPERM;
  hs.fail_mmaps = 100;
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 1 << 20) == NULL);
  CHECK_EQ(aml_errno, AML_EPERM);
  CHECK_EQ(hs.fail_mmaps, 99); /* 1 MiB is more than twice the last region: one try */
  hs.fail_mmaps = 0;
  void *big = aml_alloc(a, 1 << 20);
  CHECK(big != NULL);
  CHECK_EQ(hs.last_size, 1 << 20);
  /* The regions full: the next is asked twice the last (2 MiB), halved when the area refuses,
   * down to what the allocation needs. */
  hs.fail_mmaps = 1;
  void *more = aml_alloc(a, 100000);
  CHECK(more != NULL);
  CHECK_EQ(hs.fail_mmaps, 0);
  CHECK_EQ(hs.last_size, 1 << 20);
  CHECK(host_area_contains(&hs, more, 100000));
  CHECK_EQ(aml_free(a, big), AML_SUCCESS);
  CHECK_EQ(aml_free(a, more), AML_SUCCESS);

  test_chunks(a, 0);
  CHECK_EQ(stress_allocator(a, 4096, 1 << 20, 300, 24, 0, 3), 0);
  /* Every region unmapped at destroy, with its size. */
  CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
  CHECK_EQ(hs.live, 0);
  CHECK_EQ(hs.bad_munmaps, 0);

  /* A failing munmap at destroy: its code; destroying again finishes the job. */
  REQUIRE(aml_allocator_buddy_create(&a, &host, NULL) == AML_SUCCESS);
  void *x = aml_alloc(a, 100);
  void *y = aml_alloc(a, 100000);
  REQUIRE(x != NULL && y != NULL);
  CHECK_EQ(aml_free(a, x), AML_SUCCESS);
  CHECK_EQ(aml_free(a, y), AML_SUCCESS);
  CHECK_EQ(hs.live, 2);
  hs.fail_munmaps = 1;
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EPERM);
  REQUIRE(a != NULL);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
  CHECK_EQ(hs.live, 0);
}

static void test_gpu_area(struct aml_area *area, int device, int device_memory) {
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_buddy_create(&a, area, NULL) == AML_SUCCESS);
  const size_t sizes[] = {0, 1, 64, 4096, 4097, 1 << 20, 3 << 20};
  void *ptrs[7];
  for (int i = 0; i < 7; ++i) {
    ptrs[i] = aml_alloc(a, sizes[i]);
    REQUIRE(ptrs[i] != NULL);
    const size_t n = sizes[i] ? sizes[i] : 1;
    memarea_allocation_info info;
    CHECK_EQ(memarea_pointer_get_info(&info, ptrs[i]), MEMAREA_SUCCESS);
    CHECK(info.base == ptrs[i]);
    CHECK(info.size >= n);
    if (device_memory) {
      CHECK_EQ(info.kind, MEMAREA_MEMORY_DEVICE);
      CHECK_EQ(info.device, device);
    }
    CHECK_EQ((uintptr_t)ptrs[i] % 256, 0);
    CHECK(write_seeded(ptrs[i], n, 50 + (uint64_t)i, 1));
  }
  for (int i = 0; i < 7; ++i)
    CHECK(check_seeded(ptrs[i], sizes[i] ? sizes[i] : 1, 50 + (uint64_t)i, 1));
  CHECK_EQ(aml_free(a, (char *)ptrs[5] + 4096), -AML_EINVAL);
  int local = 0;
  CHECK_EQ(aml_free(a, &local), -AML_EINVAL);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EBUSY);
  REQUIRE(a != NULL);
  for (int i = 0; i < 7; ++i)
    CHECK(check_seeded(ptrs[i], sizes[i] ? sizes[i] : 1, 50 + (uint64_t)i, 1));
  for (int i = 0; i < 7; ++i) CHECK_EQ(aml_free(a, ptrs[i]), AML_SUCCESS);
  CHECK_EQ(aml_free(a, ptrs[3]), -AML_EINVAL);

  test_chunks(a, 1);
  /* Chunk memory is pooled memory too. */
  struct aml_allocator_chunk *c = aml_allocator_alloc_chunk(a, 4096);
  REQUIRE(c != NULL);
  memarea_allocation_info info;
  CHECK_EQ(memarea_pointer_get_info(&info, c->ptr), MEMAREA_SUCCESS);
  CHECK(info.base == c->ptr);
  CHECK_EQ(aml_allocator_free_chunk(a, c), AML_SUCCESS);

  CHECK_EQ(stress_allocator(a, 4096, 16 << 20, 60, 8, 1, 17), 0);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
}

static void test_gpu(void) {
  struct aml_allocator *a = NULL;
  if (g_devices == 0) {
    REQUIRE(aml_allocator_buddy_create(&a, &aml_area_cuda, NULL) == AML_SUCCESS);
    aml_errno = AML_SUCCESS;
    CHECK(aml_alloc(a, 4096) == NULL);
    CHECK_EQ(aml_errno, AML_ENOTSUP);
    aml_errno = AML_SUCCESS;
    CHECK(aml_allocator_alloc_chunk(a, 4096) == NULL);
    CHECK_EQ(aml_errno, AML_ENOTSUP);
    CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
    return;
  }
  REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
  test_gpu_area(&aml_area_cuda, 0, 1);
  test_gpu_area(&aml_area_hip, 0, 1);
  struct aml_area *area = NULL;
  REQUIRE(aml_area_hip_create(&area, g_devices - 1, AML_AREA_HIP_FLAG_ALLOC_HOST) ==
          AML_SUCCESS);
  test_gpu_area(area, g_devices - 1, 0);
  aml_area_hip_destroy(&area);
  if (g_devices > 1) {
    struct aml_area_cuda_mmap_options on_last = {g_devices - 1, NULL};
    REQUIRE(aml_allocator_buddy_create(&a, &aml_area_cuda,
                                       (struct aml_area_mmap_options *)&on_last) == AML_SUCCESS);
    void *p = aml_alloc(a, 4096);
    REQUIRE(p != NULL);
    memarea_allocation_info info;
    CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
    CHECK_EQ(info.device, g_devices - 1);
    CHECK_EQ(aml_free(a, p), AML_SUCCESS);
    CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  }
}

/* Over AML's linux area: a pool of pageable host memory for the default policy and a bind to
 * one node (each piece is an allocation of its own to lookup), the area's own mmap otherwise
 * (pieces inside a power-of-two region mapped from the area: lookup gives the region). */
static void test_linux_area(void) {
  struct aml_bitmap node0;
  aml_bitmap_zero(&node0);
  aml_bitmap_set(&node0, 0);
  struct aml_area *bound = NULL, *interleaved = NULL;
  REQUIRE(aml_area_linux_create(&bound, &node0, AML_AREA_LINUX_POLICY_BIND) == AML_SUCCESS);
  REQUIRE(aml_area_linux_create(&interleaved, &node0, AML_AREA_LINUX_POLICY_INTERLEAVE) ==
          AML_SUCCESS);
  struct aml_area *areas[3] = {&aml_area_linux, bound, interleaved};
  for (int i = 0; i < 3; ++i) {
    const int pooled = i < 2;
    struct aml_allocator *a = NULL;
    REQUIRE(aml_allocator_buddy_create(&a, areas[i], NULL) == AML_SUCCESS);
    void *p[4];
    int inside_a_region = 0; /* area path: pieces that do not start a region the area mapped */
    for (int k = 0; k < 4; ++k) {
      p[k] = aml_alloc(a, 4096);
      REQUIRE(p[k] != NULL);
      memset(p[k], 0x11 * (k + 1), 4096); /* host memory: written directly */
    }
    for (int k = 0; k < 4; ++k) {
      memarea_allocation_info info;
      CHECK_EQ(memarea_pointer_get_info(&info, p[k]), MEMAREA_SUCCESS);
      CHECK_EQ(info.kind, MEMAREA_MEMORY_HOST);
      if (pooled) {
        CHECK(info.base == p[k]);
        CHECK(info.size >= 4096 && info.size < 8192);
      } else {
        inside_a_region += info.base != p[k];
      }
      const unsigned char *b = p[k];
      CHECK(b[0] == 0x11 * (k + 1) && b[4095] == 0x11 * (k + 1));
    }
    /* Regions of 4, 8 and 16 KiB: the second 4 KiB of the 8 KiB region is inside one. */
    if (!pooled) CHECK(inside_a_region > 0);
    for (int k = 0; k < 4; ++k) CHECK_EQ(aml_free(a, p[k]), AML_SUCCESS);
    CHECK_EQ(aml_free(a, p[0]), -AML_EINVAL); /* twice */
    CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  }
  aml_area_linux_destroy(&bound);
  aml_area_linux_destroy(&interleaved);
}

int main(int argc, char **argv) {
  REQUIRE(aml_init(&argc, &argv) == AML_SUCCESS);
  if (memarea_get_device_count(&g_devices) != MEMAREA_SUCCESS) g_devices = 0;
  test_arguments();
  test_user_area();
  test_gpu();
  test_linux_area();
  aml_finalize();
  return check_report("test_allocator_buddy");
}
