/* AML's low-level buddy allocator (buddy_allocator_create/extend/alloc/free/destroy) over host
 * memory: every argument rule and error code, blocks of the power of two above the size (at
 * least 64 bytes) aligned on their size within their range, exhaustion and full merging back,
 * several ranges, and random allocations and frees checked against each other's bytes. */
#include <aml.h>
#include <aml/higher/allocator/buddy.h>

#include "alloc_util.h"

/* Host memory for the ranges, aligned so that block alignment can be checked on addresses. */
static unsigned char g_range[1 << 20] __attribute__((aligned(1 << 20)));
static unsigned char g_second[1 << 16] __attribute__((aligned(1 << 16)));

static size_t block_size(size_t n) {
  size_t b = 64;
  while (b < n) b <<= 1;
  return b;
}

static void test_arguments(void) {
  struct buddy_allocator *b = NULL;
  void *out = NULL;
  CHECK_EQ(buddy_allocator_create(NULL), -AML_EINVAL);
  REQUIRE(buddy_allocator_create(&b) == AML_SUCCESS);
  REQUIRE(b != NULL);

  /* extend: NULL allocator or pointer, sizes 0, not a power of two, below 64. */
  CHECK_EQ(buddy_allocator_extend(NULL, g_range, 4096), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, NULL, 4096), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, g_range, 0), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, g_range, 96), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, g_range, 32), -AML_EINVAL);
  /* Nothing was added by those. */
  CHECK_EQ(buddy_allocator_alloc(b, &out, 64), -AML_ENOMEM);

  CHECK_EQ(buddy_allocator_extend(b, g_range, 4096), AML_SUCCESS);
  /* An overlapping range, the same one, one inside it: -AML_EINVAL. */
  CHECK_EQ(buddy_allocator_extend(b, g_range, 4096), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, g_range + 2048, 64), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_extend(b, g_range + 4096 - 64, 128), -AML_EINVAL);

  /* alloc: NULL allocator or out, size 0. */
  CHECK_EQ(buddy_allocator_alloc(NULL, &out, 64), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_alloc(b, NULL, 64), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_alloc(b, &out, 0), -AML_EINVAL);
  /* Larger than every range: -AML_ENOMEM. */
  CHECK_EQ(buddy_allocator_alloc(b, &out, 8192), -AML_ENOMEM);
  CHECK_EQ(buddy_allocator_alloc(b, &out, (size_t)-1), -AML_ENOMEM);

  /* free: NULL allocator, unknown pointers, inside a block, twice. */
  void *p = NULL;
  REQUIRE(buddy_allocator_alloc(b, &p, 100) == AML_SUCCESS);
  CHECK(p == g_range);
  CHECK_EQ(buddy_allocator_free(NULL, p), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_free(b, NULL), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_free(b, g_second), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_free(b, (char *)p + 64), -AML_EINVAL); /* a free block's start */
  CHECK_EQ(buddy_allocator_free(b, (char *)p + 1), -AML_EINVAL);

  /* destroy: NULL; busy while a block is allocated (and still usable afterwards). */
  CHECK_EQ(buddy_allocator_destroy(NULL), -AML_EINVAL);
  struct buddy_allocator *none = NULL;
  CHECK_EQ(buddy_allocator_destroy(&none), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_destroy(&b), -AML_EBUSY);
  REQUIRE(b != NULL);
  CHECK_EQ(buddy_allocator_free(b, p), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_free(b, p), -AML_EINVAL);
  CHECK_EQ(buddy_allocator_destroy(&b), AML_SUCCESS);
  CHECK(b == NULL);
}

static void test_split_and_merge(void) {
  struct buddy_allocator *b = NULL;
  REQUIRE(buddy_allocator_create(&b) == AML_SUCCESS);
  REQUIRE(buddy_allocator_extend(b, g_range, 4096) == AML_SUCCESS);
  /* 64 blocks of 64 bytes fill 4 KiB exactly, each distinct and aligned. */
  void *blocks[64];
  for (int i = 0; i < 64; ++i) {
    REQUIRE(buddy_allocator_alloc(b, &blocks[i], 1) == AML_SUCCESS);
    CHECK((unsigned char *)blocks[i] >= g_range && (unsigned char *)blocks[i] < g_range + 4096);
    CHECK((uintptr_t)blocks[i] % 64 == 0);
    for (int j = 0; j < i; ++j) CHECK(blocks[i] != blocks[j]);
  }
  void *out = NULL;
  CHECK_EQ(buddy_allocator_alloc(b, &out, 1), -AML_ENOMEM);
  /* The even 64-byte slots freed: 2 KiB free, but no two of them buddies, so 128 bytes do
   * not fit. */
  for (int i = 0; i < 64; ++i)
    if ((((unsigned char *)blocks[i] - g_range) / 64) % 2 == 0)
      CHECK_EQ(buddy_allocator_free(b, blocks[i]), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &out, 128), -AML_ENOMEM);
  CHECK_EQ(buddy_allocator_alloc(b, &out, 64), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_free(b, out), AML_SUCCESS);
  /* The odd ones freed too: the blocks merge back into the whole range. */
  for (int i = 0; i < 64; ++i)
    if ((((unsigned char *)blocks[i] - g_range) / 64) % 2 == 1)
      CHECK_EQ(buddy_allocator_free(b, blocks[i]), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &out, 4096), AML_SUCCESS);
  CHECK(out == g_range);
  CHECK_EQ(buddy_allocator_free(b, out), AML_SUCCESS);

  /* Sizes round up to powers of two: 2049 bytes take the whole 4 KiB. */
  CHECK_EQ(buddy_allocator_alloc(b, &out, 2049), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &blocks[0], 1), -AML_ENOMEM);
  CHECK_EQ(buddy_allocator_free(b, out), AML_SUCCESS);

  /* A second range: allocations come from both; one larger than each fails. */
  REQUIRE(buddy_allocator_extend(b, g_second, sizeof g_second) == AML_SUCCESS);
  void *in_second = NULL, *in_first = NULL;
  CHECK_EQ(buddy_allocator_alloc(b, &in_second, 8192), AML_SUCCESS);
  CHECK((unsigned char *)in_second >= g_second &&
        (unsigned char *)in_second + 8192 <= g_second + sizeof g_second);
  CHECK_EQ(buddy_allocator_alloc(b, &in_first, 4096), AML_SUCCESS);
  CHECK(in_first == g_range);
  CHECK_EQ(buddy_allocator_alloc(b, &out, 1 << 17), -AML_ENOMEM);
  CHECK_EQ(buddy_allocator_destroy(&b), -AML_EBUSY);
  CHECK_EQ(buddy_allocator_free(b, in_second), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_free(b, in_first), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &out, sizeof g_second), AML_SUCCESS);
  CHECK(out == g_second);
  CHECK_EQ(buddy_allocator_free(b, out), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_destroy(&b), AML_SUCCESS);
}

