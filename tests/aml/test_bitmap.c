/* aml_bitmap (aml/utils/bitmap.h): every call, its edges (bit 0, bit AML_BITMAP_MAX - 1, the
 * first bit out of range, word boundaries), text both ways, and NULL arguments. A refused call
 * must leave the bitmap exactly as it was, so most checks compare against a saved copy. */
#include <aml.h>

#include "check.h"

#define LAST_BIT (AML_BITMAP_MAX - 1)

/** Whether exactly the bits [lo, hi] are set (lo > hi: none). */
static int only_range_set(const struct aml_bitmap *b, unsigned lo, unsigned hi) {
  for (unsigned i = 0; i < AML_BITMAP_MAX; ++i) {
    const int want = (lo <= hi && i >= lo && i <= hi) ? 1 : 0;
    if (aml_bitmap_isset(b, i) != want) return 0;
  }
  return 1;
}

/** A bitmap with a scattered pattern, to show that refused calls change nothing. */
static void pattern(struct aml_bitmap *b) {
  aml_bitmap_zero(b);
  for (unsigned i = 0; i < AML_BITMAP_MAX; i += 7) aml_bitmap_set(b, i);
  aml_bitmap_set(b, LAST_BIT);
}

static void test_layout(void) {
  CHECK_EQ(sizeof(struct aml_bitmap), AML_BITMAP_BYTES);
  CHECK_EQ(AML_BITMAP_SIZE * AML_BITMAP_NBITS, AML_BITMAP_MAX);
  CHECK_EQ(AML_BITMAP_NBITS, 8 * sizeof(unsigned long));
  /* bit i is bit i % NBITS of word i / NBITS: AML programs poke mask[] directly */
  struct aml_bitmap b;
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, AML_BITMAP_NBITS + 3);
  CHECK_EQ(b.mask[1], 1UL << 3);
  CHECK_EQ(b.mask[0], 0);
}

static void test_zero_fill_queries(void) {
  struct aml_bitmap b;
  memset(&b, 0x5a, sizeof b);
  CHECK_EQ(aml_bitmap_zero(&b), 0);
  CHECK_EQ(aml_bitmap_iszero(&b), 1);
  CHECK_EQ(aml_bitmap_isfull(&b), 0);
  CHECK_EQ(aml_bitmap_nset(&b), 0);
  CHECK_EQ(aml_bitmap_first(&b), -1);
  CHECK_EQ(aml_bitmap_last(&b), -1);

  CHECK_EQ(aml_bitmap_fill(&b), 0);
  CHECK_EQ(aml_bitmap_isfull(&b), 1);
  CHECK_EQ(aml_bitmap_iszero(&b), 0);
  CHECK_EQ(aml_bitmap_nset(&b), AML_BITMAP_MAX);
  CHECK_EQ(aml_bitmap_first(&b), 0);
  CHECK_EQ(aml_bitmap_last(&b), LAST_BIT);
  for (unsigned i = 0; i < AML_BITMAP_MAX; ++i)
    if (aml_bitmap_isset(&b, i) != 1) {
      CHECK(!"fill left a bit clear");
      break;
    }

  /* one bit clear is neither full nor zero */
  aml_bitmap_clear(&b, 1000);
  CHECK_EQ(aml_bitmap_isfull(&b), 0);
  CHECK_EQ(aml_bitmap_nset(&b), AML_BITMAP_MAX - 1);
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, LAST_BIT);
  CHECK_EQ(aml_bitmap_iszero(&b), 0);
}

