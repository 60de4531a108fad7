/* AML's generic allocator calls and the area allocator, as AML programs use them: the NULL
 * rules of aml_alloc, aml_free and the chunk calls; the area allocator over the CUDA and HIP
 * areas (a memarea pool: pieces are memarea memory that memarea_pointer_get_info knows, on the
 * area's or the options' device, of the area's kind) and over a user-defined area (one mmap
 * and one munmap of the right size per piece, the area's errors passed on); every documented
 * error; destroy while pieces are live; random bytes in every piece. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/area.h>
#include <aml/higher/allocator/buddy.h>
#include <memarea/memarea.h>

#include "alloc_util.h"

static int g_devices = 0;
static int g_managed = 0;

/* --- a user-defined allocator, for the generic calls -------------------------------------- */

static int g_mine_allocs = 0, g_mine_frees = 0;
static char g_mine_memory[64];
static void *mine_alloc(struct aml_allocator_data *data, size_t size) {
  (void)data;
  (void)size;
  ++g_mine_allocs;
  return g_mine_memory;
}
static int mine_free(struct aml_allocator_data *data, void *ptr) {
  (void)data;
  ++g_mine_frees;
  return ptr == g_mine_memory ? AML_SUCCESS : -AML_EINVAL;
}

static void test_generic_calls(void) {
  struct aml_allocator_ops ops = {mine_alloc, mine_free, NULL, NULL};
  struct aml_allocator_ops empty_ops = {NULL, NULL, NULL, NULL};
  int data = 0;
  struct aml_allocator mine = {(struct aml_allocator_data *)&data, &ops};
  struct aml_allocator no_data = {NULL, &ops};
  struct aml_allocator no_ops = {(struct aml_allocator_data *)&data, NULL};
  struct aml_allocator nothing = {(struct aml_allocator_data *)&data, &empty_ops};
  struct aml_allocator_chunk chunk = {g_mine_memory, 64, NULL};

  /* Through the operations, unchanged. */
  CHECK(aml_alloc(&mine, 10) == g_mine_memory);
  CHECK_EQ(g_mine_allocs, 1);
  CHECK_EQ(aml_free(&mine, g_mine_memory), AML_SUCCESS);
  CHECK_EQ(g_mine_frees, 1);
  CHECK_EQ(aml_free(&mine, &data), -AML_EINVAL);

  /* NULL allocator, data or ops: AML_EINVAL. */
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(NULL, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(&no_data, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(&no_ops, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_free(NULL, g_mine_memory), -AML_EINVAL);
  CHECK_EQ(aml_free(&no_data, g_mine_memory), -AML_EINVAL);
  CHECK_EQ(aml_free(&no_ops, g_mine_memory), -AML_EINVAL);
  /* Freeing NULL is a success, whatever the allocator. */
  CHECK_EQ(aml_free(NULL, NULL), AML_SUCCESS);
  CHECK_EQ(aml_free(&no_ops, NULL), AML_SUCCESS);
  CHECK_EQ(g_mine_frees, 2);

  /* Missing operations: AML_ENOTSUP (AML asserts for alloc and free). */
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(&nothing, 10) == NULL);
  CHECK_EQ(aml_errno, AML_ENOTSUP);
  CHECK_EQ(aml_free(&nothing, g_mine_memory), -AML_ENOTSUP);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_alloc_chunk(&mine, 10) == NULL);
  CHECK_EQ(aml_errno, AML_ENOTSUP);
  CHECK_EQ(aml_allocator_free_chunk(&mine, &chunk), -AML_ENOTSUP);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_alloc_chunk(NULL, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_alloc_chunk(&no_data, 10) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_allocator_free_chunk(NULL, &chunk), -AML_EINVAL);
  CHECK_EQ(aml_allocator_free_chunk(&no_ops, &chunk), -AML_EINVAL);
  CHECK_EQ(aml_allocator_free_chunk(NULL, NULL), AML_SUCCESS);
  CHECK_EQ(aml_allocator_free_chunk(&mine, NULL), AML_SUCCESS);

  /* The area allocator's operations: AML's table, without chunk calls. */
  CHECK(aml_allocator_area_ops.alloc == aml_allocator_area_alloc);
  CHECK(aml_allocator_area_ops.free == aml_allocator_area_free);
  CHECK(aml_allocator_area_ops.alloc_chunk == NULL);
  CHECK(aml_allocator_area_ops.free_chunk == NULL);
}

