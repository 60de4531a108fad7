/* Device ids, read one way by every entry point that takes one: -1 is the calling thread's
 * current device, 0 to count-1 a device, and anything else is refused (the C API's
 * MEMAREA_ERROR_INVALID_DEVICE, whose message names the id and the device count; AML's
 * AML_EINVAL), never taken for the current device. Checked through the C API (areas, per-call
 * mmap options, shareable memory) and through AML's CUDA and HIP areas, which sit on it.
 * Runs with no backend, with no devices and with two sim devices. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <memarea/memarea.h>

#include "check.h"

#include <limits.h>

static int g_devices = 0;

/* 1 when the calling thread's last memarea message names device id `id`. */
static int message_names(int id) {
  char text[32];
  snprintf(text, sizeof text, "device %d", id);
  return strstr(memarea_last_error_message(), text) != NULL;
}

/* 1 when the calling thread's last memarea message names the device count. */
static int message_names_count(void) {
  char text[48];
  snprintf(text, sizeof text, "has %d device", g_devices);
  return strstr(memarea_last_error_message(), text) != NULL;
}

/* Ids that are neither -1 nor a device, whatever the count: refused as INVALID_DEVICE. */
static const int k_never_devices[] = {-2, -5, INT_MIN};

static void test_c_area_create(void) {
  for (size_t i = 0; i < sizeof k_never_devices / sizeof *k_never_devices; ++i) {
    const int id = k_never_devices[i];
    memarea_area_t a = NULL;
    CHECK_EQ(memarea_area_create(&a, id, MEMAREA_AREA_DEFAULT), MEMAREA_ERROR_INVALID_DEVICE);
    CHECK(a == NULL);
    CHECK(message_names(id));
    CHECK(message_names_count());
    CHECK_EQ(memarea_area_create(&a, id, MEMAREA_AREA_HOST), MEMAREA_ERROR_INVALID_DEVICE);
    CHECK(a == NULL);
  }
  /* One past the last device: INVALID_DEVICE, or NO_DEVICE where there are none. */
  memarea_area_t a = NULL;
  const memarea_status past = memarea_area_create(&a, g_devices, MEMAREA_AREA_DEFAULT);
  CHECK_EQ(past, g_devices ? MEMAREA_ERROR_INVALID_DEVICE : MEMAREA_ERROR_NO_DEVICE);
  CHECK(a == NULL);
  if (g_devices) {
    CHECK(message_names(g_devices));
    CHECK(message_names_count());
  }
  /* -1 (the current device at each mmap) and every ordinal are areas. */
  CHECK_EQ(memarea_area_create(&a, -1, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
  CHECK_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
  for (int d = 0; d < g_devices; ++d) {
    a = NULL;
    CHECK_EQ(memarea_area_create(&a, d, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
    CHECK_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
  }
}

static void test_c_mmap_options(void) {
  if (!g_devices) return;
  memarea_area_t a = NULL;
  REQUIRE(memarea_area_create(&a, -1, MEMAREA_AREA_DEFAULT) == MEMAREA_SUCCESS);
  for (size_t i = 0; i < sizeof k_never_devices / sizeof *k_never_devices; ++i) {
    memarea_mmap_options o = MEMAREA_MMAP_OPTIONS_INIT;
    o.device = k_never_devices[i];
    void *p = NULL;
    CHECK_EQ(memarea_area_mmap(a, &p, 4096, &o), MEMAREA_ERROR_INVALID_DEVICE);
    CHECK(p == NULL);
    CHECK(message_names(k_never_devices[i]));
  }
  memarea_mmap_options o = MEMAREA_MMAP_OPTIONS_INIT; /* device -1: the area's */
  void *p = NULL;
  CHECK_EQ(memarea_area_mmap(a, &p, 4096, &o), MEMAREA_SUCCESS);
  memarea_allocation_info info;
  if (p) {
    int current = -1;
    CHECK_EQ(memarea_get_device(&current), MEMAREA_SUCCESS);
    CHECK_EQ(memarea_pointer_get_info(&info, p), MEMAREA_SUCCESS);
    CHECK_EQ(info.device, current);
    CHECK_EQ(memarea_area_munmap(a, p, 4096), MEMAREA_SUCCESS);
  }
  CHECK_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

static void test_c_shareable(void) {
  for (size_t i = 0; i < sizeof k_never_devices / sizeof *k_never_devices; ++i) {
    void *p = NULL;
    CHECK_EQ(memarea_shareable_create(&p, NULL, 4096, k_never_devices[i]),
             MEMAREA_ERROR_INVALID_DEVICE);
    CHECK(p == NULL);
    CHECK(message_names(k_never_devices[i]));
    /* The device is judged before the descriptor is looked at. */
    CHECK_EQ(memarea_shareable_import_fd(&p, 0, 4096, k_never_devices[i]),
             MEMAREA_ERROR_INVALID_DEVICE);
    CHECK(p == NULL);
  }
}

static void test_aml_create(void) {
  for (size_t i = 0; i < sizeof k_never_devices / sizeof *k_never_devices; ++i) {
    struct aml_area *a = (struct aml_area *)&a;
    CHECK_EQ(aml_area_cuda_create(&a, k_never_devices[i], AML_AREA_CUDA_FLAG_DEFAULT),
             -AML_EINVAL);
    CHECK(a == NULL);
    a = (struct aml_area *)&a;
    CHECK_EQ(aml_area_hip_create(&a, k_never_devices[i], AML_AREA_HIP_FLAG_DEFAULT),
             -AML_EINVAL);
    CHECK(a == NULL);
  }
  struct aml_area *a = NULL;
  CHECK_EQ(aml_area_cuda_create(&a, -1, AML_AREA_CUDA_FLAG_DEFAULT), AML_SUCCESS);
  aml_area_cuda_destroy(&a);
}

static void test_aml_mmap(void) {
  /* An area whose data names a device that can never be: refused, not the current device. */
  struct aml_area_cuda_data bad = {AML_AREA_CUDA_FLAG_DEFAULT, -5};
  struct aml_area area = {&aml_area_cuda_ops, (struct aml_area_data *)&bad};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&area, 4096, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  if (!g_devices) return;
  struct aml_area_cuda_mmap_options o = {-5, NULL};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&aml_area_cuda, 4096, (struct aml_area_mmap_options *)&o) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  o.device = -1; /* the area's device */
  void *p = aml_area_mmap(&aml_area_cuda, 4096, (struct aml_area_mmap_options *)&o);
  CHECK(p != NULL);
  if (p) CHECK_EQ(aml_area_munmap(&aml_area_cuda, p, 4096), AML_SUCCESS);
}

int main(void) {
  REQUIRE(memarea_get_device_count(&g_devices) == MEMAREA_SUCCESS);
  test_c_area_create();
  test_c_mmap_options();
  test_c_shareable();
  test_aml_create();
  test_aml_mmap();
  return check_report("test_device_ids");
}
