#include "driver/page_attributes.hpp"

#include <cstring>
#include <iterator>

namespace memarea::detail {

namespace {
/// Whether `id` can be stored as a preferred or accessed-by location.
bool storable(int id) noexcept {
  return id == MEMAREA_CPU_DEVICE_ID || (id >= 0 && id < page_attributes::max_devices);
}
}  // namespace

page_attributes::page_attributes(std::size_t pages) : pages_(pages) {
  if (pages_ != 0) runs_.emplace(0, page_state{});
}

page_attributes::run_map::const_iterator page_attributes::run_of(std::size_t p) const noexcept {
  return std::prev(runs_.upper_bound(p));  // the run at page 0 always exists
}

void page_attributes::split(std::size_t at) {
  if (at >= pages_) return;
  auto next = runs_.upper_bound(at);
  auto holder = std::prev(next);
  if (holder->first != at) runs_.emplace_hint(next, at, holder->second);
}

void page_attributes::isolate(std::size_t first, std::size_t last) {
  // A split alone changes no answer, so a throw from the second leaves a valid table.
  split(first);
  split(last + 1);
}

template <class F>
void page_attributes::update(std::size_t first, std::size_t last, F&& f) noexcept {
  for (auto it = runs_.find(first); it != runs_.end() && it->first <= last; ++it) f(it->second);
  // Runs that now equal their left neighbour join it, from the run before `first` to the one
  // that starts after `last`, so the table stays as small as the advice is varied.
  auto left = runs_.find(first);
  if (left != runs_.begin()) --left;
  const auto stop = runs_.upper_bound(last + 1);
  for (auto cur = std::next(left); cur != stop;) {
    if (cur->second == std::prev(cur)->second) {
      cur = runs_.erase(cur);
    } else {
      ++cur;
    }
  }
}

bool page_attributes::advise(std::size_t first, std::size_t last, memarea_mem_advice advice,
                             int id) {
  switch (advice) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
    case MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN:
    case MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN:
      break;
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
      if (!storable(id)) return false;
      break;
    default:
      return false;
  }
  isolate(first, last);
  update(first, last, [&](page_state& pg) {
    switch (advice) {
      case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
        pg.read_mostly = true;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
        pg.read_mostly = false;
        break;
      case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
        pg.preferred = id;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        pg.preferred = MEMAREA_INVALID_DEVICE_ID;
        break;
      case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
      case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY: {
        const bool set = advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY;
        if (id == MEMAREA_CPU_DEVICE_ID) {
          pg.accessed_by_cpu = set;
        } else {
          const std::uint64_t bit = std::uint64_t{1} << id;
          pg.accessed_by = set ? (pg.accessed_by | bit) : (pg.accessed_by & ~bit);
        }
        break;
      }
      case MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN:
        pg.coarse_grain = true;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN:
        pg.coarse_grain = false;
        break;
    }
  });
  return true;
}

void page_attributes::prefetched(std::size_t first, std::size_t last, int id) {
  isolate(first, last);
  update(first, last, [&](page_state& pg) { pg.last_prefetch = id; });
}

bool page_attributes::fits(memarea_mem_range_attribute attribute, std::size_t data_size) noexcept {
  switch (attribute) {
    case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE:
      return data_size == 4;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
      return data_size != 0 && data_size % 4 == 0;
  }
  return false;
}

bool page_attributes::answer(memarea_mem_range_attribute attribute, void* data,
                             std::size_t data_size, std::size_t first,
                             std::size_t last) const noexcept {
  if (!fits(attribute, data_size)) return false;
  auto put = [&](std::size_t slot, std::int32_t v) {
    std::memcpy(static_cast<unsigned char*>(data) + slot * 4, &v, 4);
  };
  const auto begin = run_of(first);
  auto runs_of_range = [&](auto&& f) {
    for (auto it = begin; it != runs_.end() && it->first <= last; ++it) f(it->second);
  };
  // The value if every page agrees, else MEMAREA_INVALID_DEVICE_ID (cuMemRangeGetAttribute).
  auto agreed = [&](int page_state::*field) {
    const int v = begin->second.*field;
    bool same = true;
    runs_of_range([&](const page_state& pg) { same = same && pg.*field == v; });
    return same ? v : MEMAREA_INVALID_DEVICE_ID;
  };
  switch (attribute) {
    case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: {
      bool all = true;
      runs_of_range([&](const page_state& pg) { all = all && pg.read_mostly; });
      put(0, all ? 1 : 0);
      return true;
    }
    case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      put(0, agreed(&page_state::preferred));
      return true;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      put(0, agreed(&page_state::last_prefetch));
      return true;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      std::uint64_t mask = ~std::uint64_t{0};
      bool cpu = true;
      runs_of_range([&](const page_state& pg) {
        mask &= pg.accessed_by;
        cpu = cpu && pg.accessed_by_cpu;
      });
      const std::size_t slots = data_size / 4;
      std::size_t n = 0;
      if (cpu && n < slots) put(n++, MEMAREA_CPU_DEVICE_ID);
      for (int d = 0; d < max_devices && n < slots; ++d)
        if (mask & (std::uint64_t{1} << d)) put(n++, d);
      while (n < slots) put(n++, MEMAREA_INVALID_DEVICE_ID);
      return true;
    }
    case MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE: {
      bool all_coarse = true, all_fine = true;
      runs_of_range([&](const page_state& pg) {
        all_coarse = all_coarse && pg.coarse_grain;
        all_fine = all_fine && !pg.coarse_grain;
      });
      int mode = MEMAREA_MEM_RANGE_COHERENCY_MODE_INDETERMINATE;
      if (all_coarse) mode = MEMAREA_MEM_RANGE_COHERENCY_MODE_COARSE_GRAIN;
      if (all_fine) mode = MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN;
      put(0, mode);
      return true;
    }
  }
  return false;
}

}  // namespace memarea::detail
