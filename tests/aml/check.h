/* The AML drop-in's tests are C programs built as an AML user builds them (through the
 * memarea-aml pkg-config module, or CMake's memarea::aml), so they use no test framework: CHECK
 * records a failure and goes on, and main returns check_report(). */
#ifndef MEMAREA_TESTS_AML_CHECK_H
#define MEMAREA_TESTS_AML_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;
static int check_count = 0;

/** Records a failure (with the expression and line) unless cond holds. */
#define CHECK(cond)                                                                  \
  do {                                                                               \
    ++check_count;                                                                   \
    if (!(cond)) {                                                                   \
      ++check_failures;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
    }                                                                                \
  } while (0)

/** CHECK(a == b) for integers, printing both values when they differ. */
#define CHECK_EQ(a, b)                                                                   \
  do {                                                                                   \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                      \
    ++check_count;                                                                       \
    if (check_a_ != check_b_) {                                                          \
      ++check_failures;                                                                  \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", __FILE__,     \
              __LINE__, #a, #b, check_a_, check_b_);                                     \
    }                                                                                    \
  } while (0)

/** Stops the program now when cond does not hold (what follows depends on it). */
#define REQUIRE(cond)                                                                \
  do {                                                                               \
    ++check_count;                                                                   \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);     \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

/** Fills n bytes with pseudo-random bytes from *state (xorshift64; never all zeros). */
static inline void fill_random(void *p, size_t n, uint64_t *state) {
  unsigned char *b = (unsigned char *)p;
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    b[i] = (unsigned char)(x >> 24);
  }
}

/** Prints the tally; the exit status for main. */
static int check_report(const char *name) {
  if (check_failures) {
    fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
    return 1;
  }
  printf("%s: all %d checks passed\n", name, check_count);
  return 0;
}

#endif
