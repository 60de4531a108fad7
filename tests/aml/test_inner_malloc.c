/* AML_INNER_MALLOC and friends (aml/utils/inner-malloc.h): one zeroed block whose fields sit
 * where the members of a struct of the same types would, then an array aligned for its type,
 * then extra bytes aligned for any scalar. Each region is filled whole (ASan checks that the
 * block is large enough) and the fields are compared with offsetof on named structs. */
#include <aml.h>

#include <stdint.h>

#include "check.h"

struct one_byte {
  char c;
};
struct eight {
  double d;
};
struct odd {
  char c[3];
};
typedef struct {
  long double ld;
} wide;

/* The same layouts, named, for offsetof. */
struct two {
  struct one_byte a;
  struct eight b;
};
struct eight_fields {
  struct one_byte f1;
  struct eight f2;
  struct odd f3;
  short f4;
  wide f5;
  char f6;
  void *f7;
  int f8;
};
struct with_array {
  struct eight a;
  struct odd b;
  int array[1];
};

/* The alignment of T (C99 has no _Alignof): a char then a T is padded up to it. */
#define ALIGN_OF(T) (sizeof(struct { char c; T t; }) - sizeof(T))

/** Whether every byte of [p, p+n) is 0. */
static int all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return 0;
  return 1;
}

static size_t offset(const void *field, const void *base) {
  return (size_t)((const char *)field - (const char *)base);
}

static void test_fields(void) {
  /* one type */
  struct eight *only = AML_INNER_MALLOC(struct eight);
  REQUIRE(only != NULL);
  CHECK(AML_INNER_MALLOC_GET_FIELD(only, 1, struct eight) == (void *)only);
  CHECK(all_zero(only, sizeof *only));
  free(only);

  /* two types: AML's area pattern */
  void *p = AML_INNER_MALLOC(struct one_byte, struct eight);
  REQUIRE(p != NULL);
  CHECK(AML_INNER_MALLOC_GET_FIELD(p, 1, struct one_byte, struct eight) == p);
  struct eight *second = AML_INNER_MALLOC_GET_FIELD(p, 2, struct one_byte, struct eight);
  CHECK_EQ(offset(second, p), offsetof(struct two, b));
  CHECK(all_zero(p, sizeof(struct two)));
  second->d = 1.5; /* the whole field is inside the block */
  free(p);

  /* eight types, every field where the struct puts it, each aligned, all zeroed */
  p = AML_INNER_MALLOC(struct one_byte, struct eight, struct odd, short, wide, char, void *, int);
  REQUIRE(p != NULL);
  CHECK(all_zero(p, sizeof(struct eight_fields)));
#define FIELD(n) \
  AML_INNER_MALLOC_GET_FIELD(p, n, struct one_byte, struct eight, struct odd, short, wide, char, \
                             void *, int)
  CHECK_EQ(offset(FIELD(1), p), offsetof(struct eight_fields, f1));
  CHECK_EQ(offset(FIELD(2), p), offsetof(struct eight_fields, f2));
  CHECK_EQ(offset(FIELD(3), p), offsetof(struct eight_fields, f3));
  CHECK_EQ(offset(FIELD(4), p), offsetof(struct eight_fields, f4));
  CHECK_EQ(offset(FIELD(5), p), offsetof(struct eight_fields, f5));
  CHECK_EQ(offset(FIELD(6), p), offsetof(struct eight_fields, f6));
  CHECK_EQ(offset(FIELD(7), p), offsetof(struct eight_fields, f7));
  CHECK_EQ(offset(FIELD(8), p), offsetof(struct eight_fields, f8));
  wide *w = FIELD(5);
  CHECK_EQ((uintptr_t)w % ALIGN_OF(wide), 0);
  w->ld = 2.0L;
  int *last = FIELD(8);
  *last = 7; /* the last field is inside the block */
#undef FIELD
  free(p);
}