static void test_create_destroy_arguments(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  struct aml_allocator *a = NULL;
  CHECK_EQ(aml_allocator_area_create(NULL, &host, NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_area_create(&a, NULL, NULL), -AML_EINVAL);
  CHECK(a == NULL);
  CHECK_EQ(aml_allocator_area_destroy(NULL), -AML_EINVAL);
  CHECK_EQ(aml_allocator_area_destroy(&a), -AML_EINVAL);

  /* AML's layout: the area and options as given, the allocator's ops the area table. */
  int opts_storage = 0;
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&opts_storage;
  REQUIRE(aml_allocator_area_create(&a, &host, opts) == AML_SUCCESS);
  REQUIRE(a != NULL);
  CHECK(a->ops == &aml_allocator_area_ops);
  struct aml_allocator_area_data *d = (struct aml_allocator_area_data *)a->data;
  CHECK(d->area == &host);
  CHECK(d->opts == opts);
  CHECK(pthread_mutex_lock(&d->lock) == 0 && pthread_mutex_unlock(&d->lock) == 0);

  /* Another allocator's destroy refuses it; the data-level calls refuse NULL data. */
  struct aml_allocator *b = NULL;
  REQUIRE(aml_allocator_buddy_create(&b, &host, NULL) == AML_SUCCESS);
  CHECK_EQ(aml_allocator_area_destroy(&b), -AML_EINVAL);
  CHECK(b != NULL);
  CHECK_EQ(aml_allocator_buddy_destroy(&b), AML_SUCCESS);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), -AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_allocator_area_alloc(NULL, 64) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_allocator_area_free(NULL, &hs), -AML_EINVAL);

  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
  CHECK_EQ(hs.mmaps, 0);
}

/* The foreign path: a user-defined area gets one mmap (with the options) and one munmap (with
 * the size mapped) per piece. */
static void test_user_area(void) {
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  int opts_storage = 0;
  struct aml_area_mmap_options *opts = (struct aml_area_mmap_options *)&opts_storage;
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_area_create(&a, &host, opts) == AML_SUCCESS);

  unsigned char *p = aml_alloc(a, 1000);
  REQUIRE(p != NULL);
  CHECK_EQ(hs.mmaps, 1);
  CHECK_EQ(hs.last_size, 1000);
  CHECK(hs.last_opts == opts);
  CHECK(host_area_contains(&hs, p, 1000));
  uint64_t seed = 7;
  unsigned char bytes[1000];
  fill_random(bytes, sizeof bytes, &seed);
  memcpy(p, bytes, sizeof bytes);
  unsigned char *q = aml_alloc(a, 3 * 4096);
  REQUIRE(q != NULL);
  CHECK(q + 3 * 4096 <= p || p + 1000 <= q);
  CHECK(memcmp(p, bytes, sizeof bytes) == 0);

  /* Size 0: AML_EINVAL, nothing mapped. */
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 0) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(hs.mmaps, 2);

  /* The area's failure and its code reach the caller. */
  hs.fail_code = AML_EPERM;
  hs.fail_mmaps = 1;
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 64) == NULL);
  CHECK_EQ(aml_errno, AML_EPERM);

  /* Pointers it did not give: -AML_EINVAL, nothing unmapped. */
  CHECK_EQ(aml_free(a, p + 8), -AML_EINVAL);
  CHECK_EQ(aml_free(a, bytes), -AML_EINVAL);
  CHECK_EQ(hs.munmaps, 0);

  /* A failing munmap: its code, and the piece stays live and freeable. */
  hs.fail_munmaps = 1;
  CHECK_EQ(aml_free(a, p), -AML_EPERM);
  CHECK_EQ(hs.live, 2);
  CHECK_EQ(aml_free(a, p), AML_SUCCESS);
  CHECK_EQ(hs.munmaps, 1);
  CHECK_EQ(aml_free(a, p), -AML_EINVAL); /* freed already */

  /* Destroy while q is live: -AML_EBUSY, nothing changes; then free and destroy. */
  CHECK_EQ(aml_allocator_area_destroy(&a), -AML_EBUSY);
  CHECK(a != NULL);
  CHECK_EQ(hs.live, 1);
  CHECK_EQ(aml_free(a, q), AML_SUCCESS);
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
  CHECK_EQ(hs.live, 0);
  CHECK_EQ(hs.bad_munmaps, 0);

  /* Interleaved random sizes. */
  REQUIRE(aml_allocator_area_create(&a, &host, NULL) == AML_SUCCESS);
  CHECK_EQ(stress_allocator(a, 4096, 1 << 20, 200, 16, 0, 11), 0);
  CHECK_EQ(hs.live, 0);
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  CHECK_EQ(hs.bad_munmaps, 0);
}

