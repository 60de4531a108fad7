/* AML's sized allocator: over the CUDA and HIP areas (a memarea pool: pieces aligned on the
 * chunk size's largest power of two, 256 to 4096 bytes) and over a user-defined area (one
 * mapping of the chunk size per piece, kept for reuse, all unmapped at destroy); sizes up to
 * the chunk size and the positive AML_EINVAL above it; unknown and double frees; destroy
 * freeing pieces still live (AML documents it) and the device's memory coming back; random
 * bytes in every piece. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/sized.h>
#include <memarea/memarea.h>

#include "alloc_util.h"

static int g_devices = 0;

static void test_arguments(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  struct aml_allocator *a = NULL;
  CHECK_EQ(aml_allocator_sized_create(NULL, 64, &host, NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_sized_create(&a, 0, &host, NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_sized_create(&a, 64, NULL, NULL), -AML_EINVAL);
  CHECK(a == NULL);
  CHECK_EQ(hs.mmaps, 0);
  CHECK_EQ(aml_allocator_sized_destroy(NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_sized_destroy(&a), -AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_sized_alloc(NULL, 64) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_allocator_sized_free(NULL, &hs), -AML_EINVAL);
  /* The operations table has AML's name (the struct's) and no chunk calls. */
  CHECK(aml_allocator_sized.alloc == aml_allocator_sized_alloc);
  CHECK(aml_allocator_sized.free == aml_allocator_sized_free);
  CHECK(aml_allocator_sized.alloc_chunk == NULL);
  CHECK(aml_allocator_sized.free_chunk == NULL);

  int opts_storage = 0;
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&opts_storage;
  REQUIRE(aml_allocator_sized_create(&a, 5000, &host, opts) == AML_SUCCESS);
  CHECK(a->ops == &aml_allocator_sized);
  struct aml_allocator_sized *d = (struct aml_allocator_sized *)a->data;
  CHECK_EQ(d->chunk_size, 5000);
  CHECK(d->area == &host);
  CHECK(d->opts == opts);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_alloc_chunk(a, 64) == NULL);
  CHECK_EQ(aml_errno, AML_ENOTSUP);
  CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
}

static void test_user_area(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  int opts_storage = 0;
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&opts_storage;
  struct aml_allocator *a = NULL;

  /* An area that cannot map a piece fails the creation with its code. */
  hs.fail_code = AML_EPERM;
  hs.fail_mmaps = 1;
  CHECK_EQ(aml_allocator_sized_create(&a, 5000, &host, opts), -AML_EPERM);
  CHECK(a == NULL);

  /* The first piece is mapped at creation, with the options. */
  REQUIRE(aml_allocator_sized_create(&a, 5000, &host, opts) == AML_SUCCESS);
  CHECK_EQ(hs.mmaps, 1);
  CHECK_EQ(hs.last_size, 5000);
  CHECK(hs.last_opts == opts);
  unsigned char *p = aml_alloc(a, 5000);
  REQUIRE(p != NULL);
  CHECK_EQ(hs.mmaps, 1);
  CHECK(host_area_contains(&hs, p, 5000));
  uint64_t seed = 3;
  unsigned char bytes[5000];
  fill_random(bytes, sizeof bytes, &seed);
  memcpy(p, bytes, sizeof bytes);
  /* Smaller sizes (0 included) take a piece; larger: NULL, aml_errno AML_EINVAL (positive). */
  unsigned char *q = aml_alloc(a, 0);
  REQUIRE(q != NULL);
  CHECK_EQ(hs.mmaps, 2);
  CHECK(q + 5000 <= p || p + 5000 <= q);
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 5001) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  /* The area's failure reaches the caller. */
  hs.fail_mmaps = 1;
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EPERM);
  /* Unknown, inside, double: -AML_EINVAL, nothing changes. */
  CHECK_EQ(aml_free(a, bytes), -AML_EINVAL);
  CHECK_EQ(aml_free(a, p + 1), -AML_EINVAL);
  CHECK_EQ(aml_free(a, q), AML_SUCCESS);
  CHECK_EQ(aml_free(a, q), -AML_EINVAL);
  CHECK(memcmp(p, bytes, sizeof bytes) == 0);
  /* A freed piece is kept mapped and handed out again. */
  CHECK_EQ(hs.munmaps, 0);
  unsigned char *again = aml_alloc(a, 1);
  CHECK(again == q);
  CHECK_EQ(hs.mmaps, 2);
  /* Destroy with pieces live: everything unmapped, with the chunk size. */
  CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
  CHECK_EQ(hs.live, 0);
  CHECK_EQ(hs.munmaps, 2);
  CHECK_EQ(hs.bad_munmaps, 0);

  /* A failing munmap at destroy: its code; the allocator is gone all the same. */
  REQUIRE(aml_allocator_sized_create(&a, 4096, &host, NULL) == AML_SUCCESS);
  hs.fail_munmaps = 1;
  CHECK_EQ(aml_allocator_sized_destroy(&a), -AML_EPERM);
  CHECK(a == NULL);
  CHECK_EQ(hs.live, 1); /* the piece whose munmap failed: the test gives it back */
  if (hs.live == 1) CHECK_EQ(host_area_munmap((struct aml_area_data *)&hs, hs.ptrs[0], 4096), 0);

  REQUIRE(aml_allocator_sized_create(&a, 1 << 16, &host, NULL) == AML_SUCCESS);
  CHECK_EQ(stress_allocator(a, 1, 1 << 16, 400, 40, 0, 9), 0);
  CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
}

static size_t device_free_memory(int device) {
  memarea_device_properties props;
  if (memarea_get_device_properties(&props, device) != MEMAREA_SUCCESS) return 0;
  return props.free_memory;
}

