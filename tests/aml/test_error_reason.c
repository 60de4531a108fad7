/* aml_strerror and aml_perror carry memarea's reason for the calling thread's last failure
 * ("Operation not supported: <why memarea refused>"), not only AML's bare text: with no
 * device, with a device id that does not exist and when a device runs out of memory. A failure
 * AML judges itself, and any other code than the one aml_errno holds, keep the bare text.
 * Runs with no backend, with no devices and with two sim devices. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <memarea/memarea.h>

#include "check.h"

#include <pthread.h>
#include <unistd.h>

static int g_devices = 0;

/* What aml_perror(msg) wrote to stderr. */
static void perror_text(const char *msg, char *out, size_t size) {
  fflush(stderr);
  FILE *capture = tmpfile();
  REQUIRE(capture != NULL);
  int saved = dup(2);
  REQUIRE(saved >= 0 && dup2(fileno(capture), 2) >= 0);
  aml_perror(msg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(capture);
  memset(out, 0, size);
  if (!fgets(out, (int)size, capture)) out[0] = '\0';
  fclose(capture);
}

/* The description AML gives code with no reason: what another thread sees for it. */
static char g_bare[AML_ERROR_MAX][128];
static void *read_bare(void *arg) {
  (void)arg;
  for (int e = 0; e < AML_ERROR_MAX; ++e)
    snprintf(g_bare[e], sizeof g_bare[e], "%s", aml_strerror(e));
  return NULL;
}

/* After a failure memarea explains: aml_strerror(aml_errno) is "<bare>: <memarea's message>"
 * (either sign), aml_perror prints the same, and any other code keeps its bare text. */
static void check_reason(int code, const char *must_contain) {
  CHECK_EQ(aml_errno, code);
  const char *reason = memarea_last_error_message();
  char expected[1024];
  snprintf(expected, sizeof expected, "%s: %s", g_bare[code], reason);
  CHECK(reason[0] != '\0');
  CHECK(strcmp(aml_strerror(code), expected) == 0);
  CHECK(strcmp(aml_strerror(-code), expected) == 0);
  if (strcmp(aml_strerror(code), expected) != 0)
    fprintf(stderr, "  got \"%s\"\n  expected \"%s\"\n", aml_strerror(code), expected);
  CHECK(strstr(aml_strerror(code), must_contain) != NULL);
  for (int e = 0; e < AML_ERROR_MAX; ++e)
    if (e != code) CHECK(strcmp(aml_strerror(e), g_bare[e]) == 0);
  char line[1100], want[1100];
  perror_text("what", line, sizeof line);
  snprintf(want, sizeof want, "what:%s\n", expected);
  CHECK(strcmp(line, want) == 0);
  /* The reason is this thread's: another thread sees AML's bare text. */
  char saved[128];
  snprintf(saved, sizeof saved, "%s", g_bare[code]);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, read_bare, NULL) == 0);
  pthread_join(t, NULL);
  CHECK(strcmp(g_bare[code], saved) == 0);
}

/* A failure AML judges itself (no memarea call made) drops the earlier reason. */
static void check_no_reason(void) {
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(NULL, 4096, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK(strcmp(aml_strerror(AML_EINVAL), g_bare[AML_EINVAL]) == 0);
  char line[256], want[256];
  perror_text("what", line, sizeof line);
  snprintf(want, sizeof want, "what:%s\n", g_bare[AML_EINVAL]);
  CHECK(strcmp(line, want) == 0);
}

int main(void) {
  REQUIRE(memarea_get_device_count(&g_devices) == MEMAREA_SUCCESS);
  read_bare(NULL);
  const char *backend = "";
  REQUIRE(memarea_backend_name(&backend) == MEMAREA_SUCCESS);
  if (!g_devices) {
    /* No device: why memarea has none reaches the program. */
    aml_errno = AML_SUCCESS;
    CHECK(aml_area_mmap(&aml_area_cuda, 4096, NULL) == NULL);
    check_reason(AML_ENOTSUP, "no device");
    check_no_reason();
    return check_report("test_error_reason");
  }
  /* A device that does not exist: the id and the count. */
  struct aml_area_cuda_mmap_options o = {g_devices, NULL};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&aml_area_cuda, 4096, (struct aml_area_mmap_options *)&o) == NULL);
  char id[32];
  snprintf(id, sizeof id, "device %d", g_devices);
  check_reason(AML_EINVAL, id);
  check_no_reason();
  /* More than the device has: the driver's error by name. On sim it has no numeric code, and
   * the message shows none (no misleading "(0)"). */
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_mmap(&aml_area_cuda, (size_t)1 << 50, NULL) == NULL);
  check_reason(AML_ENOMEM, "OUT_OF_MEMORY");
  if (strcmp(backend, "sim") == 0) {
    CHECK(strstr(aml_strerror(AML_ENOMEM), "SIM_ERROR_OUT_OF_MEMORY") != NULL);
    CHECK(strstr(aml_strerror(AML_ENOMEM), "(0)") == NULL);
  }
  /* Success leaves aml_errno, and so the reason, as they were. */
  void *p = aml_area_mmap(&aml_area_cuda, 4096, NULL);
  CHECK(p != NULL);
  CHECK(strstr(aml_strerror(AML_ENOMEM), "OUT_OF_MEMORY") != NULL);
  if (p) CHECK_EQ(aml_area_munmap(&aml_area_cuda, p, 4096), AML_SUCCESS);
  return check_report("test_error_reason");
}
