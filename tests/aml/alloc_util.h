/* Helpers of the AML allocator tests (test_allocator_*.c, test_buddy_lowlevel.c): a
 * user-defined area over host memory (AML's allocators treat it as any foreign area, through
 * its mmap and munmap), writing and checking random bytes in any memory, and a stress loop of
 * interleaved allocations and frees with overlap checks. */
#ifndef MEMAREA_TESTS_AML_ALLOC_UTIL_H
#define MEMAREA_TESTS_AML_ALLOC_UTIL_H

#include <aml.h>
#include <aml/higher/allocator.h>
#include <memarea/memarea.h>

#include "check.h"

/* --- a user-defined area: host memory from malloc ------------------------------- */

#define HOST_AREA_MAX 4096

/** The state of a host area: what it mapped, and failures to inject. */
struct host_area_state {
  pthread_mutex_t lock;
  void *ptrs[HOST_AREA_MAX];     /* what mmap returned: 4 KiB aligned within bases[i] */
  void *bases[HOST_AREA_MAX];    /* what malloc returned */
  size_t sizes[HOST_AREA_MAX];
  int live;             /* mappings not yet unmapped */
  long mmaps, munmaps;  /* calls that succeeded */
  long bad_munmaps;     /* munmaps of an unknown pointer or with the wrong size */
  size_t last_size;     /* the size of the last mmap asked for */
  struct aml_area_mmap_options *last_opts;
  int fail_mmaps;       /* the next n mmaps fail with fail_code */
  int fail_munmaps;     /* the next n munmaps fail with -fail_code */
  int fail_code;
};

static inline void *host_area_mmap(const struct aml_area_data *data, size_t size,
                            struct aml_area_mmap_options *opts) {
  struct host_area_state *s = (struct host_area_state *)data;
  void *p = NULL;
  pthread_mutex_lock(&s->lock);
  s->last_size = size;
  s->last_opts = opts;
  if (s->fail_mmaps > 0) {
    --s->fail_mmaps;
    aml_errno = s->fail_code;
    pthread_mutex_unlock(&s->lock);
    return NULL;
  }
  void *base = s->live == HOST_AREA_MAX ? NULL : malloc(size + 4096);
  if (!base) {
    aml_errno = AML_ENOMEM;
    pthread_mutex_unlock(&s->lock);
    return NULL;
  }
  /* 4 KiB aligned, as a page-granular area would give. */
  p = (void *)(((uintptr_t)base + 4095) & ~(uintptr_t)4095);
  s->bases[s->live] = base;
  s->ptrs[s->live] = p;
  s->sizes[s->live] = size;
  ++s->live;
  ++s->mmaps;
  pthread_mutex_unlock(&s->lock);
  return p;
}

static inline int host_area_munmap(const struct aml_area_data *data, void *ptr, size_t size) {
  struct host_area_state *s = (struct host_area_state *)data;
  pthread_mutex_lock(&s->lock);
  if (s->fail_munmaps > 0) {
    --s->fail_munmaps;
    pthread_mutex_unlock(&s->lock);
    return -s->fail_code;
  }
  for (int i = 0; i < s->live; ++i) {
    if (s->ptrs[i] != ptr) continue;
    if (s->sizes[i] != size) break;
    free(s->bases[i]);
    s->bases[i] = s->bases[s->live - 1];
    s->ptrs[i] = s->ptrs[s->live - 1];
    s->sizes[i] = s->sizes[s->live - 1];
    --s->live;
    ++s->munmaps;
    pthread_mutex_unlock(&s->lock);
    return AML_SUCCESS;
  }
  ++s->bad_munmaps;
  pthread_mutex_unlock(&s->lock);
  return -AML_EINVAL;
}

static struct aml_area_ops host_area_ops = {host_area_mmap, host_area_munmap, NULL};

/** A host area over state s (zeroed, its lock initialised). */
static inline struct aml_area host_area_make(struct host_area_state *s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->lock, NULL);
  struct aml_area a = {&host_area_ops, (struct aml_area_data *)s};
  return a;
}

