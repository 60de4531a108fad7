/* memarea's AML drop-in: AML_INNER_MALLOC and friends (aml/utils/inner-malloc.h).
 *
 * One calloc'ed block holds several objects, laid out as the members of a struct with those
 * types would be (each at its own alignment), optionally followed by an array and by extra
 * bytes; the block is released with one free(). The macros build an unnamed struct with one
 * member per type listed (1 to 8 types) and let the compiler place the members, so they work
 * in C only (C++ forbids defining a type in sizeof or in a cast); a C++ file may still include
 * this header. Type arguments must be type names without commas (use a typedef otherwise).
 * Each macro evaluates its pointer argument once. */
#ifndef AML_INNER_MALLOC_H
#define AML_INNER_MALLOC_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>

/* --- Internals: not part of AML's API. ------------------------------------------------------ */

/* Pastes after expanding both sides (so that a counted arity can name a macro). */
#define AML_INNER_CAT_(a, b) AML_INNER_CAT2_(a, b)
#define AML_INNER_CAT2_(a, b) a##b

/* The number of arguments, 1 to 8. The trailing 0 keeps the variadic part of the helper
 * non-empty, which C99 requires. */
#define AML_INNER_NARGS_(...) AML_INNER_NTH_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define AML_INNER_NTH_(a1, a2, a3, a4, a5, a6, a7, a8, count, ...) count

/* The members of the block's struct, one per type: aml_inner_f1_ ... aml_inner_f8_. */
#define AML_INNER_MEMBERS_1_(t1) t1 aml_inner_f1_;
#define AML_INNER_MEMBERS_2_(t1, t2) AML_INNER_MEMBERS_1_(t1) t2 aml_inner_f2_;
#define AML_INNER_MEMBERS_3_(t1, t2, t3) AML_INNER_MEMBERS_2_(t1, t2) t3 aml_inner_f3_;
#define AML_INNER_MEMBERS_4_(t1, t2, t3, t4) AML_INNER_MEMBERS_3_(t1, t2, t3) t4 aml_inner_f4_;
#define AML_INNER_MEMBERS_5_(t1, t2, t3, t4, t5) \
  AML_INNER_MEMBERS_4_(t1, t2, t3, t4) t5 aml_inner_f5_;
#define AML_INNER_MEMBERS_6_(t1, t2, t3, t4, t5, t6) \
  AML_INNER_MEMBERS_5_(t1, t2, t3, t4, t5) t6 aml_inner_f6_;
#define AML_INNER_MEMBERS_7_(t1, t2, t3, t4, t5, t6, t7) \
  AML_INNER_MEMBERS_6_(t1, t2, t3, t4, t5, t6) t7 aml_inner_f7_;
#define AML_INNER_MEMBERS_8_(t1, t2, t3, t4, t5, t6, t7, t8) \
  AML_INNER_MEMBERS_7_(t1, t2, t3, t4, t5, t6, t7) t8 aml_inner_f8_;
#define AML_INNER_MEMBERS_(...) \
  AML_INNER_CAT_(AML_INNER_CAT_(AML_INNER_MEMBERS_, AML_INNER_NARGS_(__VA_ARGS__)), _)(__VA_ARGS__)

/* The block's struct for the fields alone, and with a trailing array of atype (a flexible
 * array member, so the fields keep their struct layout and the array its alignment). */
#define AML_INNER_STRUCT_(...) struct { AML_INNER_MEMBERS_(__VA_ARGS__) }
#define AML_INNER_ARRAY_STRUCT_(atype, ...) \
  struct { AML_INNER_MEMBERS_(__VA_ARGS__) atype aml_inner_array_[]; }

/* Where the array ends: the array struct's size (never below the array's offset) plus n
 * elements. */
#define AML_INNER_ARRAY_END_(n, atype, ...) \
  (sizeof(AML_INNER_ARRAY_STRUCT_(atype, __VA_ARGS__)) + (size_t)(n) * sizeof(atype))

/* The strictest alignment of the fundamental types: extra bytes start at a multiple of it, so
 * they can hold any scalar. A char followed by the union is padded to the union's alignment. */
