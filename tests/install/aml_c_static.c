/* An AML program linked with the static libraries (libmemarea-aml.a, libmemarea.a), built by
 * a C-only project: maps and unmaps device memory through AML's CUDA area. */
#include <aml.h>
#include <aml/area/cuda.h>

int main(void) {
  void *p = aml_area_mmap(&aml_area_cuda, 4096, NULL);
  if (!p) {
    aml_perror("aml_c_static");
    return 1;
  }
  if (aml_area_munmap(&aml_area_cuda, p, 4096) != AML_SUCCESS) return 1;
  printf("aml_c_static: mapped and unmapped 4096 bytes\n");
  return 0;
}