static void test_gpu_area(struct aml_area *area, int device, int device_memory) {
  const size_t chunks[] = {100, 4096, 6144, 1 << 20};
  const size_t aligns[] = {256, 4096, 2048, 4096};
  for (int c = 0; c < 4; ++c) {
    const size_t chunk = chunks[c];
    const size_t free_before = device_free_memory(device);
    struct aml_allocator *a = NULL;
    REQUIRE(aml_allocator_sized_create(&a, chunk, area, NULL) == AML_SUCCESS);
    void *ptrs[20];
    for (int i = 0; i < 20; ++i) {
      ptrs[i] = aml_alloc(a, i == 0 ? chunk : (size_t)i * chunk / 20);
      REQUIRE(ptrs[i] != NULL);
      CHECK_EQ((uintptr_t)ptrs[i] % aligns[c], 0);
      memarea_allocation_info info;
      CHECK_EQ(memarea_pointer_get_info(&info, ptrs[i]), MEMAREA_SUCCESS);
      CHECK(info.base == ptrs[i]);
      CHECK(info.size >= chunk);
      if (device_memory) {
        CHECK_EQ(info.kind, MEMAREA_MEMORY_DEVICE);
        CHECK_EQ(info.device, device);
      }
      CHECK(write_seeded(ptrs[i], chunk, 70 + (uint64_t)i, 1));
    }
    for (int i = 0; i < 20; ++i) CHECK(check_seeded(ptrs[i], chunk, 70 + (uint64_t)i, 1));
    aml_errno = AML_SUCCESS;
    CHECK(aml_alloc(a, chunk + 1) == NULL);
    CHECK_EQ(aml_errno, AML_EINVAL);
    CHECK_EQ(aml_free(a, (char *)ptrs[3] + 16), -AML_EINVAL);
    int local = 0;
    CHECK_EQ(aml_free(a, &local), -AML_EINVAL);
    for (int i = 0; i < 10; ++i) CHECK_EQ(aml_free(a, ptrs[i]), AML_SUCCESS);
    CHECK_EQ(aml_free(a, ptrs[0]), -AML_EINVAL);
    for (int i = 10; i < 20; ++i) CHECK(check_seeded(ptrs[i], chunk, 70 + (uint64_t)i, 1));
    if (chunk == 4096) CHECK_EQ(stress_allocator(a, 1, chunk, 300, 32, 1, 13), 0);
    /* Destroy with ten pieces live: they are freed (AML documents it), and the device's
     * memory comes back. */
    CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
    CHECK(a == NULL);
    if (device_memory) {
      CHECK_EQ(device_free_memory(device), free_before);
      memarea_allocation_info info;
      CHECK(memarea_pointer_get_info(&info, ptrs[15]) != MEMAREA_SUCCESS ||
            info.kind == MEMAREA_MEMORY_UNKNOWN);
    }
    /* Destroy with every piece freed: the pool's own destroy, and the memory comes back. */
    REQUIRE(aml_allocator_sized_create(&a, chunk, area, NULL) == AML_SUCCESS);
    for (int i = 0; i < 3; ++i) REQUIRE((ptrs[i] = aml_alloc(a, chunk)) != NULL);
    for (int i = 0; i < 3; ++i) CHECK_EQ(aml_free(a, ptrs[i]), AML_SUCCESS);
    CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
    CHECK(a == NULL);
    if (device_memory) CHECK_EQ(device_free_memory(device), free_before);
  }
}

static void test_gpu(void) {
  struct aml_allocator *a = NULL;
  if (g_devices == 0) {
    /* No device: the first piece cannot be had, so the creation fails as the area's mmap. */
    CHECK_EQ(aml_allocator_sized_create(&a, 4096, &aml_area_cuda, NULL), -AML_ENOTSUP);
    CHECK(a == NULL);
    return;
  }
  REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
  test_gpu_area(&aml_area_cuda, 0, 1);
  test_gpu_area(&aml_area_hip, 0, 1);
  struct aml_area *area = NULL;
  REQUIRE(aml_area_cuda_create(&area, 0, AML_AREA_CUDA_FLAG_ALLOC_HOST) == AML_SUCCESS);
  test_gpu_area(area, 0, 0);
  aml_area_cuda_destroy(&area);
  if (g_devices > 1) {
    REQUIRE(aml_area_cuda_create(&area, g_devices - 1, 0) == AML_SUCCESS);
    test_gpu_area(area, g_devices - 1, 1);
    aml_area_cuda_destroy(&area);
    struct aml_area_cuda_mmap_options on_last = {g_devices - 1, NULL};
    REQUIRE(aml_allocator_sized_create(&a, 4096, &aml_area_cuda,
                                       (struct aml_area_mmap_options *)&on_last) == AML_SUCCESS);
    void *p = aml_alloc(a, 4096);
    REQUIRE(p != NULL);
    memarea_allocation_info info;
    CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
    CHECK_EQ(info.device, g_devices - 1);
    CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
  }
  /* A chunk larger than the device: the creation fails, out of memory. */
  memarea_device_properties props;
  REQUIRE(memarea_get_device_properties(&props, 0) == MEMAREA_SUCCESS);
  CHECK_EQ(aml_allocator_sized_create(&a, props.total_memory * 2, &aml_area_cuda, NULL),
           -AML_ENOMEM);
  CHECK(a == NULL);
}

int main(int argc, char **argv) {
  REQUIRE(aml_init(&argc, &argv) == AML_SUCCESS);
  if (memarea_get_device_count(&g_devices) != MEMAREA_SUCCESS) g_devices = 0;
  test_arguments();
  test_user_area();
  test_gpu();
  aml_finalize();
  return check_report("test_allocator_sized");
}
