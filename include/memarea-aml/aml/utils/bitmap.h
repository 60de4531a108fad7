/* memarea's AML drop-in: AML's fixed-size bitmap (aml/utils/bitmap.h), as the linux area takes
 * it for its NUMA nodes. */
#ifndef AML_BITMAP_H
#define AML_BITMAP_H

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AML_BITMAP_MAX 2048                /**< bits in a bitmap */
#define AML_BITMAP_BYTES (AML_BITMAP_MAX / 8) /**< bytes of a bitmap */
#define AML_BITMAP_TYPE unsigned long      /**< the word the bits are kept in */
/** Words in a bitmap. */
#define AML_BITMAP_SIZE ((int)(AML_BITMAP_BYTES / sizeof(AML_BITMAP_TYPE)))
/** Bits in a word. */
#define AML_BITMAP_NBITS ((int)(8 * sizeof(AML_BITMAP_TYPE)))

/** AML_BITMAP_MAX bits; bit i is bit i % NBITS of word i / NBITS. May live on the stack. */
struct aml_bitmap {
  unsigned long mask[AML_BITMAP_SIZE]; /**< the words */
};

/* NULL arguments never crash: functions returning int return -AML_EINVAL for a NULL bitmap,
 * the void ones do nothing, aml_bitmap_to_string returns NULL (aml_errno AML_EINVAL). */

/** Copies src into dst (nothing when either is NULL). */
void aml_bitmap_copy(struct aml_bitmap *dst, const struct aml_bitmap *src);
/** Clears every bit: 0. */
int aml_bitmap_zero(struct aml_bitmap *bitmap);
/** Sets every bit: 0. */
int aml_bitmap_fill(struct aml_bitmap *bitmap);
/** Whether bit i is set: 1 or 0; -1 when i >= AML_BITMAP_MAX. */
int aml_bitmap_isset(const struct aml_bitmap *bitmap, const unsigned int i);
/** 1 when no bit is set, else 0. */
int aml_bitmap_iszero(const struct aml_bitmap *bitmap);
/** 1 when every bit is set, else 0. */
int aml_bitmap_isfull(const struct aml_bitmap *bitmap);
/** 1 when a and b hold the same bits, else 0 (-AML_EINVAL when either is NULL). */
int aml_bitmap_isequal(const struct aml_bitmap *a, const struct aml_bitmap *b);
/** Sets bit i: 0; -1 (nothing changed) when i >= AML_BITMAP_MAX. */
int aml_bitmap_set(struct aml_bitmap *bitmap, const unsigned int i);
/** Clears bit i: 0; -1 (nothing changed) when i >= AML_BITMAP_MAX. */
int aml_bitmap_clear(struct aml_bitmap *bitmap, const unsigned int i);
/** Sets bits i to ii, both included: 0; -1 (nothing changed) when i > ii or ii >=
 *  AML_BITMAP_MAX. */
int aml_bitmap_set_range(struct aml_bitmap *bitmap, const unsigned int i, const unsigned int ii);
/** Clears bits i to ii, both included: 0; -1 (nothing changed) when i > ii or ii >=
 *  AML_BITMAP_MAX. */
int aml_bitmap_clear_range(struct aml_bitmap *bitmap, const unsigned int i,
                           const unsigned int ii);
/** The number of bits set. */
int aml_bitmap_nset(const struct aml_bitmap *bitmap);
/** Copies the first size bits (at most AML_BITMAP_MAX) of the words at src into bitmap, bit n
 *  of word w being bit w * AML_BITMAP_NBITS + n: those bits are set or cleared as in src, the
 *  bitmap's other bits are left as they were. Nothing when bitmap or src is NULL. */
void aml_bitmap_copy_from_ulong(struct aml_bitmap *bitmap, const unsigned long *src, size_t size);
/** Copies the first size bits (at most AML_BITMAP_MAX) of bitmap into the words at dst, set or
 *  cleared as in bitmap; dst's other bits are left as they were. Nothing when either is NULL. */
void aml_bitmap_copy_to_ulong(const struct aml_bitmap *bitmap, unsigned long *dst, size_t size);
/** The highest bit set, or -1 when none is. */
int aml_bitmap_last(const struct aml_bitmap *bitmap);
/** The lowest bit set, or -1 when none is. */
int aml_bitmap_first(const struct aml_bitmap *bitmap);
/** Sets bitmap from text: "all", "fill" or "full" (every bit); NULL, "none", "zero" or "empty"
 *  (no bit), these words in any case; a decimal bit number below AML_BITMAP_MAX; a
 *  comma-separated list of them (blanks around a number allowed, no empty item); or exactly
 *  what aml_bitmap_to_string writes. 0, or -1 with bitmap unchanged for any other text. */
int aml_bitmap_from_string(struct aml_bitmap *bitmap, const char *bitmap_str);
/** The bits as text, as AML writes them: '[', then one '0' or '1' per bit from bit 0 to bit
 *  AML_BITMAP_MAX - 1, then ']'. The caller frees it with free(); NULL (aml_errno set) when out
 *  of memory or bitmap is NULL. */
char *aml_bitmap_to_string(const struct aml_bitmap *bitmap);
/** Allocates a cleared bitmap: 0, or -AML_ENOMEM (and *map NULL); -AML_EINVAL for map NULL. */
int aml_bitmap_create(struct aml_bitmap **map);
/** Frees a bitmap from aml_bitmap_create or aml_bitmap_dup; *map is NULL afterwards. Nothing
 *  for map NULL. */
void aml_bitmap_destroy(struct aml_bitmap **map);
/** Allocates a copy of src: 0, -AML_ENOMEM, or -AML_EINVAL for dst or src NULL (*dst is NULL
 *  on any failure where dst is not NULL). */
int aml_bitmap_dup(struct aml_bitmap **dst, const struct aml_bitmap *src);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif /* AML_BITMAP_H */