static void test_set_clear_isset(void) {
  struct aml_bitmap b, saved;
  aml_bitmap_zero(&b);
  const unsigned edges[] = {0, 1, AML_BITMAP_NBITS - 1, AML_BITMAP_NBITS, 1024, LAST_BIT - 1,
                            LAST_BIT};
  for (size_t k = 0; k < sizeof edges / sizeof *edges; ++k) {
    const unsigned i = edges[k];
    CHECK_EQ(aml_bitmap_isset(&b, i), 0);
    CHECK_EQ(aml_bitmap_set(&b, i), 0);
    CHECK_EQ(aml_bitmap_isset(&b, i), 1);
    CHECK(only_range_set(&b, i, i));
    CHECK_EQ(aml_bitmap_first(&b), i);
    CHECK_EQ(aml_bitmap_last(&b), i);
    CHECK_EQ(aml_bitmap_set(&b, i), 0); /* setting twice keeps one bit */
    CHECK_EQ(aml_bitmap_nset(&b), 1);
    CHECK_EQ(aml_bitmap_clear(&b, i), 0);
    CHECK_EQ(aml_bitmap_isset(&b, i), 0);
    CHECK_EQ(aml_bitmap_iszero(&b), 1);
    CHECK_EQ(aml_bitmap_clear(&b, i), 0); /* clearing a clear bit is fine */
  }

  /* the first bit past the end, and far past it: -1 and nothing changes */
  pattern(&b);
  aml_bitmap_copy(&saved, &b);
  const unsigned outside[] = {AML_BITMAP_MAX, AML_BITMAP_MAX + 1, 1u << 20, 0xffffffffu};
  for (size_t k = 0; k < sizeof outside / sizeof *outside; ++k) {
    CHECK_EQ(aml_bitmap_isset(&b, outside[k]), -1);
    CHECK_EQ(aml_bitmap_set(&b, outside[k]), -1);
    CHECK_EQ(aml_bitmap_clear(&b, outside[k]), -1);
  }
  CHECK_EQ(aml_bitmap_isequal(&b, &saved), 1);

  /* first and last with several bits */
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, 130);
  aml_bitmap_set(&b, 5);
  aml_bitmap_set(&b, 2000);
  CHECK_EQ(aml_bitmap_first(&b), 5);
  CHECK_EQ(aml_bitmap_last(&b), 2000);
  CHECK_EQ(aml_bitmap_nset(&b), 3);
}

static void test_ranges(void) {
  struct aml_bitmap b, saved;
  /* ranges inside one word, across words, whole words, single bits, the whole map */
  const unsigned ranges[][2] = {{0, 0},
                                {LAST_BIT, LAST_BIT},
                                {3, 9},
                                {0, AML_BITMAP_NBITS - 1},
                                {AML_BITMAP_NBITS - 1, AML_BITMAP_NBITS},
                                {60, 200},
                                {AML_BITMAP_NBITS, 3 * AML_BITMAP_NBITS - 1},
                                {1, LAST_BIT - 1},
                                {0, LAST_BIT}};
  for (size_t k = 0; k < sizeof ranges / sizeof *ranges; ++k) {
    const unsigned lo = ranges[k][0], hi = ranges[k][1];
    aml_bitmap_zero(&b);
    CHECK_EQ(aml_bitmap_set_range(&b, lo, hi), 0);
    CHECK(only_range_set(&b, lo, hi));
    CHECK_EQ(aml_bitmap_nset(&b), hi - lo + 1);
    CHECK_EQ(aml_bitmap_first(&b), lo);
    CHECK_EQ(aml_bitmap_last(&b), hi);

    /* clearing the same range from a full map leaves its complement */
    aml_bitmap_fill(&b);
    CHECK_EQ(aml_bitmap_clear_range(&b, lo, hi), 0);
    CHECK_EQ(aml_bitmap_nset(&b), AML_BITMAP_MAX - (hi - lo + 1));
    int complement = 1;
    for (unsigned i = 0; i < AML_BITMAP_MAX; ++i)
      if (aml_bitmap_isset(&b, i) != (i < lo || i > hi)) complement = 0;
    CHECK(complement);
  }

  /* set_range adds to what is set; clear_range only clears its range */
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, 0);
  aml_bitmap_set(&b, 500);
  CHECK_EQ(aml_bitmap_set_range(&b, 100, 110), 0);
  CHECK_EQ(aml_bitmap_nset(&b), 13);
  CHECK_EQ(aml_bitmap_clear_range(&b, 105, 600), 0);
  CHECK_EQ(aml_bitmap_nset(&b), 6);
  CHECK_EQ(aml_bitmap_isset(&b, 0), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 104), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 500), 0);

  /* refused ranges: reversed, end out of range, both out of range */
  pattern(&b);
  aml_bitmap_copy(&saved, &b);
  CHECK_EQ(aml_bitmap_set_range(&b, 10, 9), -1);
  CHECK_EQ(aml_bitmap_clear_range(&b, 10, 9), -1);
  CHECK_EQ(aml_bitmap_set_range(&b, 0, AML_BITMAP_MAX), -1);
  CHECK_EQ(aml_bitmap_clear_range(&b, 0, AML_BITMAP_MAX), -1);
  CHECK_EQ(aml_bitmap_set_range(&b, AML_BITMAP_MAX, AML_BITMAP_MAX + 5), -1);
  CHECK_EQ(aml_bitmap_clear_range(&b, LAST_BIT, 0xffffffffu), -1);
  CHECK_EQ(aml_bitmap_isequal(&b, &saved), 1);
}