/* Pieces of a pool: memarea memory of the area's kind on the expected device. */
static void check_piece(void *p, size_t n, memarea_memory_kind kind, int device) {
  memarea_allocation_info info;
  CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
  CHECK(info.base == p);
  CHECK(info.size >= n);
  CHECK_EQ(info.kind, kind);
  if (kind == MEMAREA_MEMORY_DEVICE) CHECK_EQ(info.device, device);
  memarea_allocation_info inner;
  CHECK_EQ(memarea_pointer_get_info(&inner, (char *)p + n - 1), MEMAREA_SUCCESS);
  CHECK(inner.base == p);
  CHECK_EQ((uintptr_t)p % 256, 0);
}

static void test_gpu_area(struct aml_area *area, int device, memarea_memory_kind kind) {
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_area_create(&a, area, NULL) == AML_SUCCESS);
  const size_t sizes[] = {1, 255, 4096, 100000, 1 << 20, 5 << 20};
  void *ptrs[6];
  for (int i = 0; i < 6; ++i) {
    ptrs[i] = aml_alloc(a, sizes[i]);
    REQUIRE(ptrs[i] != NULL);
    check_piece(ptrs[i], sizes[i], kind, device);
    CHECK(write_seeded(ptrs[i], sizes[i], 100 + (uint64_t)i, 1));
  }
  for (int i = 0; i < 6; ++i) {
    CHECK(check_seeded(ptrs[i], sizes[i], 100 + (uint64_t)i, 1));
    for (int j = 0; j < i; ++j)
      CHECK((char *)ptrs[i] + sizes[i] <= (char *)ptrs[j] ||
            (char *)ptrs[j] + sizes[j] <= (char *)ptrs[i]);
  }
  /* A pointer inside a piece, one of no allocator, one freed twice: -AML_EINVAL. */
  CHECK_EQ(aml_free(a, (char *)ptrs[2] + 256), -AML_EINVAL);
  int local = 0;
  CHECK_EQ(aml_free(a, &local), -AML_EINVAL);
  CHECK(check_seeded(ptrs[2], sizes[2], 102, 1));
  /* Destroy refuses while pieces are live, and nothing changes. */
  CHECK_EQ(aml_allocator_area_destroy(&a), -AML_EBUSY);
  REQUIRE(a != NULL);
  CHECK(check_seeded(ptrs[5], sizes[5], 105, 1));
  for (int i = 0; i < 6; ++i) CHECK_EQ(aml_free(a, ptrs[i]), AML_SUCCESS);
  CHECK_EQ(aml_free(a, ptrs[0]), -AML_EINVAL);
  /* A piece freed is reused: no new memory for the same size. */
  void *again = aml_alloc(a, sizes[3]);
  CHECK(again != NULL);
  CHECK_EQ(aml_free(a, again), AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 0) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(stress_allocator(a, 4096, 16 << 20, 60, 8, 1, 21), 0);
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  CHECK(a == NULL);
}

