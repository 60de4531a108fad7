/* An unchanged AML program: AML's buddy allocator over AML's CUDA area. On memarea it draws from
 * a memarea pool (each aml_alloc / aml_free a pool call, no driver call once the pool holds
 * memory); with no GPU it falls back to AML's linux area (host memory). Build it as any AML
 * program: cc aml_allocator.c $(pkg-config --cflags --libs memarea-aml) */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/area/linux.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/buddy.h>

int main(int argc, char **argv) {
  if (aml_init(&argc, &argv) != AML_SUCCESS) return 1;
  struct aml_area *area = aml_support_backends(AML_BACKEND_CUDA) ? &aml_area_cuda
                                                                 : &aml_area_linux;
  struct aml_allocator *allocator = NULL;
  int err = aml_allocator_buddy_create(&allocator, area, NULL);
  if (err != AML_SUCCESS) {
    fprintf(stderr, "buddy create: %s\n", aml_strerror(err));
    return 1;
  }
  void *pieces[1024];
  for (int i = 0; i < 1024; ++i) {
    pieces[i] = aml_alloc(allocator, 4096);
    if (!pieces[i]) {
      aml_perror("aml_alloc");
      return 1;
    }
  }
  for (int i = 0; i < 1024; ++i) aml_free(allocator, pieces[i]);
  err = aml_allocator_buddy_destroy(&allocator);
  printf("1024 allocations of 4 KiB from %s: %s\n",
         area == &aml_area_cuda ? "the CUDA area" : "the linux area", aml_strerror(err));
  aml_finalize();
  return err == AML_SUCCESS ? 0 : 1;
}
