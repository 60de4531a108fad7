/* Experiment (not part of the library): a CUDAPluggableAllocator pair that sits in front of
 * memarea_torch_malloc / memarea_torch_free, for bench/experiments/mlp_allocator_probe.py.
 *
 *   probe_malloc / probe_free   forward to memarea's pair, counting calls, the CPU time inside
 *                               them, and the calls made on another thread than the first
 *                               caller's (PyTorch's autograd runs backward on a thread of its
 *                               own);
 *   floor_malloc / floor_free   the least a pluggable allocator can cost: freed pointers kept
 *                               in an exact-size list under one mutex and handed out again,
 *                               never given back (memarea only for a size's first pieces).
 *
 * The library to forward to is named by MEMAREA_LIBRARY. Build (the GPU image has gcc):
 *   gcc -O2 -shared -fPIC -o torch_alloc_shim.so bench/experiments/torch_alloc_shim.c -ldl -lpthread
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void* (*malloc_fn)(ptrdiff_t, int, void*);
typedef void (*free_fn)(void*, ptrdiff_t, int, void*);

static malloc_fn real_malloc;
static free_fn real_free;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_t first_thread;
static _Atomic int have_first;

static void load(void) {
  const char* path = getenv("MEMAREA_LIBRARY");
  void* lib = dlopen(path ? path : "libmemarea.so", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    fprintf(stderr, "torch_alloc_shim: %s\n", dlerror());
    abort();
  }
  real_malloc = (malloc_fn)dlsym(lib, "memarea_torch_malloc");
  real_free = (free_fn)dlsym(lib, "memarea_torch_free");
  if (!real_malloc || !real_free) abort();
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static _Atomic uint64_t n_malloc, n_free, ns_malloc, ns_free, other_malloc, other_free;

static int other_thread(void) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&have_first, &expected, 1)) first_thread = pthread_self();
  return !pthread_equal(first_thread, pthread_self());
}

void* probe_malloc(ptrdiff_t size, int device, void* stream) {
  pthread_once(&once, load);
  if (other_thread()) other_malloc++;
  const uint64_t t0 = now_ns();
  void* p = real_malloc(size, device, stream);
  ns_malloc += now_ns() - t0;
  n_malloc++;
  return p;
}

void probe_free(void* p, ptrdiff_t size, int device, void* stream) {
  if (other_thread()) other_free++;
  const uint64_t t0 = now_ns();
  real_free(p, size, device, stream);
  ns_free += now_ns() - t0;
  n_free++;
}

/* {mallocs, frees, ns in mallocs, ns in frees, mallocs on another thread, frees on another} */
void probe_stats(uint64_t* out) {
  out[0] = n_malloc;
  out[1] = n_free;
  out[2] = ns_malloc;
  out[3] = ns_free;
  out[4] = other_malloc;
  out[5] = other_free;
}

/* The floor: an open-addressed table of sizes, each with a stack of freed pointers. */
enum { kSizes = 1024, kDepth = 64 };
struct slot {
  ptrdiff_t size;
  int count;
  void* p[kDepth];
};
static struct slot table[kSizes];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static struct slot* slot_of(ptrdiff_t size) {
  for (size_t i = ((size_t)size * 0x9e3779b97f4a7c15ull) >> 54, k = 0; k < kSizes;
       i = (i + 1) % kSizes, ++k)
    if (table[i].size == size || table[i].size == 0) {
      table[i].size = size;
      return &table[i];
    }
  return NULL;
}

void* floor_malloc(ptrdiff_t size, int device, void* stream) {
  pthread_once(&once, load);
  pthread_mutex_lock(&table_lock);
  struct slot* s = slot_of(size);
  void* p = s && s->count ? s->p[--s->count] : NULL;
  pthread_mutex_unlock(&table_lock);
  return p ? p : real_malloc(size, device, stream);
}

void floor_free(void* p, ptrdiff_t size, int device, void* stream) {
  pthread_mutex_lock(&table_lock);
  struct slot* s = slot_of(size);
  const int kept = s && s->count < kDepth;
  if (kept) s->p[s->count++] = p;
  pthread_mutex_unlock(&table_lock);
  if (!kept) real_free(p, size, device, stream);
}
