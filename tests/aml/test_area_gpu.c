/* AML's generic area API and its CUDA and HIP areas on memarea, as an AML program uses them:
 * every function, flag and documented error, the struct layouts AML programs initialise by
 * position, the edge cases where AML's behaviour is kept (size 0, unmapping NULL) and those
 * where memarea does the right thing instead (device 0 in the options, aml_errno per thread).
 * Runs with no devices, two sim devices (with and without managed memory) and on CUDA. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <memarea/memarea.h>

#include "check.h"

#include <limits.h>

static int g_devices = 0;
static int g_managed = 0; /* device 0 allocates managed memory */

/* The kind memarea reports for an allocation of an area with these flags. */
static memarea_memory_kind kind_of_flags(int flags) {
  if (flags & AML_AREA_CUDA_FLAG_ALLOC_UNIFIED) return MEMAREA_MEMORY_MANAGED;
  if (flags & AML_AREA_CUDA_FLAG_ALLOC_MAPPED)
    return (flags & AML_AREA_CUDA_FLAG_ALLOC_HOST) ? MEMAREA_MEMORY_MAPPED
                                                   : MEMAREA_MEMORY_REGISTERED;
  if (flags & AML_AREA_CUDA_FLAG_ALLOC_HOST) return MEMAREA_MEMORY_HOST_PINNED;
  return MEMAREA_MEMORY_DEVICE;
}

/* Writes random bytes through memarea_memcpy and reads them back: 1 when they match. */
static int round_trip(void *p, size_t n, uint64_t seed) {
  unsigned char *in = malloc(n), *out = malloc(n);
  int ok = in && out;
  if (ok) {
    fill_random(in, n, &seed);
    memset(out, 0, n);
    ok = memarea_memcpy(p, in, n) == MEMAREA_SUCCESS && memarea_memcpy(out, p, n) == MEMAREA_SUCCESS &&
         memcmp(in, out, n) == 0;
  }
  free(in);
  free(out);
  return ok;
}

static void test_library_calls(int argc, char **argv) {
  CHECK_EQ(aml_init(&argc, &argv), AML_SUCCESS);
  CHECK_EQ(aml_init(NULL, NULL), AML_SUCCESS);
  CHECK_EQ(aml_version_major, AML_VERSION_MAJOR);
  CHECK_EQ(aml_version_minor, AML_VERSION_MINOR);
  CHECK_EQ(aml_version_patch, AML_VERSION_PATCH);
  CHECK(strcmp(aml_version_string, AML_VERSION_STRING) == 0);
  CHECK(strcmp(aml_version_revision, AML_VERSION_REVISION) == 0);

  const int gpus = g_devices > 0;
  CHECK_EQ(aml_support_backends(0), 1);
  CHECK_EQ(aml_support_backends(AML_BACKEND_LIBNUMA), 1);
  CHECK_EQ(aml_support_backends(AML_BACKEND_CUDA), gpus);
  CHECK_EQ(aml_support_backends(AML_BACKEND_HIP), gpus);
  CHECK_EQ(aml_support_backends(AML_BACKEND_CUDA | AML_BACKEND_LIBNUMA), gpus);
  CHECK_EQ(aml_support_backends(AML_BACKEND_HWLOC), 0);
  CHECK_EQ(aml_support_backends(AML_BACKEND_OPENCL), 0);
  CHECK_EQ(aml_support_backends(AML_BACKEND_ZE | AML_BACKEND_LIBNUMA), 0);

  /* Every code has its own text, whatever its sign; others are unknown. */
  for (int e = 0; e < AML_ERROR_MAX; ++e) {
    CHECK(strcmp(aml_strerror(e), aml_strerror(-e)) == 0);
    CHECK(strcmp(aml_strerror(e), "Unknown error") != 0);
    for (int f = 0; f < e; ++f) CHECK(strcmp(aml_strerror(e), aml_strerror(f)) != 0);
  }
  CHECK(strcmp(aml_strerror(AML_ERROR_MAX), "Unknown error") == 0);
  CHECK(strcmp(aml_strerror(-1000), "Unknown error") == 0);
  CHECK(strcmp(aml_strerror(INT_MIN), "Unknown error") == 0); /* no overflow */
  CHECK(strcmp(aml_strerror(-AML_ERROR_MAX), "Unknown error") == 0);
  CHECK(strcmp(aml_strerror(AML_SUCCESS), "Success") == 0);

  /* aml_perror prints "msg:text" of aml_errno to stderr. */
  fflush(stderr);
  FILE *capture = tmpfile();
  REQUIRE(capture != NULL);
  int saved = dup(2);
  REQUIRE(saved >= 0 && dup2(fileno(capture), 2) >= 0);
  aml_errno = AML_ENOMEM;
  aml_perror("what");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char line[128] = {0};
  rewind(capture);
  CHECK(fgets(line, sizeof line, capture) != NULL);
  fclose(capture);
  char expected[128];
  snprintf(expected, sizeof expected, "what:%s\n", aml_strerror(AML_ENOMEM));
  CHECK(strcmp(line, expected) == 0);
  aml_errno = AML_SUCCESS;
}

