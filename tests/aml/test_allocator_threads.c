/* AML's area, buddy and sized allocators shared by several threads, over the CUDA area (a
 * memarea pool) and over a user-defined area: each thread allocates random sizes, writes its
 * own bytes into every piece and checks them before freeing it, frees pieces that other
 * threads allocated (handed over through a shared slot table), and races other threads to
 * free the same piece (exactly one free succeeds); buddy threads use the chunk calls too. Run
 * under TSan by the concurrency label. */
#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/area.h>
#include <aml/higher/allocator/buddy.h>
#include <aml/higher/allocator/sized.h>
#include <memarea/memarea.h>

#include "alloc_util.h"

#define THREADS 4
#define STEPS 2000
#define SLOTS 16
#define MAX_SIZE 16384

static int g_devices = 0;

/* What the threads of one run share. */
struct shared {
  struct aml_allocator *allocator;
  int device;      /* the memory is read and written through memarea_memcpy */
  int use_chunks;  /* the buddy allocator: chunk calls too */
  pthread_mutex_t lock;
  /* Pieces handed from one thread to another: freed by whoever takes them. */
  struct {
    void *p;
    size_t n;
    uint64_t seed;
  } slots[SLOTS];
  pthread_cond_t race_cond;  /* the race starts when all threads arrived */
  int race_arrived;
  void *race_ptr;        /* a piece every thread tries to free at once */
  int race_successes;
  int failures;          /* checks failed in threads */
};

struct worker {
  struct shared *s;
  int id;
};

