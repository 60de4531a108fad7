/* An AML program that includes "aml.h" with quotes, as AML's own sources do. */
#include "aml.h"
#include "aml/area/cuda.h"
int main(void) {
  void *p = aml_area_mmap(&aml_area_cuda, 0, NULL); /* size 0: NULL, no error */
  return p == NULL && aml_errno == AML_SUCCESS ? 0 : 1;
}