/* A range whose start is not aligned on its size: buddies are found relative to its start. */
static void test_unaligned_range(void) {
  struct buddy_allocator *b = NULL;
  REQUIRE(buddy_allocator_create(&b) == AML_SUCCESS);
  unsigned char *base = g_range + 64;
  REQUIRE(buddy_allocator_extend(b, base, 1024) == AML_SUCCESS);
  void *x = NULL, *y = NULL, *z = NULL;
  CHECK_EQ(buddy_allocator_alloc(b, &x, 512), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &y, 256), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &z, 256), AML_SUCCESS);
  CHECK(x == base);
  CHECK((unsigned char *)y == base + 512 || (unsigned char *)z == base + 512);
  CHECK_EQ(buddy_allocator_free(b, y), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_free(b, x), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_free(b, z), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_alloc(b, &x, 1024), AML_SUCCESS);
  CHECK(x == base);
  CHECK_EQ(buddy_allocator_free(b, x), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_destroy(&b), AML_SUCCESS);
}

/* Random allocations and frees over 1 MiB: each block within the range, aligned on its size,
 * filled with its own bytes and checked at its free (an overlap would overwrite them). */
static void test_random(void) {
  struct buddy_allocator *b = NULL;
  REQUIRE(buddy_allocator_create(&b) == AML_SUCCESS);
  REQUIRE(buddy_allocator_extend(b, g_range, sizeof g_range) == AML_SUCCESS);
  enum { kMaxLive = 200 };
  struct {
    unsigned char *p;
    size_t n;
    uint64_t seed;
  } live[kMaxLive];
  int count = 0, failures = 0;
  size_t used = 0;
  uint64_t rng = 99;
  for (int it = 0; it < 20000; ++it) {
    if (count < kMaxLive && (count == 0 || next_random(&rng) % 3 != 0)) {
      const size_t n = 1 + (size_t)(next_random(&rng) % (1u << (next_random(&rng) % 15)));
      void *p = NULL;
      const int err = buddy_allocator_alloc(b, &p, n);
      if (err == -AML_ENOMEM) {
        /* Only when no block that large can be free: used + block > range, or fragmented. */
        CHECK(used + block_size(n) > sizeof g_range || count > 0);
        continue;
      }
      CHECK_EQ(err, AML_SUCCESS);
      if (err != AML_SUCCESS) continue;
      unsigned char *q = (unsigned char *)p;
      CHECK(q >= g_range && q + n <= g_range + sizeof g_range);
      CHECK((uintptr_t)(q - g_range) % block_size(n) == 0);
      live[count].p = q;
      live[count].n = n;
      live[count].seed = next_random(&rng);
      fill_seeded(q, n, live[count].seed);
      used += block_size(n);
      ++count;
    } else {
      const int k = (int)(next_random(&rng) % (uint64_t)count);
      if (!check_seeded(live[k].p, live[k].n, live[k].seed, 0)) ++failures;
      CHECK_EQ(buddy_allocator_free(b, live[k].p), AML_SUCCESS);
      CHECK_EQ(buddy_allocator_free(b, live[k].p), -AML_EINVAL);
      used -= block_size(live[k].n);
      live[k] = live[--count];
    }
  }
  CHECK_EQ(failures, 0);
  while (count > 0) {
    CHECK(check_seeded(live[count - 1].p, live[count - 1].n, live[count - 1].seed, 0));
    CHECK_EQ(buddy_allocator_free(b, live[--count].p), AML_SUCCESS);
  }
  /* Everything merged back: the whole range in one block. */
  void *all = NULL;
  CHECK_EQ(buddy_allocator_alloc(b, &all, sizeof g_range), AML_SUCCESS);
  CHECK(all == g_range);
  CHECK_EQ(buddy_allocator_free(b, all), AML_SUCCESS);
  CHECK_EQ(buddy_allocator_destroy(&b), AML_SUCCESS);
}

int main(void) {
  uint64_t seed = 1;
  fill_random(g_second, 16, &seed); /* memory the allocator never reads or writes */
  test_arguments();
  test_split_and_merge();
  test_unaligned_range();
  test_random();
  return check_report("test_buddy_lowlevel");
}