static void test_array(void) {
  const size_t n = 13;
  void *p = AML_INNER_MALLOC_ARRAY(n, int, struct eight, struct odd);
  REQUIRE(p != NULL);
  struct odd *o = AML_INNER_MALLOC_GET_FIELD(p, 2, struct eight, struct odd);
  int *array = AML_INNER_MALLOC_GET_ARRAY(p, int, struct eight, struct odd);
  CHECK_EQ(offset(o, p), offsetof(struct with_array, b));
  CHECK_EQ(offset(array, p), offsetof(struct with_array, array));
  CHECK((char *)array >= (char *)o + sizeof *o);
  CHECK_EQ((uintptr_t)array % ALIGN_OF(int), 0);
  CHECK(all_zero(array, n * sizeof *array));
  for (size_t i = 0; i < n; ++i) array[i] = (int)i; /* every element is inside the block */
  memset(o, 0xff, sizeof *o);
  CHECK_EQ(array[0], 0); /* the field and the array do not overlap */
  free(p);

  /* an array of pointers after one byte-sized field */
  p = AML_INNER_MALLOC_ARRAY(3, void *, char);
  REQUIRE(p != NULL);
  void **ptrs = AML_INNER_MALLOC_GET_ARRAY(p, void *, char);
  CHECK_EQ((uintptr_t)ptrs % ALIGN_OF(void *), 0);
  CHECK(ptrs[0] == NULL && ptrs[2] == NULL);
  ptrs[2] = p;
  free(p);
}

static void test_extra(void) {
  const size_t n = 5, extra = 21;
  void *p = AML_INNER_MALLOC_EXTRA(n, char, extra, struct eight, struct one_byte);
  REQUIRE(p != NULL);
  char *array = AML_INNER_MALLOC_GET_ARRAY(p, char, struct eight, struct one_byte);
  unsigned char *bytes = AML_INNER_MALLOC_GET_EXTRA(p, n, char, struct eight, struct one_byte);
  CHECK(bytes >= (unsigned char *)array + n);
  CHECK_EQ((uintptr_t)bytes % ALIGN_OF(long double), 0);
  CHECK_EQ((uintptr_t)bytes % ALIGN_OF(long long), 0);
  CHECK(all_zero(bytes, extra));
  memset(array, 0x11, n);
  memset(bytes, 0x22, extra); /* the extra bytes are inside the block */
  CHECK_EQ(array[n - 1], 0x11);
  struct one_byte *field = AML_INNER_MALLOC_GET_FIELD(p, 2, struct eight, struct one_byte);
  CHECK_EQ(field->c, 0);
  free(p);

  /* extra after an empty array, random contents kept */
  p = AML_INNER_MALLOC_EXTRA(0, double, 64, struct eight);
  REQUIRE(p != NULL);
  unsigned char *tail = AML_INNER_MALLOC_GET_EXTRA(p, 0, double, struct eight);
  CHECK(tail >= (unsigned char *)p + sizeof(struct eight));
  unsigned char expected[64];
  uint64_t state = 99;
  fill_random(expected, sizeof expected, &state);
  memcpy(tail, expected, sizeof expected);
  struct eight *head = AML_INNER_MALLOC_GET_FIELD(p, 1, struct eight);
  head->d = 3.25;
  CHECK(memcmp(tail, expected, sizeof expected) == 0);
  free(p);
}

/* The pointer argument is evaluated once. */
static void test_single_evaluation(void) {
  void *blocks[2];
  blocks[0] = AML_INNER_MALLOC(int, double);
  blocks[1] = AML_INNER_MALLOC(int, double);
  REQUIRE(blocks[0] && blocks[1]);
  int i = 0;
  double *d = AML_INNER_MALLOC_GET_FIELD(blocks[i++], 2, int, double);
  CHECK_EQ(i, 1);
  CHECK(d != NULL && (char *)d > (char *)blocks[0]);
  free(blocks[0]);
  free(blocks[1]);
}

/* Sizes whose sum overflows give NULL, never a short block that the caller would overrun. */
static void test_overflow(void) {
  CHECK(AML_INNER_MALLOC_ARRAY(SIZE_MAX / 8 + 2, double, int) == NULL);
  CHECK(AML_INNER_MALLOC_ARRAY(SIZE_MAX, char, int) == NULL);
  CHECK(AML_INNER_MALLOC_EXTRA(4, double, SIZE_MAX - 8, int) == NULL);
  CHECK(AML_INNER_MALLOC_EXTRA(SIZE_MAX / 2, short, 16, int) == NULL);
  void *ok = AML_INNER_MALLOC_EXTRA(4, double, 16, int);
  CHECK(ok != NULL);
  free(ok);
}

int main(void) {
  test_fields();
  test_array();
  test_extra();
  test_single_evaluation();
  test_overflow();
  return check_report("test_inner_malloc");
}
