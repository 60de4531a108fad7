#include "core/registry.hpp"

#include <mutex>

namespace memarea::detail {

std::uint64_t registry::next_id() noexcept {
  std::unique_lock lock(mutex_);
  return next_id_++;
}

void registry::insert(const record& r) {
  std::unique_lock lock(mutex_);
  by_base_[reinterpret_cast<std::uintptr_t>(r.base)] = r;
}

std::optional<record> registry::find(const void* p) const {
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  std::shared_lock lock(mutex_);
  auto it = by_base_.upper_bound(key);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  const record& r = it->second;
  // A zero-byte span still owns its base address.
  const std::size_t span = r.size ? r.size : 1;
  if (key - it->first < span) return r;
  return std::nullopt;
}

std::optional<record> registry::erase_if(void* base,
                                         const std::function<bool(const record&)>& accept,
                                         std::optional<record>* found) {
  std::unique_lock lock(mutex_);
  auto it = by_base_.find(reinterpret_cast<std::uintptr_t>(base));
  if (found) *found = std::nullopt;
  if (it == by_base_.end()) return std::nullopt;
  if (found) *found = it->second;
  if (!accept(it->second)) return std::nullopt;
  record r = it->second;
  by_base_.erase(it);
  return r;
}

std::size_t registry::size() const {
  std::shared_lock lock(mutex_);
  return by_base_.size();
}

std::size_t registry::count_if(const std::function<bool(const record&)>& count) const {
  std::shared_lock lock(mutex_);
  std::size_t n = 0;
  for (const auto& [base, r] : by_base_) n += count(r) ? 1 : 0;
  return n;
}

registry& allocations() {
  // Destroyed at exit, after everything made later (as a function-local static is).
  return made_once([] {
    static registry instance;
    return &instance;
  });
}

}  // namespace memarea::detail