static void test_copy_equal(void) {
  struct aml_bitmap a, b;
  pattern(&a);
  aml_bitmap_zero(&b);
  CHECK_EQ(aml_bitmap_isequal(&a, &b), 0);
  aml_bitmap_copy(&b, &a);
  CHECK_EQ(aml_bitmap_isequal(&a, &b), 1);
  CHECK_EQ(memcmp(&a, &b, sizeof a), 0);
  aml_bitmap_copy(&b, &b); /* onto itself: unchanged */
  CHECK_EQ(aml_bitmap_isequal(&a, &b), 1);
  aml_bitmap_clear(&b, LAST_BIT);
  CHECK_EQ(aml_bitmap_isequal(&a, &b), 0);
  CHECK_EQ(aml_bitmap_isequal(&a, &a), 1);
}

static void test_ulong(void) {
  struct aml_bitmap b;
  unsigned long words[AML_BITMAP_SIZE + 2];

  /* from: the first size bits are copied, set and clear; bits past size keep their value */
  memset(words, 0, sizeof words);
  words[0] = 0x5UL;                                  /* bits 0 and 2 */
  words[1] = 1UL << (AML_BITMAP_NBITS - 1);          /* bit 2 * NBITS - 1 */
  aml_bitmap_fill(&b);
  aml_bitmap_copy_from_ulong(&b, words, 2 * AML_BITMAP_NBITS);
  CHECK_EQ(aml_bitmap_isset(&b, 0), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 1), 0);
  CHECK_EQ(aml_bitmap_isset(&b, 2), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 2 * AML_BITMAP_NBITS - 1), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 2 * AML_BITMAP_NBITS - 2), 0);
  CHECK_EQ(aml_bitmap_isset(&b, 2 * AML_BITMAP_NBITS), 1); /* past size: kept */
  CHECK_EQ(aml_bitmap_nset(&b), 3 + AML_BITMAP_MAX - 2 * AML_BITMAP_NBITS);

  /* size not on a word boundary: bit 2 is past size 2 */
  aml_bitmap_zero(&b);
  aml_bitmap_copy_from_ulong(&b, words, 2);
  CHECK_EQ(aml_bitmap_nset(&b), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 0), 1);

  /* size past the bitmap: clipped, the last bit comes through */
  memset(words, 0, sizeof words);
  words[AML_BITMAP_SIZE - 1] = 1UL << (AML_BITMAP_NBITS - 1);
  words[AML_BITMAP_SIZE] = ~0UL; /* beyond AML_BITMAP_MAX: never read into the bitmap */
  aml_bitmap_zero(&b);
  aml_bitmap_copy_from_ulong(&b, words, (AML_BITMAP_SIZE + 2) * AML_BITMAP_NBITS);
  CHECK_EQ(aml_bitmap_nset(&b), 1);
  CHECK_EQ(aml_bitmap_isset(&b, LAST_BIT), 1);

  /* to: the first size bits written, set and clear; dst's other bits kept */
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, 1);
  aml_bitmap_set(&b, AML_BITMAP_NBITS + 4);
  for (size_t i = 0; i < sizeof words / sizeof *words; ++i) words[i] = ~0UL;
  aml_bitmap_copy_to_ulong(&b, words, AML_BITMAP_NBITS + 8);
  CHECK_EQ(words[0], 0x2UL);
  CHECK_EQ(words[1], (~0UL << 8) | (1UL << 4));
  CHECK_EQ(words[2], ~0UL);

  /* round trip of the whole bitmap */
  struct aml_bitmap back;
  pattern(&b);
  memset(words, 0, sizeof words);
  aml_bitmap_copy_to_ulong(&b, words, AML_BITMAP_MAX);
  CHECK_EQ(words[AML_BITMAP_SIZE], 0); /* nothing written past the bitmap's words */
  aml_bitmap_zero(&back);
  aml_bitmap_copy_from_ulong(&back, words, AML_BITMAP_MAX);
  CHECK_EQ(aml_bitmap_isequal(&b, &back), 1);

  /* size 0 copies nothing */
  aml_bitmap_zero(&b);
  words[0] = ~0UL;
  aml_bitmap_copy_from_ulong(&b, words, 0);
  CHECK_EQ(aml_bitmap_iszero(&b), 1);
  aml_bitmap_fill(&b);
  words[0] = 0;
  aml_bitmap_copy_to_ulong(&b, words, 0);
  CHECK_EQ(words[0], 0);
}

