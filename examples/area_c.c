/* Areas from C99: create, mmap with a per-call device, look up, copy, munmap, destroy. */
#include <memarea/memarea.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  int count = 0;
  memarea_area_t area = NULL;
  memarea_mmap_options options = MEMAREA_MMAP_OPTIONS_INIT;
  void *p = NULL, *base = NULL;
  size_t size = 0;
  char message[64] = "hello from the host";

  if (memarea_get_device_count(&count) != MEMAREA_SUCCESS || count == 0) {
    printf("no devices: %s\n", memarea_last_error_message());
    return 0;
  }
  if (memarea_area_create(&area, -1, MEMAREA_AREA_DEFAULT) != MEMAREA_SUCCESS) goto fail;
  options.device = count - 1; /* any ordinal, 0 included */
  if (memarea_area_mmap(area, &p, sizeof message, &options) != MEMAREA_SUCCESS) goto fail;
  if (memarea_memcpy(p, message, sizeof message) != MEMAREA_SUCCESS) goto fail;
  if (memarea_mem_get_address_range(&base, &size, (char *)p + 3) != MEMAREA_SUCCESS) goto fail;
  printf("interior pointer %p -> base %p, %zu bytes\n", (void *)((char *)p + 3), base, size);
  memset(message, 0, sizeof message);
  if (memarea_memcpy(message, p, sizeof message) != MEMAREA_SUCCESS) goto fail;
  printf("round trip: %s\n", message);
  /* A wrong size is refused and changes nothing. */
  if (memarea_area_munmap(area, p, 1) != MEMAREA_ERROR_INVALID_VALUE) goto fail;
  if (memarea_area_munmap(area, p, sizeof message) != MEMAREA_SUCCESS) goto fail;
  memarea_area_destroy(area);
  return 0;
fail:
  fprintf(stderr, "memarea: %s\n", memarea_last_error_message());
  return 1;
}