/* aml_errno is the calling thread's: another thread neither sees nor changes it. */
static void *other_thread(void *arg) {
  int *seen = arg;
  *seen = aml_errno;
  aml_errno = AML_EPERM;
  return NULL;
}

static void test_errno_per_thread(void) {
  aml_errno = AML_EDOM;
  int seen = -1;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, other_thread, &seen) == 0);
  pthread_join(t, NULL);
  CHECK_EQ(seen, AML_SUCCESS);
  CHECK_EQ(aml_errno, AML_EDOM);
  aml_errno = AML_SUCCESS;
}

/* An area with no operations, to reach the generic API's own checks. */
static struct aml_area_ops g_no_ops = {NULL, NULL, NULL};

static void test_generic_api(void) {
  int local = 0;
  struct aml_area empty = {&g_no_ops, NULL};
  struct aml_area no_ops = {NULL, NULL};

  aml_errno = AML_EPERM;
  CHECK(aml_area_mmap(&aml_area_cuda, 0, NULL) == NULL); /* size 0: aml_errno untouched */
  CHECK_EQ(aml_errno, AML_EPERM);
  CHECK(aml_area_mmap(NULL, 64, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&no_ops, 64, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK(aml_area_mmap(&empty, 64, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_ENOTSUP);

  CHECK_EQ(aml_area_munmap(&aml_area_cuda, NULL, 64), AML_SUCCESS);  /* cleanup code does this */
  CHECK_EQ(aml_area_munmap(NULL, NULL, 0), AML_SUCCESS);
  CHECK_EQ(aml_area_munmap(&aml_area_hip, &local, 0), AML_SUCCESS);
  CHECK_EQ(aml_area_munmap(NULL, &local, 4), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&no_ops, &local, 4), -AML_EINVAL);
  CHECK_EQ(aml_area_munmap(&empty, &local, 4), -AML_ENOTSUP);
  CHECK_EQ(aml_area_munmap(&aml_area_cuda, &local, 4), -AML_EINVAL); /* not an area's */
  CHECK_EQ(local, 0);

  char text[512];
  FILE *f = fmemopen(text, sizeof text, "w");
  REQUIRE(f != NULL);
  CHECK_EQ(aml_area_fprintf(f, NULL, &aml_area_cuda), AML_SUCCESS);
  CHECK_EQ(aml_area_fprintf(f, "p", &aml_area_hip_unified), AML_SUCCESS);
  CHECK_EQ(aml_area_fprintf(NULL, "p", &aml_area_cuda), -AML_EINVAL);
  CHECK_EQ(aml_area_fprintf(f, "p", NULL), -AML_EINVAL);
  CHECK_EQ(aml_area_fprintf(f, "p", &empty), -AML_ENOTSUP);
  fclose(f);
  CHECK(strstr(text, ": area-cuda: ") != NULL);
  CHECK(strstr(text, "p: area-hip: ") != NULL);
  CHECK(strstr(text, "p: flags: 0x2") != NULL); /* hip unified: UNIFIED alone */
}

static void test_layouts_and_default_areas(void) {
  /* AML's field order: programs initialise these by position. */
  struct aml_area_cuda_data host_on_0 = {AML_AREA_CUDA_FLAG_ALLOC_HOST, 0};
  struct aml_area_hip_data hip = {AML_AREA_HIP_FLAG_ALLOC_UNIFIED, 1};
  CHECK_EQ(host_on_0.flags, AML_AREA_CUDA_FLAG_ALLOC_HOST);
  CHECK_EQ(host_on_0.device, 0);
  CHECK_EQ(hip.flags, AML_AREA_HIP_FLAG_ALLOC_UNIFIED);
  CHECK_EQ(hip.device, 1);
  CHECK_EQ(offsetof(struct aml_area_cuda_data, flags), 0);
  CHECK_EQ(offsetof(struct aml_area_cuda_mmap_options, device), 0);
  CHECK(offsetof(struct aml_area_cuda_mmap_options, ptr) > 0);
  CHECK(offsetof(struct aml_area, ops) < offsetof(struct aml_area, data));

  /* Flag values are AML's. */
  CHECK_EQ(AML_AREA_CUDA_FLAG_DEFAULT, 0);
  CHECK_EQ(AML_AREA_CUDA_FLAG_ALLOC_HOST, 1);
  CHECK_EQ(AML_AREA_CUDA_FLAG_ALLOC_UNIFIED, 2);
  CHECK_EQ(AML_AREA_CUDA_FLAG_ALLOC_MAPPED, 4);
  CHECK_EQ(AML_AREA_CUDA_FLAG_ALLOC_GLOBAL, 8);
  CHECK_EQ(AML_AREA_HIP_FLAG_ALLOC_GLOBAL, 8);

  const struct aml_area_cuda_data *d = (const struct aml_area_cuda_data *)aml_area_cuda.data;
  CHECK(aml_area_cuda.ops == &aml_area_cuda_ops);
  CHECK_EQ(d->flags, AML_AREA_CUDA_FLAG_DEFAULT);
  CHECK(d->device < 0);
  d = (const struct aml_area_cuda_data *)aml_area_cuda_unified.data;
  CHECK_EQ(d->flags, AML_AREA_CUDA_FLAG_ALLOC_UNIFIED); /* AML's: not GLOBAL */
  const struct aml_area_hip_data *h = (const struct aml_area_hip_data *)aml_area_hip_unified.data;
  CHECK(aml_area_hip_unified.ops == &aml_area_hip_ops);
  CHECK_EQ(h->flags, AML_AREA_HIP_FLAG_ALLOC_UNIFIED);
  CHECK(h->device < 0);

  if (g_devices == 0) return;
  /* A program's own area on the CUDA operations, from a positional initialiser. */
  struct aml_area mine = {&aml_area_cuda_ops, (struct aml_area_data *)&host_on_0};
  void *p = aml_area_mmap(&mine, 1000, NULL);
  REQUIRE(p != NULL);
  memarea_allocation_info info;
  CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
  CHECK_EQ(info.kind, MEMAREA_MEMORY_HOST_PINNED);
  memset(p, 0x5a, 1000); /* pinned host memory: the host writes it directly */
  CHECK(round_trip(p, 1000, 7));
  CHECK_EQ(aml_area_munmap(&mine, p, 1000), AML_SUCCESS);
}

static void test_create_and_destroy(void) {
  struct aml_area *a = (struct aml_area *)&g_no_ops; /* not NULL: create must clear it */
  CHECK_EQ(aml_area_cuda_create(NULL, -1, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_cuda_create(&a, g_devices, AML_AREA_CUDA_FLAG_DEFAULT), -AML_EINVAL);
  CHECK(a == NULL);
  CHECK_EQ(aml_area_hip_create(&a, g_devices + 5, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_cuda_create(&a, -1, 0x10), -AML_EINVAL); /* unknown flag bit */
  CHECK_EQ(aml_area_hip_create(&a, -1, -1), -AML_EINVAL);
  CHECK(a == NULL);
  CHECK_EQ(aml_area_cuda_create(&a, -1, AML_AREA_CUDA_FLAG_ALLOC_HOST | AML_AREA_CUDA_FLAG_ALLOC_GLOBAL),
           AML_SUCCESS);
  REQUIRE(a != NULL);
  CHECK(a->ops == &aml_area_cuda_ops);
  const struct aml_area_cuda_data *d = (const struct aml_area_cuda_data *)a->data;
  CHECK_EQ(d->flags, AML_AREA_CUDA_FLAG_ALLOC_HOST | AML_AREA_CUDA_FLAG_ALLOC_GLOBAL);
  CHECK(d->device < 0);
  aml_area_cuda_destroy(&a);
  CHECK(a == NULL);
  aml_area_cuda_destroy(&a); /* NULL: nothing */
  aml_area_hip_destroy(NULL);
  if (g_devices > 0) {
    CHECK_EQ(aml_area_hip_create(&a, g_devices - 1, AML_AREA_HIP_FLAG_ALLOC_UNIFIED), AML_SUCCESS);
    REQUIRE(a != NULL);
    CHECK(a->ops == &aml_area_hip_ops);
    CHECK_EQ(((const struct aml_area_hip_data *)a->data)->device, g_devices - 1);
    aml_area_hip_destroy(&a);
  }
}

static void test_every_flag(void) {
  if (g_devices == 0) {
    aml_errno = AML_SUCCESS;
    CHECK(aml_area_mmap(&aml_area_cuda, 64, NULL) == NULL);
    CHECK_EQ(aml_errno, AML_ENOTSUP);
    CHECK(aml_area_mmap(&aml_area_hip_unified, 64, NULL) == NULL);
    CHECK_EQ(aml_errno, AML_ENOTSUP);
    return;
  }
  const size_t n = 5000;
  const long page = sysconf(_SC_PAGESIZE);
  for (int flavour = 0; flavour < 2; ++flavour) {
    for (int device = 0; device < g_devices; ++device) {
      for (int flags = 0; flags <= 15; ++flags) {
        struct aml_area *a = NULL;
        REQUIRE((flavour ? aml_area_hip_create(&a, device, flags)
                         : aml_area_cuda_create(&a, device, flags)) == AML_SUCCESS);
        void *range = NULL;
        REQUIRE(posix_memalign(&range, (size_t)page, 8192) == 0);
        struct aml_area_cuda_mmap_options o = {-1, range};
        aml_errno = AML_SUCCESS;
        void *p = aml_area_mmap(a, n, (struct aml_area_mmap_options *)&o);
        if ((flags & AML_AREA_CUDA_FLAG_ALLOC_UNIFIED) && !g_managed) {
          CHECK(p == NULL);
          CHECK_EQ(aml_errno, AML_ENOTSUP);
        } else {
          if (p == NULL) fprintf(stderr, "flags %d: %s\n", flags, aml_strerror(aml_errno));
          REQUIRE(p != NULL);
          memarea_allocation_info info;
          CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
          CHECK_EQ(info.kind, kind_of_flags(flags));
          if (info.kind == MEMAREA_MEMORY_REGISTERED) CHECK(p == range);
          if (info.kind == MEMAREA_MEMORY_DEVICE || info.kind == MEMAREA_MEMORY_MANAGED)
            CHECK_EQ(info.device, device);
          CHECK(info.size >= n);
          CHECK(round_trip(p, n, (uint64_t)flags * 31 + device + 1));
          /* A wrong size is refused and changes nothing; the right one frees. */
          CHECK_EQ(aml_area_munmap(a, p, n + 1), -AML_EINVAL);
          CHECK_EQ(aml_errno, AML_EINVAL);
          CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
          CHECK_EQ(aml_area_munmap(a, p, n), AML_SUCCESS);
          CHECK_EQ(aml_area_munmap(a, p, n), -AML_EINVAL); /* twice */
        }
        free(range);
        flavour ? aml_area_hip_destroy(&a) : aml_area_cuda_destroy(&a);
      }
    }
  }
  /* MAPPED without HOST needs the options' ptr. */
  struct aml_area *m = NULL;
  REQUIRE(aml_area_cuda_create(&m, 0, AML_AREA_CUDA_FLAG_ALLOC_MAPPED) == AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(m, 64, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  struct aml_area_cuda_mmap_options no_ptr = {-1, NULL};
  CHECK(aml_area_mmap(m, 64, (struct aml_area_mmap_options *)&no_ptr) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_area_cuda_destroy(&m);
  /* A data block with unknown flag bits (a program's own area): EINVAL. */
  struct aml_area_cuda_data bad = {0x40, 0};
  struct aml_area bad_area = {&aml_area_cuda_ops, (struct aml_area_data *)&bad};
  CHECK(aml_area_mmap(&bad_area, 64, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  /* More than the device has. */
  memarea_device_properties props;
  REQUIRE(memarea_get_device_properties(&props, 0) == MEMAREA_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&aml_area_cuda, props.total_memory + ((size_t)1 << 30), NULL) == NULL);
  CHECK_EQ(aml_errno, AML_ENOMEM);
}

static void test_devices(void) {
  if (g_devices == 0) return;
  const int last = g_devices - 1;
  REQUIRE(memarea_set_device(last) == MEMAREA_SUCCESS);
  memarea_allocation_info info;
  /* Device < 0: the current device at each mmap. */
  void *p = aml_area_mmap(&aml_area_cuda, 256, NULL);
  REQUIRE(p != NULL);
  CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
  CHECK_EQ(info.device, last);
  CHECK_EQ(info.kind, MEMAREA_MEMORY_DEVICE);
  CHECK_EQ(aml_area_munmap(&aml_area_cuda, p, 256), AML_SUCCESS);
  /* The option's device selects from 0 up (AML ignores 0); < 0 keeps the area's. */
  struct aml_area_cuda_mmap_options zero = {0, NULL}, none = {-1, NULL};
  p = aml_area_mmap(&aml_area_cuda, 256, (struct aml_area_mmap_options *)&zero);
  REQUIRE(p != NULL);
  CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
  CHECK_EQ(info.device, 0);
  CHECK_EQ(aml_area_munmap(&aml_area_cuda, p, 256), AML_SUCCESS);
  p = aml_area_mmap(&aml_area_hip, 256, (struct aml_area_mmap_options *)&none);
  REQUIRE(p != NULL);
  CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
  CHECK_EQ(info.device, last);
  CHECK_EQ(aml_area_munmap(&aml_area_hip, p, 256), AML_SUCCESS);
  /* An invalid device in the options: EINVAL. */
  struct aml_area_cuda_mmap_options far = {g_devices, NULL};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&aml_area_cuda, 256, (struct aml_area_mmap_options *)&far) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  if (g_devices > 1) {
    /* An area on device 1, the caller on device 0: memory on 1, the caller still on 0. */
    struct aml_area *a = NULL;
    REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
    REQUIRE(aml_area_hip_create(&a, 1, AML_AREA_HIP_FLAG_DEFAULT) == AML_SUCCESS);
    p = aml_area_mmap(a, 4096, NULL);
    REQUIRE(p != NULL);
    CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
    CHECK_EQ(info.device, 1);
    int current = -1;
    CHECK_EQ(memarea_get_device(&current), MEMAREA_SUCCESS);
    CHECK_EQ(current, 0);
    CHECK(round_trip(p, 4096, 99));
    /* Unmapped through another area (the munmap does not read the area, as AML's). */
    CHECK_EQ(aml_area_munmap(&aml_area_cuda, p, 4096), AML_SUCCESS);
    aml_area_hip_destroy(&a);
  }
  REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
  /* The fprintf op prints the device and flags. */
  struct aml_area *a = NULL;
  REQUIRE(aml_area_cuda_create(&a, last, AML_AREA_CUDA_FLAG_ALLOC_HOST) == AML_SUCCESS);
  char text[256];
  FILE *f = fmemopen(text, sizeof text, "w");
  REQUIRE(f != NULL);
  CHECK_EQ(aml_area_fprintf(f, "x", a), AML_SUCCESS);
  fclose(f);
  char want[32];
  snprintf(want, sizeof want, "x: device: %d\n", last);
  CHECK(strstr(text, want) != NULL);
  CHECK(strstr(text, "x: flags: 0x1\n") != NULL);
  aml_area_cuda_destroy(&a);
}

int main(int argc, char **argv) {
  if (memarea_get_device_count(&g_devices) != MEMAREA_SUCCESS) g_devices = 0;
  if (g_devices > 0) {
    memarea_device_properties props;
    g_managed = memarea_get_device_properties(&props, 0) == MEMAREA_SUCCESS && props.managed_memory;
  }
  test_library_calls(argc, argv);
  test_errno_per_thread();
  test_generic_api();
  test_layouts_and_default_areas();
  test_create_and_destroy();
  test_every_flag();
  test_devices();
  CHECK_EQ(aml_finalize(), AML_SUCCESS);
  return check_report("test_area_gpu");
}
