/* A C program linked with the static library (libmemarea.a), built by a C-only project: the
 * link needs what the archive needs (the C++ runtime among it) from the package alone.
 * Allocates on device 0, copies there and back, and frees. */
#include <memarea/memarea.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  memarea_area_t area = NULL;
  void *p = NULL;
  char in[256], out[256];
  for (int i = 0; i < 256; ++i) in[i] = (char)(i * 7 + 1);
  memset(out, 0, sizeof out);
  if (memarea_area_create(&area, 0, MEMAREA_AREA_DEFAULT) != MEMAREA_SUCCESS ||
      memarea_area_mmap(area, &p, sizeof in, NULL) != MEMAREA_SUCCESS ||
      memarea_memcpy(p, in, sizeof in) != MEMAREA_SUCCESS ||
      memarea_memcpy(out, p, sizeof out) != MEMAREA_SUCCESS || memcmp(in, out, sizeof in) != 0 ||
      memarea_area_munmap(area, p, sizeof in) != MEMAREA_SUCCESS ||
      memarea_area_destroy(area) != MEMAREA_SUCCESS) {
    fprintf(stderr, "c_static: %s\n", memarea_last_error_message());
    return 1;
  }
  printf("c_static: a round trip through device 0\n");
  return 0;
}
