// pointer_table: a map from non-null addresses to small values, in one array (open addressing,
// linear probing, deletion by backward shift). For tables on an allocation's path, where a
// node-based map costs a heap allocation and a free for every entry: this one allocates only
// when it grows (doubling at half full) and never shrinks. Not thread-safe: callers lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

namespace memarea::detail {

template <class Value>
class pointer_table {
 public:
  pointer_table() = default;
  pointer_table(const pointer_table&) = delete;
  pointer_table& operator=(const pointer_table&) = delete;

  /// Entries held.
  std::size_t size() const noexcept { return size_; }
  /// Slots allocated (0 before the first insert; a power of two from then on).
  std::size_t capacity() const noexcept { return slots_ ? mask_ + 1 : 0; }

  /// The value of `key`, or null. The pointer is valid until the next insert or erase.
  Value* find(std::uintptr_t key) noexcept {
    if (!slots_ || key == 0) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  /// Sets `key`'s value. Throws std::invalid_argument for key 0 (the empty slot's mark) and
  /// std::bad_alloc when the table must grow and cannot; it is unchanged then. `value` is taken
  /// by value: a reference into the table would not survive its growth.
  void insert_or_assign(std::uintptr_t key, Value value) {
    if (key == 0) throw std::invalid_argument("pointer_table: key 0 is the empty slot's mark");
    if (slots_) {
      std::size_t i = home(key);
      for (; slots_[i].key != 0; i = (i + 1) & mask_) {
        if (slots_[i].key == key) {
          slots_[i].value = value;
          return;
        }
      }
      if (2 * (size_ + 1) <= capacity()) {  // the usual case: one probe, no growth
        slots_[i] = slot{key, value};
        ++size_;
        return;
      }
    }
    grow();
    place(key, value);
    ++size_;
  }

  /// Calls f(key, value) for every entry, in no particular order. f must not change the table.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < capacity(); ++i)
      if (slots_[i].key != 0) f(slots_[i].key, static_cast<const Value&>(slots_[i].value));
  }

  /// Removes `key`; false when it is absent.
  bool erase(std::uintptr_t key) noexcept {
    if (!slots_ || key == 0) return false;
    std::size_t hole = home(key);
    while (slots_[hole].key != key) {
      if (slots_[hole].key == 0) return false;
      hole = (hole + 1) & mask_;
    }
    // Backward shift: every later entry of the run whose home does not lie cyclically in
    // (hole, j] moves into the hole, so that no probe meets an empty slot before its key.
    for (std::size_t j = (hole + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].key);
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = slot{};
    --size_;
    return true;
  }

 private:
  struct slot {
    std::uintptr_t key = 0;  ///< 0: empty
    Value value{};
  };
  static constexpr std::size_t kFirstCapacity = 64;

  /// Fibonacci hashing: the top bits of key times 2^64 / phi, so that addresses a fixed stride
  /// apart (pieces of one block) spread over the table.
  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }
  void place(std::uintptr_t key, const Value& value) noexcept {
    std::size_t i = home(key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = slot{key, value};
  }
  void grow() {
    const std::size_t old_n = capacity();
    const std::size_t n = old_n ? 2 * old_n : kFirstCapacity;
    std::unique_ptr<slot[]> old(new slot[n]);  // throws before anything changes
    old.swap(slots_);
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
    for (std::size_t i = 0; i < old_n; ++i)
      if (old[i].key != 0) place(old[i].key, old[i].value);
  }

  std::unique_ptr<slot[]> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace memarea::detail
