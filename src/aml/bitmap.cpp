// AML's fixed-size bitmap (aml/utils/bitmap.h). Plain bit arithmetic on the words of struct
// aml_bitmap; no call allocates except create, dup and to_string. Every call takes NULL without
// crashing, and a call that refuses its input (a bit out of range, text it cannot read) leaves
// the bitmap as it was. docs/aml.md lists where this differs from AML.
#include "aml_impl.hpp"

#include <aml.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace {

constexpr unsigned kBits = AML_BITMAP_MAX;
constexpr unsigned kWordBits = AML_BITMAP_NBITS;
constexpr unsigned kWords = AML_BITMAP_SIZE;
constexpr unsigned long kAllOnes = ~0UL;

static_assert(kWords * kWordBits == kBits, "the words hold exactly AML_BITMAP_MAX bits");
static_assert(sizeof(aml_bitmap) == AML_BITMAP_BYTES, "no padding inside the bitmap");

constexpr unsigned word_of(unsigned bit) noexcept { return bit / kWordBits; }
constexpr unsigned long bit_in_word(unsigned bit) noexcept { return 1UL << (bit % kWordBits); }

/// The bits [first, last] of word `word` (both bit numbers absolute, already clipped to it).
constexpr unsigned long word_span(unsigned word, unsigned first, unsigned last) noexcept {
  const unsigned lo = first > word * kWordBits ? first - word * kWordBits : 0;
  const unsigned hi = last < (word + 1) * kWordBits - 1 ? last - word * kWordBits : kWordBits - 1;
  const unsigned long from_lo = kAllOnes << lo;
  const unsigned long to_hi = hi == kWordBits - 1 ? kAllOnes : (1UL << (hi + 1)) - 1;
  return from_lo & to_hi;
}

/// Sets (value true) or clears bits [first, last]; the caller has checked the range.
void write_range(aml_bitmap* b, unsigned first, unsigned last, bool value) noexcept {
  for (unsigned w = word_of(first); w <= word_of(last); ++w) {
    const unsigned long span = word_span(w, first, last);
    if (value)
      b->mask[w] |= span;
    else
      b->mask[w] &= ~span;
  }
}

/// Whether bit `bit` of the word array `words` is set.
bool word_array_bit(const unsigned long* words, std::size_t bit) noexcept {
  return (words[bit / kWordBits] >> (bit % kWordBits)) & 1UL;
}

bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

/// Reads "N" or "N,N,...": decimal bit numbers below AML_BITMAP_MAX, each optionally padded
/// with blanks, none empty, into out (a scratch bitmap). False for anything else.
bool parse_list(const char* text, aml_bitmap* out) noexcept {
  const char* p = text;
  for (;;) {
    while (is_space(*p)) ++p;
    if (*p < '0' || *p > '9') return false;  // an empty item or a sign or a letter
    unsigned value = 0;
    while (*p >= '0' && *p <= '9') {
      value = value * 10 + static_cast<unsigned>(*p - '0');
      if (value >= kBits) return false;  // also stops before the product could overflow
      ++p;
    }
    out->mask[word_of(value)] |= bit_in_word(value);
    while (is_space(*p)) ++p;
    if (*p == '\0') return true;
    if (*p != ',') return false;
    ++p;
  }
}

/// Reads what aml_bitmap_to_string writes: '[', AML_BITMAP_MAX '0'/'1', ']', and nothing after.
bool parse_brackets(const char* text, aml_bitmap* out) noexcept {
  if (text[0] != '[') return false;
  for (unsigned i = 0; i < kBits; ++i) {
    const char c = text[i + 1];
    if (c == '1')
      out->mask[word_of(i)] |= bit_in_word(i);
    else if (c != '0')
      return false;  // also catches a string that ends early
  }
  return text[kBits + 1] == ']' && text[kBits + 2] == '\0';
}

bool names_one_of(const char* text, const char* a, const char* b, const char* c) noexcept {
  return !strcasecmp(text, a) || !strcasecmp(text, b) || !strcasecmp(text, c);
}

}  // namespace