/* Checks in threads count into s->failures (CHECK's counters are not thread safe). */
#define TCHECK(s, cond)                                                             \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      pthread_mutex_lock(&(s)->lock);                                               \
      ++(s)->failures;                                                              \
      pthread_mutex_unlock(&(s)->lock);                                             \
      fprintf(stderr, "%s:%d: thread check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                               \
  } while (0)

static void *work(void *arg) {
  struct worker *w = (struct worker *)arg;
  struct shared *s = w->s;
  uint64_t rng = 0x1234567ull * (uint64_t)(w->id + 1);
  struct {
    void *p;
    size_t n;
    uint64_t seed;
  } mine[8];
  int count = 0;
  for (int step = 0; step < STEPS; ++step) {
    const uint64_t r = next_random(&rng);
    if (count < 8 && (r & 3) != 0) {
      const size_t n = 1 + (size_t)(next_random(&rng) % MAX_SIZE);
      void *p = aml_alloc(s->allocator, n);
      TCHECK(s, p != NULL);
      if (!p) continue;
      const uint64_t seed = next_random(&rng);
      TCHECK(s, write_seeded(p, n, seed, s->device));
      mine[count].p = p;
      mine[count].n = n;
      mine[count].seed = seed;
      ++count;
    } else if (count > 0) {
      const int k = (int)(next_random(&rng) % (uint64_t)count);
      TCHECK(s, check_seeded(mine[k].p, mine[k].n, mine[k].seed, s->device));
      /* Hand it over to whoever takes the slot next, or free it. */
      const int slot = (int)(next_random(&rng) % SLOTS);
      void *taken = NULL;
      size_t taken_n = 0;
      uint64_t taken_seed = 0;
      pthread_mutex_lock(&s->lock);
      taken = s->slots[slot].p;
      taken_n = s->slots[slot].n;
      taken_seed = s->slots[slot].seed;
      s->slots[slot].p = mine[k].p;
      s->slots[slot].n = mine[k].n;
      s->slots[slot].seed = mine[k].seed;
      pthread_mutex_unlock(&s->lock);
      if (taken) {
        TCHECK(s, check_seeded(taken, taken_n, taken_seed, s->device));
        TCHECK(s, aml_free(s->allocator, taken) == AML_SUCCESS);
      }
      mine[k] = mine[--count];
    }
    if (s->use_chunks && (r & 31) == 0) {
      struct aml_allocator_chunk *c = aml_allocator_alloc_chunk(s->allocator, 1 + (r >> 40) % 5000);
      TCHECK(s, c != NULL && c->user_data == NULL);
      if (c) {
        c->user_data = w;
        TCHECK(s, write_seeded(c->ptr, c->size, r, s->device));
        TCHECK(s, check_seeded(c->ptr, c->size, r, s->device));
        TCHECK(s, c->user_data == w);
        TCHECK(s, aml_allocator_free_chunk(s->allocator, c) == AML_SUCCESS);
      }
    }
  }
  for (int k = 0; k < count; ++k) {
    TCHECK(s, check_seeded(mine[k].p, mine[k].n, mine[k].seed, s->device));
    TCHECK(s, aml_free(s->allocator, mine[k].p) == AML_SUCCESS);
  }
  /* The race: every thread frees the same piece at once; exactly one succeeds. */
  pthread_mutex_lock(&s->lock);
  if (++s->race_arrived == THREADS) pthread_cond_broadcast(&s->race_cond);
  while (s->race_arrived < THREADS) pthread_cond_wait(&s->race_cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
  const int err = aml_free(s->allocator, s->race_ptr);
  TCHECK(s, err == AML_SUCCESS || err == -AML_EINVAL);
  if (err == AML_SUCCESS) {
    pthread_mutex_lock(&s->lock);
    ++s->race_successes;
    pthread_mutex_unlock(&s->lock);
  }
  return NULL;
}

static void run(const char *name, struct aml_allocator *allocator, int device, int use_chunks) {
  struct shared s;
  memset(&s, 0, sizeof s);
  s.allocator = allocator;
  s.device = device;
  s.use_chunks = use_chunks;
  pthread_mutex_init(&s.lock, NULL);
  pthread_cond_init(&s.race_cond, NULL);
  s.race_ptr = aml_alloc(allocator, 64);
  REQUIRE(s.race_ptr != NULL);
  pthread_t threads[THREADS];
  struct worker workers[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    workers[i].s = &s;
    workers[i].id = i;
    REQUIRE(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
  }
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  for (int k = 0; k < SLOTS; ++k) {
    if (!s.slots[k].p) continue;
    CHECK(check_seeded(s.slots[k].p, s.slots[k].n, s.slots[k].seed, device));
    CHECK_EQ(aml_free(allocator, s.slots[k].p), AML_SUCCESS);
  }
  if (s.failures) fprintf(stderr, "%s: %d checks failed in threads\n", name, s.failures);
  CHECK_EQ(s.failures, 0);
  CHECK_EQ(s.race_successes, 1);
  pthread_cond_destroy(&s.race_cond);
  pthread_mutex_destroy(&s.lock);
}

static void run_all(struct aml_area *area, int device) {
  struct aml_allocator *a = NULL;
  REQUIRE(aml_allocator_area_create(&a, area, NULL) == AML_SUCCESS);
  run("area", a, device, 0);
  CHECK_EQ(aml_allocator_area_destroy(&a), AML_SUCCESS);
  REQUIRE(aml_allocator_buddy_create(&a, area, NULL) == AML_SUCCESS);
  run("buddy", a, device, 1);
  CHECK_EQ(aml_allocator_buddy_destroy(&a), AML_SUCCESS);
  REQUIRE(aml_allocator_sized_create(&a, MAX_SIZE, area, NULL) == AML_SUCCESS);
  run("sized", a, device, 0);
  CHECK_EQ(aml_allocator_sized_destroy(&a), AML_SUCCESS);
}

int main(int argc, char **argv) {
  REQUIRE(aml_init(&argc, &argv) == AML_SUCCESS);
  if (memarea_get_device_count(&g_devices) != MEMAREA_SUCCESS) g_devices = 0;
  uint64_t seed = 2;
  unsigned char scratch[8];
  fill_random(scratch, sizeof scratch, &seed);
  struct host_area_state hs;
  struct aml_area host = host_area_make(&hs);
  run_all(&host, 0);
  CHECK_EQ(hs.live, 0);
  CHECK_EQ(hs.bad_munmaps, 0);
  if (g_devices > 0) {
    REQUIRE(memarea_set_device(0) == MEMAREA_SUCCESS);
    run_all(&aml_area_cuda, 1);
  }
  aml_finalize();
  return check_report("test_allocator_threads");
}