/** Whether [p, p + n) lies inside one live mapping of s. */
static inline int host_area_contains(struct host_area_state *s, const void *p, size_t n) {
  int inside = 0;
  pthread_mutex_lock(&s->lock);
  for (int i = 0; i < s->live; ++i) {
    const char *b = (const char *)s->ptrs[i];
    if ((const char *)p >= b && (const char *)p + n <= b + s->sizes[i]) inside = 1;
  }
  pthread_mutex_unlock(&s->lock);
  return inside;
}

/* --- bytes --------------------------------------------------------------------------------- */

/** Fills n bytes with the xorshift stream of seed, 8 bytes a step (fast enough for 16 MiB). */
static inline void fill_seeded(unsigned char *b, size_t n, uint64_t seed) {
  uint64_t x = seed | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(b + i, &x, 8);
  }
  for (; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (unsigned char)(x >> 24);
  }
}

/** Writes the seed's bytes into p (device memory through memarea_memcpy when device).
 *  1 on success. */
static inline int write_seeded(void *p, size_t n, uint64_t seed, int device) {
  if (!device) {
    fill_seeded((unsigned char *)p, n, seed);
    return 1;
  }
  unsigned char *in = (unsigned char *)malloc(n);
  if (!in) return 0;
  fill_seeded(in, n, seed);
  const int ok = memarea_memcpy(p, in, n) == MEMAREA_SUCCESS;
  free(in);
  return ok;
}

/** Whether p holds the seed's bytes, every one of them. */
static inline int check_seeded(const void *p, size_t n, uint64_t seed, int device) {
  unsigned char *want = (unsigned char *)malloc(n);
  unsigned char *got = device ? (unsigned char *)malloc(n) : NULL;
  int ok = want && (!device || got);
  if (ok) {
    fill_seeded(want, n, seed);
    if (device) ok = memarea_memcpy(got, p, n) == MEMAREA_SUCCESS && memcmp(got, want, n) == 0;
    else ok = memcmp(p, want, n) == 0;
  }
  free(want);
  free(got);
  return ok;
}

/* --- stress: interleaved allocations and frees ---------------------------------------------- */

/** xorshift64 step. */
static inline uint64_t next_random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

/** A random size in [lo, hi], a multiple of 4 KiB when lo is. */
static inline size_t random_size(uint64_t *state, size_t lo, size_t hi) {
  size_t s = lo + (size_t)(next_random(state) % (hi - lo + 1));
  if (lo % 4096 == 0) s -= s % 4096;
  return s < lo ? lo : s;
}

#define STRESS_MAX_LIVE 64

/** iterations steps on allocator: allocate a random size in [lo, hi] (while fewer than
 *  max_live are live) or free a random live one, alternately at random. Every allocation is
 *  checked not to overlap a live one, filled with its own random bytes and checked byte for
 *  byte at its free; at the end all are freed. device: the memory is read and written through
 *  memarea_memcpy. Returns the number of failed checks (also recorded through CHECK). */
static inline int stress_allocator(struct aml_allocator *allocator, size_t lo, size_t hi,
                            int iterations, int max_live, int device, uint64_t seed) {
  struct {
    unsigned char *p;
    size_t n;
    uint64_t seed;
  } live[STRESS_MAX_LIVE];
  int count = 0;
  const int failures_before = check_failures;
  uint64_t rng = seed | 1;
  if (max_live > STRESS_MAX_LIVE) max_live = STRESS_MAX_LIVE;
  for (int it = 0; it < iterations || count > 0; ++it) {
    const int do_alloc = it < iterations && count < max_live &&
                         (count == 0 || (next_random(&rng) & 1));
    if (do_alloc) {
      const size_t n = random_size(&rng, lo, hi);
      unsigned char *p = (unsigned char *)aml_alloc(allocator, n);
      CHECK(p != NULL);
      if (!p) continue;
      for (int k = 0; k < count; ++k)
        CHECK(p + n <= live[k].p || live[k].p + live[k].n <= p); /* no overlap */
      const uint64_t s = next_random(&rng);
      CHECK(write_seeded(p, n, s, device));
      live[count].p = p;
      live[count].n = n;
      live[count].seed = s;
      ++count;
    } else {
      const int k = (int)(next_random(&rng) % (uint64_t)count);
      CHECK(check_seeded(live[k].p, live[k].n, live[k].seed, device));
      CHECK_EQ(aml_free(allocator, live[k].p), AML_SUCCESS);
      live[k] = live[--count];
    }
  }
  return check_failures - failures_before;
}

#endif