static void test_to_string(void) {
  struct aml_bitmap b;
  aml_bitmap_zero(&b);
  aml_bitmap_set(&b, 0);
  aml_bitmap_set(&b, 3);
  aml_bitmap_set(&b, LAST_BIT);
  char *s = aml_bitmap_to_string(&b);
  REQUIRE(s != NULL);
  CHECK_EQ(strlen(s), AML_BITMAP_MAX + 2);
  CHECK_EQ(s[0], '[');
  CHECK_EQ(s[AML_BITMAP_MAX + 1], ']');
  CHECK(strncmp(s, "[10010", 6) == 0);
  CHECK_EQ(s[AML_BITMAP_MAX], '1');
  int only_digits = 1;
  for (int i = 1; i <= AML_BITMAP_MAX; ++i)
    if (s[i] != '0' && s[i] != '1') only_digits = 0;
  CHECK(only_digits);

  struct aml_bitmap back;
  aml_bitmap_fill(&back);
  CHECK_EQ(aml_bitmap_from_string(&back, s), 0);
  CHECK_EQ(aml_bitmap_isequal(&b, &back), 1);
  free(s);

  /* round trips of empty, full and patterned maps */
  struct aml_bitmap maps[3];
  aml_bitmap_zero(&maps[0]);
  aml_bitmap_fill(&maps[1]);
  pattern(&maps[2]);
  for (int k = 0; k < 3; ++k) {
    s = aml_bitmap_to_string(&maps[k]);
    REQUIRE(s != NULL);
    aml_bitmap_zero(&back);
    if (k == 0) aml_bitmap_fill(&back);
    CHECK_EQ(aml_bitmap_from_string(&back, s), 0);
    CHECK_EQ(aml_bitmap_isequal(&maps[k], &back), 1);
    free(s);
  }
}

