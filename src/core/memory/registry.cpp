#include "core/memory/registry.hpp"

#include "core/memory/tracking.hpp"
#include "core/memory/usage_counters.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>

namespace memarea::detail {

std::uint64_t registry::next_id() noexcept {
  std::unique_lock lock(mutex_);
  return next_id_++;
}

namespace {
/// Called by every change to a registry's map, under its writer's lock: locate()'s cached
/// answers made before it are never used again. Release: a reader that sees the new value
/// also sees the change (readers of the map itself take the lock anyway).
void invalidate_cached_lookups() noexcept {
  registry_cache::generation.fetch_add(1, std::memory_order_release);
}
}  // namespace

void registry::insert(const record& r) {
  {
    std::unique_lock lock(mutex_);
    record& slot = by_base_[reinterpret_cast<std::uintptr_t>(r.base)];
    if (slot.base) usage::account(slot, -1, false);  // replaced: counted once, as the new one
    slot = r;
    usage::account(r, +1);
    invalidate_cached_lookups();
  }
  // Outside the lock: the stack is taken on the caller's time, not the registry's.
  tracking::on_alloc(r.base, r.requested ? r.requested : r.size, r.kind, r.device,
                     r.made_by == origin::pool ? r.owner : nullptr, nullptr, false);
}

std::optional<record> registry::change(void* base, const std::function<void(record&)>& edit) {
  std::unique_lock lock(mutex_);
  auto it = by_base_.find(reinterpret_cast<std::uintptr_t>(base));
  if (it == by_base_.end()) return std::nullopt;
  usage::account(it->second, -1, false);
  edit(it->second);
  usage::account(it->second, +1);
  invalidate_cached_lookups();
  return it->second;
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

bool registry::overlaps(const void* p, std::size_t size) const {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t end = size > UINTPTR_MAX - begin ? UINTPTR_MAX : begin + size;
  std::shared_lock lock(mutex_);
  // Allocations never overlap one another (the only range a caller chooses, a registered
  // one, is refused when it overlaps any: area_mmap): the last one starting before end is the
  // only one that may reach into the range (any earlier one ends before it starts).
  auto it = by_base_.lower_bound(end);
  if (it == by_base_.begin()) return false;
  --it;
  const std::size_t span = it->second.size ? it->second.size : 1;
  return it->first + span > begin;
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
  usage::account(r, -1);
  invalidate_cached_lookups();
  lock.unlock();
  tracking::on_free(r.base);
  return r;
}

unsigned registry::fill(const void* p, registry_cache::cache& c) const {
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  registry_cache::entry e;
  {
    std::shared_lock lock(mutex_);
    // Read under the lock: writers change the map and the generation under the writer's lock,
    // so this value describes exactly the map read below.
    e.generation = registry_cache::generation.load(std::memory_order_relaxed);
    e.owner = this;
    // [lo, hi) is where find() answers as for p: from the end of the allocation before p (or
    // its base, when it holds p) to the base of the next one. Clipping found spans at the next
    // base keeps that true even if records ever nest.
    auto it = by_base_.upper_bound(key);
    e.hi = it == by_base_.end() ? UINTPTR_MAX : it->first;
    if (it != by_base_.begin()) {
      --it;
      const record& r = it->second;
      // A zero-byte span still owns its base address (as in find()).
      const std::size_t span = r.size ? r.size : 1;
      if (key - it->first < span) {
        e.found = true;
        e.lo = it->first;
        e.hi = std::min(e.hi, it->first + span);
        e.span = {r.base, r.size, r.kind, r.device, r.context_device};
      } else {
        e.lo = it->first + span;
      }
    }
  }
  const unsigned i = c.next % registry_cache::cache::size;
  c.e[i] = e;
  c.next = (i + 1) % registry_cache::cache::size;
  return i;
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

std::vector<record> registry::select(const std::function<bool(const record&)>& pick) const {
  std::vector<record> out;
  std::shared_lock lock(mutex_);
  for (const auto& [base, r] : by_base_)
    if (pick(r)) out.push_back(r);
  return out;
}

registry& registry_instance::make() {
  // As made_once (base/fork_safety.hpp), with the pointer where allocations() reads it inline.
  fork_init_guard guard;
  if (registry* r = made.load(std::memory_order_relaxed)) return *r;
  // Destroyed at exit, after everything made later (as a function-local static is).
  static registry instance;
  made.store(&instance, std::memory_order_release);
  return instance;
}

}  // namespace memarea::detail
