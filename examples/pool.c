/* Pools from C: a stream-ordered pool over device memory; allocations that cost tens of
 * nanoseconds, known to lookup and copies; a free on one stream reused by another once that
 * stream has passed the free. Runs on any backend:
 * `MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 ./example_pool`. */
#include <memarea/memarea.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    memarea_status s_ = (call);                                                      \
    if (s_ != MEMAREA_SUCCESS) {                                                     \
      fprintf(stderr, "%s: %s (%s)\n", #call, memarea_status_name(s_),               \
              memarea_last_error_message());                                         \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  int devices = 0;
  CHECK(memarea_get_device_count(&devices));
  if (devices == 0) {
    printf("no devices: nothing to show\n");
    return 0;
  }
  memarea_area_t area;
  CHECK(memarea_area_create(&area, 0, MEMAREA_AREA_DEFAULT)); /* device memory on device 0 */
  memarea_pool_options options = MEMAREA_POOL_OPTIONS_INIT;
  options.maximum_size = (size_t)256 << 20; /* never more than 256 MiB from the driver */
  memarea_pool_t pool;
  CHECK(memarea_pool_create(&pool, area, &options));

  memarea_stream_t a, b;
  CHECK(memarea_set_device(0)); /* streams are made on the current device */
  CHECK(memarea_stream_create(&a));
  CHECK(memarea_stream_create(&b));

  void *x = NULL;
  CHECK(memarea_pool_alloc(pool, &x, 1 << 20, a));
  char host[256];
  memset(host, 0x5a, sizeof host);
  CHECK(memarea_memcpy(x, host, sizeof host)); /* pooled memory is ordinary memarea memory */
  memarea_allocation_info info;
  CHECK(memarea_pointer_get_info(&info, (char *)x + 100));
  printf("%p is inside a %zu-byte piece starting at %p on device %d\n", (void *)((char *)x + 100),
         info.size, info.base, info.device);

  CHECK(memarea_pool_free(pool, x, a)); /* reused at once by allocations on a */
  void *again = NULL;
  CHECK(memarea_pool_alloc(pool, &again, 1 << 20, a));
  printf("reallocated on the same stream: %s\n", again == x ? "the same memory" : "other memory");
  CHECK(memarea_pool_free(pool, again, a));
  /* On b, the memory comes back only once a has passed the free; synchronizing a is one way to
   * make sure of that (an event that b waits for is another). */
  CHECK(memarea_stream_synchronize(a));
  void *on_b = NULL;
  CHECK(memarea_pool_alloc(pool, &on_b, 1 << 20, b));
  CHECK(memarea_pool_free(pool, on_b, b));

  memarea_pool_stats stats;
  CHECK(memarea_pool_get_stats(pool, &stats));
  printf("reserved %zu bytes in %zu driver allocation(s); %zu live\n", stats.bytes_reserved,
         stats.driver_allocations, stats.live_allocations);
  CHECK(memarea_pool_trim(pool, 0)); /* gives the free blocks back */
  CHECK(memarea_pool_destroy(pool));
  CHECK(memarea_stream_destroy(a));
  CHECK(memarea_stream_destroy(b));
  CHECK(memarea_area_destroy(area));
  return 0;
}