static void test_from_string(void) {
  struct aml_bitmap b, saved;
  const char *fills[] = {"all", "fill", "full", "ALL", "Fill", "fULL"};
  for (size_t k = 0; k < sizeof fills / sizeof *fills; ++k) {
    aml_bitmap_zero(&b);
    CHECK_EQ(aml_bitmap_from_string(&b, fills[k]), 0);
    CHECK_EQ(aml_bitmap_isfull(&b), 1);
  }
  const char *zeros[] = {"none", "zero", "empty", "NONE", "Zero", "eMpTy"};
  for (size_t k = 0; k < sizeof zeros / sizeof *zeros; ++k) {
    pattern(&b);
    CHECK_EQ(aml_bitmap_from_string(&b, zeros[k]), 0);
    CHECK_EQ(aml_bitmap_iszero(&b), 1);
  }
  pattern(&b);
  CHECK_EQ(aml_bitmap_from_string(&b, NULL), 0);
  CHECK_EQ(aml_bitmap_iszero(&b), 1);

  /* one number: that bit alone (what was set before is replaced) */
  pattern(&b);
  CHECK_EQ(aml_bitmap_from_string(&b, "0"), 0);
  CHECK(only_range_set(&b, 0, 0));
  CHECK_EQ(aml_bitmap_from_string(&b, "2047"), 0);
  CHECK(only_range_set(&b, LAST_BIT, LAST_BIT));
  CHECK_EQ(aml_bitmap_from_string(&b, "0042"), 0);
  CHECK(only_range_set(&b, 42, 42));

  /* lists, with blanks around numbers and repeats */
  CHECK_EQ(aml_bitmap_from_string(&b, "1,5,2047,64"), 0);
  CHECK_EQ(aml_bitmap_nset(&b), 4);
  CHECK_EQ(aml_bitmap_isset(&b, 1), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 5), 1);
  CHECK_EQ(aml_bitmap_isset(&b, 64), 1);
  CHECK_EQ(aml_bitmap_isset(&b, LAST_BIT), 1);
  CHECK_EQ(aml_bitmap_from_string(&b, " 3 , 4,3"), 0);
  CHECK_EQ(aml_bitmap_nset(&b), 2);
  CHECK(only_range_set(&b, 3, 4));

  /* invalid text: -1, bitmap unchanged */
  char too_short[AML_BITMAP_MAX + 2], bad_digit[AML_BITMAP_MAX + 3], trailing[AML_BITMAP_MAX + 4],
      no_close[AML_BITMAP_MAX + 3];
  memset(too_short, '0', sizeof too_short);
  too_short[0] = '[';
  too_short[AML_BITMAP_MAX] = ']';
  too_short[AML_BITMAP_MAX + 1] = '\0'; /* one digit short */
  memset(bad_digit, '1', sizeof bad_digit);
  bad_digit[0] = '[';
  bad_digit[100] = '2';
  bad_digit[AML_BITMAP_MAX + 1] = ']';
  bad_digit[AML_BITMAP_MAX + 2] = '\0';
  memset(trailing, '0', sizeof trailing);
  trailing[0] = '[';
  trailing[AML_BITMAP_MAX + 1] = ']';
  trailing[AML_BITMAP_MAX + 2] = 'x';
  trailing[AML_BITMAP_MAX + 3] = '\0';
  memset(no_close, '0', sizeof no_close);
  no_close[0] = '[';
  no_close[AML_BITMAP_MAX + 1] = ')';
  no_close[AML_BITMAP_MAX + 2] = '\0';
  const char *invalid[] = {"",       "2048",   "99999999999999999999", "-1",   "1,,2", ",1",
                           "1,",     "1 2",    "3abc",                 "a",    "0x10", "+3",
                           "al",     "nonee",  "[",                    "[]",   "1,2048",
                           too_short, bad_digit, trailing,             no_close};
  for (size_t k = 0; k < sizeof invalid / sizeof *invalid; ++k) {
    pattern(&b);
    aml_bitmap_copy(&saved, &b);
    const int rc = aml_bitmap_from_string(&b, invalid[k]);
    CHECK_EQ(rc, -1);
    CHECK_EQ(aml_bitmap_isequal(&b, &saved), 1);
    if (rc != -1) fprintf(stderr, "  accepted: \"%.40s\"\n", invalid[k]);
  }
}

/* Random bitmaps: text and word arrays carry every bit both ways, and nset agrees with a
 * count done bit by bit. */
