/* AML's HIP area API, unchanged, on memarea (which runs it on HIP, CUDA or sim devices). */
#include <aml/area/hip.h>

#include <stdio.h>

int main(void) {
  struct aml_area *area = NULL;
  struct aml_area_hip_mmap_options options = {-1, NULL}; /* -1: the area's device */
  void *p;
  int err = aml_area_hip_create(&area, -1, AML_AREA_HIP_FLAG_ALLOC_HOST |
                                               AML_AREA_HIP_FLAG_ALLOC_MAPPED);
  if (err != AML_SUCCESS) {
    fprintf(stderr, "create: %s\n", aml_strerror(err));
    return 1;
  }
  p = aml_area_mmap(area, 4096, (struct aml_area_mmap_options *)&options);
  if (p == NULL) {
    printf("mmap: %s (no devices?)\n", aml_strerror(aml_errno));
  } else {
    aml_area_fprintf(stdout, "example", area);
    aml_area_munmap(area, p, 4096);
  }
  aml_area_hip_destroy(&area);
  return 0;
}
