/* An AML program whose first call of the library is an allocator over the linux area, without
 * aml_init (which AML programs may skip): the backend starts inside the allocator's creation,
 * never under a lock (debug builds check the lock order and abort on a violation). */
#include <aml.h>
#include <aml/area/linux.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/sized.h>

#include "check.h"

int main(void) {
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_sized_create(&a, 4096, &aml_area_linux, NULL) == AML_SUCCESS);
  unsigned char *p = aml_alloc(a, 4096);
  REQUIRE(p != NULL);
  uint64_t seed = 5;
  unsigned char want[4096];
  fill_random(want, sizeof want, &seed);
  memcpy(p, want, sizeof want);
  CHECK(memcmp(p, want, sizeof want) == 0);
  CHECK_EQ(aml_free(a, p), AML_SUCCESS);
  CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
  return check_report("test_first_use");
}