static void test_random_round_trips(void) {
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (int round = 0; round < 50; ++round) {
    struct aml_bitmap b, back;
    fill_random(b.mask, sizeof b.mask, &state);
    int counted = 0;
    for (unsigned i = 0; i < AML_BITMAP_MAX; ++i) counted += aml_bitmap_isset(&b, i);
    CHECK_EQ(aml_bitmap_nset(&b), counted);

    char *s = aml_bitmap_to_string(&b);
    REQUIRE(s != NULL);
    aml_bitmap_zero(&back);
    CHECK_EQ(aml_bitmap_from_string(&back, s), 0);
    CHECK_EQ(aml_bitmap_isequal(&b, &back), 1);
    free(s);

    unsigned long words[AML_BITMAP_SIZE];
    aml_bitmap_copy_to_ulong(&b, words, AML_BITMAP_MAX);
    CHECK_EQ(memcmp(words, b.mask, sizeof words), 0);
    aml_bitmap_fill(&back);
    aml_bitmap_copy_from_ulong(&back, words, AML_BITMAP_MAX);
    CHECK_EQ(aml_bitmap_isequal(&b, &back), 1);
  }
}

static void test_heap(void) {
  struct aml_bitmap *b = (struct aml_bitmap *)0x1;
  CHECK_EQ(aml_bitmap_create(&b), 0);
  REQUIRE(b != NULL);
  CHECK_EQ(aml_bitmap_iszero(b), 1);
  aml_bitmap_set(b, 77);

  struct aml_bitmap *copy = NULL;
  CHECK_EQ(aml_bitmap_dup(&copy, b), 0);
  REQUIRE(copy != NULL);
  CHECK(copy != b);
  CHECK_EQ(aml_bitmap_isequal(copy, b), 1);
  aml_bitmap_clear(b, 77); /* the copy is independent */
  CHECK_EQ(aml_bitmap_isset(copy, 77), 1);

  aml_bitmap_destroy(&b);
  CHECK(b == NULL);
  aml_bitmap_destroy(&b); /* twice: nothing */
  aml_bitmap_destroy(&copy);
  CHECK(copy == NULL);
  aml_bitmap_destroy(NULL);

  CHECK_EQ(aml_bitmap_create(NULL), -AML_EINVAL);
  struct aml_bitmap src;
  aml_bitmap_zero(&src);
  CHECK_EQ(aml_bitmap_dup(NULL, &src), -AML_EINVAL);
  copy = (struct aml_bitmap *)0x1;
  CHECK_EQ(aml_bitmap_dup(&copy, NULL), -AML_EINVAL);
  CHECK(copy == NULL);
}

static void test_null_arguments(void) {
  struct aml_bitmap b;
  unsigned long words[AML_BITMAP_SIZE];
  pattern(&b);
  struct aml_bitmap saved = b;
  memset(words, 0xab, sizeof words);

  CHECK_EQ(aml_bitmap_zero(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_fill(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_isset(NULL, 0), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_iszero(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_isfull(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_isequal(NULL, &b), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_isequal(&b, NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_set(NULL, 0), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_clear(NULL, 0), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_set_range(NULL, 0, 1), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_clear_range(NULL, 0, 1), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_nset(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_first(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_last(NULL), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_from_string(NULL, "all"), -AML_EINVAL);
  CHECK_EQ(aml_bitmap_from_string(NULL, NULL), -AML_EINVAL);

  aml_errno = AML_SUCCESS;
  CHECK(aml_bitmap_to_string(NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);

  aml_bitmap_copy(NULL, &b);
  aml_bitmap_copy(&b, NULL);
  aml_bitmap_copy_from_ulong(NULL, words, 64);
  aml_bitmap_copy_from_ulong(&b, NULL, 64);
  aml_bitmap_copy_to_ulong(NULL, words, 64);
  aml_bitmap_copy_to_ulong(&b, NULL, 64);
  CHECK_EQ(aml_bitmap_isequal(&b, &saved), 1);
  CHECK_EQ(words[0], 0xababababababababUL & ~0UL);
}

int main(void) {
  test_layout();
  test_zero_fill_queries();
  test_set_clear_isset();
  test_ranges();
  test_copy_equal();
  test_ulong();
  test_to_string();
  test_from_string();
  test_random_round_trips();
  test_heap();
  test_null_arguments();
  return check_report("test_bitmap");
}