#define AML_INNER_UNION_ \
  union { long double ld; long long ll; double d; void *p; void (*f)(void); }
#define AML_INNER_MAX_ALIGN_ \
  (sizeof(struct { char c; AML_INNER_UNION_ u; }) - sizeof(AML_INNER_UNION_))

/* Where the extra bytes begin: past the array, rounded up to AML_INNER_MAX_ALIGN_. */
#define AML_INNER_EXTRA_OFFSET_(n, atype, ...)                                            \
  ((AML_INNER_ARRAY_END_(n, atype, __VA_ARGS__) + AML_INNER_MAX_ALIGN_ - 1) /             \
   AML_INNER_MAX_ALIGN_ * AML_INNER_MAX_ALIGN_)

/* calloc of head bytes, then n elements of elem bytes, then (extra_align != 0) the end rounded
 * up to extra_align and extra more bytes: NULL, never a short block, when the sum overflows
 * (calloc(1, total) cannot check a total that already wrapped). */
static inline void *aml_inner_calloc_(size_t head, size_t n, size_t elem, size_t extra_align,
                                      size_t extra) {
  if (elem != 0 && n > (SIZE_MAX - head) / elem) return NULL;
  size_t total = head + n * elem;
  if (extra_align != 0) {
    if (total > SIZE_MAX - (extra_align - 1)) return NULL;
    total = (total + extra_align - 1) / extra_align * extra_align;
    if (extra > SIZE_MAX - total) return NULL;
    total += extra;
  }
  return calloc(1, total);
}

/* --- AML's API. ----------------------------------------------------------------------------- */

/** Allocates, zeroed, one block holding an object of each type listed (1 to 8 types), laid out
 *  as the members of a struct; NULL when out of memory. Free it with free(). */
#define AML_INNER_MALLOC(...) calloc(1, sizeof(AML_INNER_STRUCT_(__VA_ARGS__)))

/** Allocates, zeroed, a block holding an object of each type in ... (1 to 7 types), then an
 *  array of n elements of type, aligned for type. NULL when out of memory. */
#define AML_INNER_MALLOC_ARRAY(n, type, ...)                                              \
  aml_inner_calloc_(sizeof(AML_INNER_ARRAY_STRUCT_(type, __VA_ARGS__)), (size_t)(n),       \
                    sizeof(type), 0, 0)

/** As AML_INNER_MALLOC_ARRAY, followed by size extra bytes (aligned for any scalar type). */
#define AML_INNER_MALLOC_EXTRA(n, type, size, ...)                                        \
  aml_inner_calloc_(sizeof(AML_INNER_ARRAY_STRUCT_(type, __VA_ARGS__)), (size_t)(n),       \
                    sizeof(type), AML_INNER_MAX_ALIGN_, (size_t)(size))

/** A pointer (void *) to the N-th object of a block from AML_INNER_MALLOC*: N is a literal
 *  number from 1 to the number of types, and ... the types the block was allocated with (for
 *  an ARRAY or EXTRA block, its field types). */
#define AML_INNER_MALLOC_GET_FIELD(ptr, N, ...)                            \
  ((void *)&((AML_INNER_STRUCT_(__VA_ARGS__) *)(void *)(ptr))              \
       ->AML_INNER_CAT_(AML_INNER_CAT_(aml_inner_f, N), _))

/** A pointer (void *) to the array of a block from AML_INNER_MALLOC_ARRAY or
 *  AML_INNER_MALLOC_EXTRA; type and ... as given to that macro. */
#define AML_INNER_MALLOC_GET_ARRAY(ptr, type, ...) \
  ((void *)((AML_INNER_ARRAY_STRUCT_(type, __VA_ARGS__) *)(void *)(ptr))->aml_inner_array_)

/** A pointer (void *) to the extra bytes of a block from AML_INNER_MALLOC_EXTRA; n, type and
 *  ... as given to it. */
#define AML_INNER_MALLOC_GET_EXTRA(ptr, n, type, ...) \
  ((void *)((char *)(void *)(ptr) + AML_INNER_EXTRA_OFFSET_(n, type, __VA_ARGS__)))

#pragma GCC visibility pop

#endif /* AML_INNER_MALLOC_H */
