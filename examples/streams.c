/* Streams another library made, events, and a pool piece used on two streams, from C. The
 * "foreign" stream here is the native handle of a stream memarea made, standing in for
 * torch.cuda.Stream().cuda_stream or a cudaStream_t the program made itself. Runs on any
 * backend: `MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 ./example_streams`. */
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

enum { N = 1 << 20 };
static unsigned char host[N], back[N];

int main(void) {
  int devices = 0;
  CHECK(memarea_get_device_count(&devices));
  if (devices == 0) {
    printf("no devices: nothing to show\n");
    return 0;
  }
  CHECK(memarea_set_device(0));
  memarea_stream_t owner_stream; /* what the other library owns */
  CHECK(memarea_stream_create(&owner_stream));
  void *native = NULL;
  CHECK(memarea_stream_get_native(&native, owner_stream));

  memarea_stream_t theirs, again, ours;
  CHECK(memarea_stream_wrap(&theirs, native, 0));
  CHECK(memarea_stream_wrap(&again, native, 0));
  printf("one native stream, one handle: %s\n", theirs == again ? "yes" : "no");
  CHECK(memarea_stream_create(&ours));

  memarea_area_t area;
  memarea_pool_t pool;
  CHECK(memarea_area_create(&area, 0, MEMAREA_AREA_DEFAULT));
  CHECK(memarea_pool_create(&pool, area, NULL));
  void *x = NULL;
  memset(host, 0x5a, sizeof host);
  CHECK(memarea_pool_alloc(pool, &x, N, ours));
  CHECK(memarea_memcpy_async(x, host, N, ours)); /* fill it on our stream */

  memarea_event_t filled, start, end;
  CHECK(memarea_event_create(&filled, MEMAREA_EVENT_DISABLE_TIMING));
  CHECK(memarea_event_create(&start, MEMAREA_EVENT_DEFAULT));
  CHECK(memarea_event_create(&end, MEMAREA_EVENT_BLOCKING_SYNC));
  CHECK(memarea_event_record(filled, ours));
  CHECK(memarea_stream_wait_event(theirs, filled)); /* their stream reads after the fill */
  CHECK(memarea_event_record(start, theirs));
  CHECK(memarea_memcpy_async(back, x, N, theirs));
  CHECK(memarea_event_record(end, theirs));
  CHECK(memarea_pool_record_stream(pool, x, theirs)); /* the free waits for their read too */
  CHECK(memarea_pool_free(pool, x, ours));

  CHECK(memarea_event_synchronize(end));
  float ms = 0;
  CHECK(memarea_event_elapsed(&ms, start, end));
  printf("their copy saw the fill: %s; it took %.3f ms\n",
         memcmp(back, host, N) == 0 ? "yes" : "no", (double)ms);
  memarea_status q = memarea_event_query(end);
  printf("event complete: %s\n", q == MEMAREA_SUCCESS ? "yes" : "no");

  CHECK(memarea_event_destroy(filled));
  CHECK(memarea_event_destroy(start));
  CHECK(memarea_event_destroy(end));
  CHECK(memarea_pool_destroy(pool));
  CHECK(memarea_area_destroy(area));
  CHECK(memarea_stream_destroy(ours));
  CHECK(memarea_stream_forget(theirs)); /* before the owner destroys the native stream */
  CHECK(memarea_stream_destroy(owner_stream));
  return 0;
}