extern "C" {

void aml_bitmap_copy(aml_bitmap* dst, const aml_bitmap* src) {
  if (!dst || !src || dst == src) return;
  std::memcpy(dst, src, sizeof *dst);
}

int aml_bitmap_zero(aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  std::memset(bitmap, 0, sizeof *bitmap);
  return AML_SUCCESS;
}

int aml_bitmap_fill(aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  for (auto& w : bitmap->mask) w = kAllOnes;
  return AML_SUCCESS;
}

int aml_bitmap_isset(const aml_bitmap* bitmap, const unsigned int i) {
  if (!bitmap) return -AML_EINVAL;
  if (i >= kBits) return -1;
  return (bitmap->mask[word_of(i)] & bit_in_word(i)) != 0;
}

int aml_bitmap_iszero(const aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  for (auto w : bitmap->mask)
    if (w != 0) return 0;
  return 1;
}

int aml_bitmap_isfull(const aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  for (auto w : bitmap->mask)
    if (w != kAllOnes) return 0;
  return 1;
}

int aml_bitmap_isequal(const aml_bitmap* a, const aml_bitmap* b) {
  if (!a || !b) return -AML_EINVAL;
  return std::memcmp(a->mask, b->mask, sizeof a->mask) == 0;
}

int aml_bitmap_set(aml_bitmap* bitmap, const unsigned int i) {
  if (!bitmap) return -AML_EINVAL;
  if (i >= kBits) return -1;
  bitmap->mask[word_of(i)] |= bit_in_word(i);
  return AML_SUCCESS;
}

int aml_bitmap_clear(aml_bitmap* bitmap, const unsigned int i) {
  if (!bitmap) return -AML_EINVAL;
  if (i >= kBits) return -1;
  bitmap->mask[word_of(i)] &= ~bit_in_word(i);
  return AML_SUCCESS;
}

int aml_bitmap_set_range(aml_bitmap* bitmap, const unsigned int i, const unsigned int ii) {
  if (!bitmap) return -AML_EINVAL;
  if (i > ii || ii >= kBits) return -1;
  write_range(bitmap, i, ii, true);
  return AML_SUCCESS;
}

int aml_bitmap_clear_range(aml_bitmap* bitmap, const unsigned int i, const unsigned int ii) {
  if (!bitmap) return -AML_EINVAL;
  if (i > ii || ii >= kBits) return -1;
  write_range(bitmap, i, ii, false);
  return AML_SUCCESS;
}

int aml_bitmap_nset(const aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  int count = 0;
  for (auto w : bitmap->mask) count += std::popcount(w);
  return count;
}

void aml_bitmap_copy_from_ulong(aml_bitmap* bitmap, const unsigned long* src, size_t size) {
  if (!bitmap || !src) return;
  const std::size_t n = size < kBits ? size : kBits;
  for (std::size_t i = 0; i < n; ++i) {
    const auto bit = static_cast<unsigned>(i);
    if (word_array_bit(src, i))
      bitmap->mask[word_of(bit)] |= bit_in_word(bit);
    else
      bitmap->mask[word_of(bit)] &= ~bit_in_word(bit);
  }
}

void aml_bitmap_copy_to_ulong(const aml_bitmap* bitmap, unsigned long* dst, size_t size) {
  if (!bitmap || !dst) return;
  const std::size_t n = size < kBits ? size : kBits;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned long mask = 1UL << (i % kWordBits);
    if (bitmap->mask[i / kWordBits] & mask)
      dst[i / kWordBits] |= mask;
    else
      dst[i / kWordBits] &= ~mask;
  }
}

int aml_bitmap_last(const aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  for (unsigned w = kWords; w-- > 0;) {
    if (bitmap->mask[w] != 0)
      return static_cast<int>(w * kWordBits + (kWordBits - 1) -
                              static_cast<unsigned>(std::countl_zero(bitmap->mask[w])));
  }
  return -1;
}

int aml_bitmap_first(const aml_bitmap* bitmap) {
  if (!bitmap) return -AML_EINVAL;
  for (unsigned w = 0; w < kWords; ++w) {
    if (bitmap->mask[w] != 0)
      return static_cast<int>(w * kWordBits +
                              static_cast<unsigned>(std::countr_zero(bitmap->mask[w])));
  }
  return -1;
}

int aml_bitmap_from_string(aml_bitmap* bitmap, const char* bitmap_str) {
  if (!bitmap) return -AML_EINVAL;
  if (!bitmap_str || names_one_of(bitmap_str, "none", "zero", "empty"))
    return aml_bitmap_zero(bitmap);
  if (names_one_of(bitmap_str, "all", "fill", "full")) return aml_bitmap_fill(bitmap);
  // Parsed into a scratch bitmap so that text rejected half-way changes nothing.
  aml_bitmap parsed{};
  const bool ok = bitmap_str[0] == '[' ? parse_brackets(bitmap_str, &parsed)
                                       : parse_list(bitmap_str, &parsed);
  if (!ok) return -1;
  *bitmap = parsed;
  return AML_SUCCESS;
}

char* aml_bitmap_to_string(const aml_bitmap* bitmap) {
  if (!bitmap) return static_cast<char*>(memarea::aml::fail_null_code(AML_EINVAL));
  auto* text = static_cast<char*>(std::malloc(kBits + 3));  // '[', the bits, ']', NUL
  if (!text) return static_cast<char*>(memarea::aml::fail_null_code(AML_ENOMEM));
  text[0] = '[';
  for (unsigned i = 0; i < kBits; ++i)
    text[i + 1] = (bitmap->mask[word_of(i)] & bit_in_word(i)) ? '1' : '0';
  text[kBits + 1] = ']';
  text[kBits + 2] = '\0';
  return text;
}

int aml_bitmap_create(aml_bitmap** map) {
  if (!map) return -AML_EINVAL;
  *map = static_cast<aml_bitmap*>(std::calloc(1, sizeof(aml_bitmap)));
  return *map ? AML_SUCCESS : -AML_ENOMEM;
}

void aml_bitmap_destroy(aml_bitmap** map) {
  if (!map) return;
  std::free(*map);
  *map = nullptr;
}

int aml_bitmap_dup(aml_bitmap** dst, const aml_bitmap* src) {
  if (!dst) return -AML_EINVAL;
  *dst = nullptr;
  if (!src) return -AML_EINVAL;
  auto* copy = static_cast<aml_bitmap*>(std::malloc(sizeof(aml_bitmap)));
  if (!copy) return -AML_ENOMEM;
  std::memcpy(copy, src, sizeof *copy);
  *dst = copy;
  return AML_SUCCESS;
}

}  // extern "C"