static void test_gpu(void) {
  struct aml_allocator *a = NULL;
  if (g_devices == 0) {
    /* No device: the allocator is made, and its allocations fail as the area's do. */
    REQUIRE(aml_allocator_area_create(&a, &aml_area_cuda, NULL) == AML_SUCCESS);
    aml_errno = AML_SUCCESS;
    CHECK(aml_alloc(a, 4096) == NULL);
    CHECK_EQ(aml_errno, AML_ENOTSUP);
    CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
    return;
  }
  REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
  test_gpu_area(&aml_area_cuda, 0, MEMAREA_MEMORY_DEVICE);
  test_gpu_area(&aml_area_hip, 0, MEMAREA_MEMORY_DEVICE);
  struct aml_area *area = NULL;
  REQUIRE(aml_area_cuda_create(&area, g_devices - 1, AML_AREA_CUDA_FLAG_DEFAULT) == AML_SUCCESS);
  test_gpu_area(area, g_devices - 1, MEMAREA_MEMORY_DEVICE);
  aml_area_cuda_destroy(&area);
  REQUIRE(aml_area_cuda_create(&area, 0, AML_AREA_CUDA_FLAG_ALLOC_HOST) == AML_SUCCESS);
  test_gpu_area(area, 0, MEMAREA_MEMORY_HOST_PINNED);
  aml_area_cuda_destroy(&area);
  REQUIRE(aml_area_cuda_create(&area, 0, AML_AREA_CUDA_FLAG_ALLOC_HOST |
                                            AML_AREA_CUDA_FLAG_ALLOC_MAPPED) == AML_SUCCESS);
  test_gpu_area(area, 0, MEMAREA_MEMORY_MAPPED);
  aml_area_cuda_destroy(&area);
  if (g_managed) {
    test_gpu_area(&aml_area_cuda_unified, 0, MEMAREA_MEMORY_MANAGED);
    /* UNIFIED ignores MAPPED: still pooled managed memory. */
    REQUIRE(aml_area_hip_create(&area, 0, AML_AREA_HIP_FLAG_ALLOC_UNIFIED |
                                             AML_AREA_HIP_FLAG_ALLOC_MAPPED) == AML_SUCCESS);
    test_gpu_area(area, 0, MEMAREA_MEMORY_MANAGED);
    aml_area_hip_destroy(&area);
  }

  /* The options' device (0 included) selects the device, as the CUDA area's mmap does. */
  if (g_devices > 1) {
    struct aml_area_cuda_mmap_options on_last = {g_devices - 1, NULL};
    REQUIRE(aml_allocator_area_create(&a, &aml_area_cuda,
                                      (struct aml_area_mmap_options *)&on_last) == AML_SUCCESS);
    void *p = aml_alloc(a, 4096);
    REQUIRE(p != NULL);
    check_piece(p, 4096, MEMAREA_MEMORY_DEVICE, g_devices - 1);
    CHECK_EQ(aml_free(a, p), AML_SUCCESS);
    CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
    REQUIRE(aml_area_cuda_create(&area, g_devices - 1, 0) == AML_SUCCESS);
    struct aml_area_cuda_mmap_options on_0 = {0, NULL};
    REQUIRE(aml_allocator_area_create(&a, area, (struct aml_area_mmap_options *)&on_0) ==
            AML_SUCCESS);
    p = aml_alloc(a, 4096);
    REQUIRE(p != NULL);
    check_piece(p, 4096, MEMAREA_MEMORY_DEVICE, 0);
    CHECK_EQ(aml_free(a, p), AML_SUCCESS);
    CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
    aml_area_cuda_destroy(&area);
    /* An area of "the current device" takes the creating thread's current device. */
    REQUIRE(memarea_set_device(g_devices - 1) == MEMAREA_SUCCESS);
    REQUIRE(aml_allocator_area_create(&a, &aml_area_cuda, NULL) == AML_SUCCESS);
    REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
    p = aml_alloc(a, 4096);
    REQUIRE(p != NULL);
    check_piece(p, 4096, MEMAREA_MEMORY_DEVICE, g_devices - 1);
    CHECK_EQ(aml_free(a, p), AML_SUCCESS);
    CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  }

  /* MAPPED without HOST registers the options' host range: not pooled, through the area. */
  static char host_range[8192] __attribute__((aligned(4096)));
  REQUIRE(aml_area_cuda_create(&area, 0, AML_AREA_CUDA_FLAG_ALLOC_MAPPED) == AML_SUCCESS);
  struct aml_area_cuda_mmap_options reg = {-1, host_range};
  REQUIRE(aml_allocator_area_create(&a, area, (struct aml_area_mmap_options *)&reg) ==
          AML_SUCCESS);
  void *r = aml_alloc(a, sizeof host_range);
  CHECK(r != NULL);
  if (r) {
    memarea_allocation_info info;
    CHECK_EQ(memarea_pointer_get_info(&info, host_range), MEMAREA_SUCCESS);
    CHECK_EQ(info.kind, MEMAREA_MEMORY_REGISTERED);
    CHECK_EQ(aml_free(a, r), AML_SUCCESS);
  }
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  aml_area_cuda_destroy(&area);

  /* Unknown flag bits: the allocator is made; its allocations fail as the area's mmap does. */
  struct aml_area_cuda_data bad_flags = {1 << 20, 0};
  struct aml_area bad = {&aml_area_cuda_ops, (struct aml_area_data *)&bad_flags};
  REQUIRE(aml_allocator_area_create(&a, &bad, NULL) == AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_alloc(a, 64) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
}

int main(int argc, char **argv) {
  REQUIRE(aml_init(&argc, &argv) == AML_SUCCESS);
  if (memarea_get_device_count(&g_devices) != MEMAREA_SUCCESS) g_devices = 0;
  if (g_devices > 0) {
    memarea_device_properties props;
    g_managed =
        memarea_get_device_properties(&props, 0) == MEMAREA_SUCCESS && props.managed_memory;
  }
  test_generic_calls();
  test_create_destroy_arguments();
  test_user_area();
  test_gpu();
  aml_finalize();
  return check_report("test_allocator_area");
}
