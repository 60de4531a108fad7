// AML's buddy allocator (aml/higher/allocator/buddy.h).
//
// The low-level allocator (buddy_allocator_*) is a binary buddy system over the ranges given
// to it: each range is a power of two, split into halves down to 64 bytes, and a freed block
// merges with its buddy (the other half of the same parent, found by address) while that is
// free. Its bookkeeping lives on the host, keyed by address, so that device memory is never
// read or written.
//
// The user-level allocator draws from a memarea pool over memarea's CUDA or HIP area (the
// speed AML code gets by relinking), and otherwise maps regions from its area, each at least
// twice the last, into its own low-level allocator.
#include "allocator_impl.hpp"
#include "fork_lock.hpp"

#include <aml/higher/allocator/buddy.h>

#include <array>
#include <limits>
#include <mutex>
#include <new>

namespace {

constexpr unsigned kMinOrder = 6;  // 64-byte blocks at least
constexpr unsigned kOrders = 64;   // blocks of 2^6 .. 2^63 bytes
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

/// Who allocated a block: the public low-level call (and aml_alloc), or alloc_chunk. A block is
/// freed only by the kind of call that allocated it.
enum class block_owner : std::uint8_t { plain, chunk };

/// The order (log2 of the block size) that holds size bytes, at least kMinOrder; kOrders when
/// no block is that large.
unsigned order_for(std::size_t size) noexcept {
  if (size > (std::size_t{1} << (kOrders - 1))) return kOrders;
  const auto order = static_cast<unsigned>(std::bit_width(std::bit_ceil(size)) - 1);
  return order < kMinOrder ? kMinOrder : order;
}

}  // namespace

/// The low-level buddy allocator (opaque in buddy.h).
struct buddy_allocator {
  struct region {
    std::uintptr_t base;
    std::size_t size;
  };
  struct block {
    std::uintptr_t start = 0;
    std::uint32_t region = 0;
    std::uint32_t prev = kNone, next = kNone;  // the free list of its order, while free
    std::uint8_t order = 0;
    bool free = false;
    block_owner owner = block_owner::plain;
  };

  std::vector<region> regions;
  std::vector<block> blocks;           // by index; indices of merged blocks are recycled
  std::vector<std::uint32_t> spare;    // recycled indices
  memarea::aml::ptr_map<std::uint32_t> at;  // block start -> index
  std::array<std::uint32_t, kOrders> heads{};  // each order's free list
  std::uint64_t nonempty = 0;          // bit k: heads[k] holds a block
  std::size_t allocated = 0;

  buddy_allocator() { heads.fill(kNone); }

  /// Room for n more blocks, so that splitting cannot fail halfway. Throws std::bad_alloc.
  void reserve_blocks(std::size_t n) {
    at.reserve_more(n);
    if (spare.size() < n) blocks.reserve(blocks.size() + n);
  }

  std::uint32_t new_block(std::uintptr_t start, std::uint32_t region_index,
                          unsigned order) noexcept {
    std::uint32_t i;
    if (!spare.empty()) {
      i = spare.back();
      spare.pop_back();
    } else {
      i = static_cast<std::uint32_t>(blocks.size());
      blocks.emplace_back();  // reserve_blocks made room
    }
    blocks[i] = block{start, region_index, kNone, kNone, static_cast<std::uint8_t>(order), false,
                      block_owner::plain};
    at.insert(reinterpret_cast<void*>(start), i);
    return i;
  }

  void drop_block(std::uint32_t i) noexcept {
    at.erase(reinterpret_cast<void*>(blocks[i].start));
    spare.push_back(i);  // never reallocates: spare holds fewer indices than blocks has
  }

  void push_free(std::uint32_t i) noexcept {
    block& b = blocks[i];
    b.free = true;
    b.prev = kNone;
    b.next = heads[b.order];
    if (b.next != kNone) blocks[b.next].prev = i;
    heads[b.order] = i;
    nonempty |= std::uint64_t{1} << b.order;
  }

  void remove_free(std::uint32_t i) noexcept {
    block& b = blocks[i];
    if (b.prev != kNone)
      blocks[b.prev].next = b.next;
    else
      heads[b.order] = b.next;
    if (b.next != kNone) blocks[b.next].prev = b.prev;
    if (heads[b.order] == kNone) nonempty &= ~(std::uint64_t{1} << b.order);
    b.free = false;
    b.prev = b.next = kNone;
  }

  int extend(void* ptr, std::size_t size) noexcept {
    if (!ptr || size < (std::size_t{1} << kMinOrder) || !std::has_single_bit(size))
      return -AML_EINVAL;
    const auto base = reinterpret_cast<std::uintptr_t>(ptr);
    // The range's end must be representable: the overlap test below adds base + size.
    if (base > std::numeric_limits<std::uintptr_t>::max() - size) return -AML_EINVAL;
    for (const region& r : regions)
      if (base < r.base + r.size && r.base < base + size) return -AML_EINVAL;  // overlap
    if (regions.size() >= kNone) return -AML_ENOMEM;
    try {
      reserve_blocks(1);
      regions.reserve(regions.size() + 1);
      if (spare.capacity() < blocks.size() + 1) spare.reserve(blocks.size() + 1);
    } catch (const std::bad_alloc&) {
      return -AML_ENOMEM;
    }
    regions.push_back({base, size});
    const auto order = static_cast<unsigned>(std::countr_zero(size));
    push_free(new_block(base, static_cast<std::uint32_t>(regions.size() - 1), order));
    return AML_SUCCESS;
  }

  int alloc(void** out, std::size_t size, block_owner owner) noexcept {
    const unsigned order = order_for(size);
    if (order >= kOrders) return -AML_ENOMEM;
    const std::uint64_t fits = nonempty & (~std::uint64_t{0} << order);
    if (!fits) return -AML_ENOMEM;
    auto from = static_cast<unsigned>(std::countr_zero(fits));
    try {
      reserve_blocks(from - order);
      // Each split adds a block; keep spare able to take every index back without allocating.
      if (spare.capacity() < blocks.size() + (from - order))
        spare.reserve(blocks.size() + (from - order));
    } catch (const std::bad_alloc&) {
      return -AML_ENOMEM;
    }
    const std::uint32_t i = heads[from];
    remove_free(i);
    // Split down: the left half keeps the block (and its start), each right half goes free.
    while (from > order) {
      --from;
      block& b = blocks[i];
      const std::uintptr_t right = b.start + (std::uintptr_t{1} << from);
      const std::uint32_t region_index = b.region;
      b.order = static_cast<std::uint8_t>(from);
      push_free(new_block(right, region_index, from));
    }
    blocks[i].owner = owner;
    ++allocated;
    *out = reinterpret_cast<void*>(blocks[i].start);
    return AML_SUCCESS;
  }

  int free(void* ptr, block_owner owner) noexcept {
    const std::uint32_t* found = ptr ? at.find(ptr) : nullptr;
    if (!found) return -AML_EINVAL;  // never given, or inside a block
    std::uint32_t i = *found;
    if (blocks[i].free || blocks[i].owner != owner) return -AML_EINVAL;
    --allocated;
    for (;;) {
      const block& b = blocks[i];
      const region& r = regions[b.region];
      const std::size_t bytes = std::size_t{1} << b.order;
      if (bytes >= r.size) break;  // the whole region: no buddy
      const std::uintptr_t buddy_start = r.base + ((b.start - r.base) ^ bytes);
      const std::uint32_t* other = at.find(reinterpret_cast<void*>(buddy_start));
      if (!other || !blocks[*other].free || blocks[*other].order != b.order) break;
      const std::uint32_t j = *other;
      remove_free(j);
      // The merged block starts at the lower of the two.
      const std::uint32_t keep = blocks[j].start < b.start ? j : i;
      const std::uint32_t gone = keep == i ? j : i;
      drop_block(gone);
      ++blocks[keep].order;
      i = keep;
    }
    push_free(i);
    return AML_SUCCESS;
  }
};

namespace {

using memarea::aml::fail_null_code;

/// Everything a user-level buddy allocator owns, in one host allocation. data.pools points
/// back here.
struct buddy_state {
  aml_allocator allocator{};
  aml_allocator_buddy data{};
  /// The pool path: aml_alloc draws from pool; chunks from a pool of their own (made with it,
  /// so on the same device), so that aml_free of a chunk's memory is the other pool's, refused.
  std::optional<memarea::pool> pool;
  std::optional<memarea::pool> chunk_pool;
  /// Guards the chunk table and chunk_pool, and on the area path everything below.
  memarea::aml::fork_safe_mutex m{memarea::aml::lock_rank::allocator};
  memarea::aml::chunk_table chunks;
  /// The area path: the regions mapped (each in the low-level allocator data.allocator).
  struct mapping {
    void* ptr;
    std::size_t size;
  };
  std::vector<mapping> mappings;
};

buddy_state* state_of(aml_allocator_data* data) noexcept {
  if (!data) return nullptr;
  return static_cast<buddy_state*>(reinterpret_cast<aml_allocator_buddy*>(data)->pools);
}

/// The size of the next region for an allocation of size bytes: at least twice the last one
/// (so that n bytes take O(log n) mappings), *need the least that holds size. Called with s.m
/// held. AML_SUCCESS or the negative code.
int plan_region(const buddy_state& s, std::size_t size, std::size_t* want, std::size_t* need) {
  const unsigned order = order_for(size);
  if (order >= kOrders) return -AML_ENOMEM;
  *need = std::size_t{1} << order;
  *want = *need;
  if (!s.mappings.empty()) {
    const std::size_t last = s.mappings.back().size;
    if (last <= (std::size_t{1} << (kOrders - 2)) && *want < last * 2) *want = last * 2;
  }
  return AML_SUCCESS;
}

/// Maps a region of *want bytes from the area, halving the request while the area refuses,
/// down to need. Called WITHOUT s.m: an area's mmap may do anything, and no lock of this library
/// is held across a call into memarea (fork_lock.hpp). AML_SUCCESS (*region, *want set)
/// or the negative code (the area's, else out of memory).
int map_region(const buddy_state& s, std::size_t* want, std::size_t need, void** region) {
  const int caller_errno = aml_errno;
  for (;;) {
    // Cleared, so that an area that fails without setting aml_errno reads as out of memory.
    aml_errno = AML_SUCCESS;
    if (void* p = aml_area_mmap(s.data.area, *want, s.data.opts)) {
      aml_errno = caller_errno;  // a success leaves the caller's aml_errno as it was
      *region = p;
      return AML_SUCCESS;
    }
    const int area_code = aml_errno;
    if (*want == need) return -(area_code > 0 ? area_code : AML_ENOMEM);
    *want >>= 1;
  }
}

/// The area path's allocation, called with lock held and returning with it held: a block from
/// the low-level allocator; when none is free, a region mapped with the lock released (see
/// map_region) is added and the allocation tried again (another thread may take the new
/// region first: three tries, then out of memory).
int alloc_from_regions(buddy_state& s, std::unique_lock<memarea::aml::fork_safe_mutex>& lock,
                       void** p, std::size_t size, block_owner owner) {
  for (int attempt = 0;; ++attempt) {
    // A destroy that failed halfway left no low-level allocator.
    if (!s.data.allocator) return -AML_EINVAL;
    int err = s.data.allocator->alloc(p, size, owner);
    if (err != -AML_ENOMEM || attempt == 2) return err;
    std::size_t want = 0, need = 0;
    if ((err = plan_region(s, size, &want, &need)) != AML_SUCCESS) return err;
    lock.unlock();
    void* region = nullptr;
    err = map_region(s, &want, need, &region);
    lock.lock();
    if (err != AML_SUCCESS) return err;
    try {
      s.mappings.reserve(s.mappings.size() + 1);  // so that the push below cannot throw
      err = s.data.allocator ? s.data.allocator->extend(region, want) : -AML_EINVAL;
    } catch (const std::bad_alloc&) {
      err = -AML_ENOMEM;
    }
    if (err == AML_SUCCESS) {
      s.mappings.push_back({region, want});
      continue;
    }
    lock.unlock();
    (void)aml_area_munmap(s.data.area, region, want);
    lock.lock();
    return err;
  }
}

aml_allocator_chunk* alloc_chunk_impl(aml_allocator_data* data, size_t size) {
  buddy_state* s = state_of(data);
  if (!s) return memarea::aml::fail_chunk(AML_EINVAL);
  void* p = nullptr;
  std::size_t usable = 0;
  if (s->pool) {
    // The pool outside the lock: it has its own, and may make objects lazily.
    if (!s->chunk_pool) return memarea::aml::fail_chunk(AML_EINVAL);  // destroyed
    usable = size ? size : 1;
    p = memarea::aml::pooled_alloc(*s->chunk_pool, usable);
    if (!p) return nullptr;
    aml_allocator_chunk* c = nullptr;
    {
      std::lock_guard lock(s->m);
      c = s->chunks.take(p, usable);
    }
    if (!c) {
      (void)memarea::aml::pooled_free(*s->chunk_pool, p);
      return memarea::aml::fail_chunk(AML_ENOMEM);
    }
    return c;
  }
  std::unique_lock lock(s->m);
  const int err = alloc_from_regions(*s, lock, &p, size, block_owner::chunk);
  if (err != AML_SUCCESS) return memarea::aml::fail_chunk(-err);
  usable = std::size_t{1} << order_for(size);
  aml_allocator_chunk* c = s->chunks.take(p, usable);
  if (!c) {
    (void)s->data.allocator->free(p, block_owner::chunk);
    return memarea::aml::fail_chunk(AML_ENOMEM);
  }
  return c;
}

int free_chunk_impl(aml_allocator_data* data, aml_allocator_chunk* chunk) {
  buddy_state* s = state_of(data);
  if (!s) return -AML_EINVAL;
  if (!chunk) return AML_SUCCESS;
  std::unique_lock lock(s->m);
  void* p = s->chunks.live_ptr(chunk);
  if (!p) return -AML_EINVAL;  // not a live chunk of this allocator
  if (s->pool) {
    // Checked while the record is still live, given back after the lock: the pool may make
    // objects lazily. The record goes first, so that a second free of it is refused.
    s->chunks.give_back(chunk);
    lock.unlock();
    return memarea::aml::pooled_free(*s->chunk_pool, p);
  }
  if (!s->data.allocator) return -AML_EINVAL;  // a destroy failed halfway
  const int err = s->data.allocator->free(p, block_owner::chunk);
  if (err != AML_SUCCESS) return err;
  s->chunks.give_back(chunk);
  return AML_SUCCESS;
}

}  // namespace

extern "C" {

// --- the low-level allocator ------------------------------------------------------------------

int buddy_allocator_create(buddy_allocator** out) {
  if (!out) return -AML_EINVAL;
  *out = new (std::nothrow) buddy_allocator;
  return *out ? AML_SUCCESS : -AML_ENOMEM;
}

int buddy_allocator_extend(buddy_allocator* b, void* ptr, size_t size) {
  if (!b) return -AML_EINVAL;
  return b->extend(ptr, size);
}

int buddy_allocator_destroy(buddy_allocator** buddy) {
  if (!buddy || !*buddy) return -AML_EINVAL;
  if ((*buddy)->allocated != 0) return -AML_EBUSY;
  delete *buddy;
  *buddy = nullptr;
  return AML_SUCCESS;
}

int buddy_allocator_free(buddy_allocator* b, void* ptr) {
  if (!b) return -AML_EINVAL;
  return b->free(ptr, block_owner::plain);
}

int buddy_allocator_alloc(buddy_allocator* b, void** out, size_t size) {
  if (!b || !out || size == 0) return -AML_EINVAL;
  return b->alloc(out, size, block_owner::plain);
}

// --- the user-level allocator -----------------------------------------------------------------

int aml_allocator_buddy_create(aml_allocator** allocator, aml_area* area,
                               aml_area_mmap_options* opts) {
  if (!allocator || !area) return -AML_EINVAL;
  auto* s = new (std::nothrow) buddy_state;
  if (!s) return -AML_ENOMEM;
  if (pthread_mutex_init(&s->data.lock, nullptr) != 0) {
    delete s;
    return -AML_FAILURE;
  }
  s->data.area = area;
  s->data.opts = opts;
  s->data.pools = s;
  s->allocator.data = reinterpret_cast<aml_allocator_data*>(&s->data);
  s->allocator.ops = &aml_allocator_buddy_ops;
  s->pool = memarea::aml::pool_for_area(area, opts, 256);
  if (s->pool) {
    // Made now, not at the first alloc_chunk: an area of "the current device" means the
    // creating thread's, for chunks too.
    s->chunk_pool = memarea::aml::pool_for_area(area, opts, 256);
    if (!s->chunk_pool) s->pool.reset();  // empty: the area path instead
  }
  if (!s->pool) {
    const int err = buddy_allocator_create(&s->data.allocator);
    if (err != AML_SUCCESS) {
      pthread_mutex_destroy(&s->data.lock);
      delete s;
      return err;
    }
  }
  *allocator = &s->allocator;
  return AML_SUCCESS;
}

int aml_allocator_buddy_destroy(aml_allocator** allocator) {
  if (!allocator || !*allocator || (*allocator)->ops != &aml_allocator_buddy_ops)
    return -AML_EINVAL;
  buddy_state* s = state_of((*allocator)->data);
  if (!s) return -AML_EINVAL;
  // No other thread may use an allocator being destroyed (AML's contract); the lock is
  // taken once, to wait for calls still inside, and not held across pools' destruction or the
  // area's munmap (no lock of this library is held across those: fork_lock.hpp).
  { std::lock_guard lock(s->m); }
  if (s->pool) {
    // Both pools checked before either goes, so that a refusal changes nothing.
    if (memarea::aml::pooled_live(*s->pool) ||
        (s->chunk_pool && memarea::aml::pooled_live(*s->chunk_pool)))
      return -AML_EBUSY;
    int err = memarea::aml::pooled_destroy(s->chunk_pool);
    if (err != AML_SUCCESS) return err;
    err = memarea::aml::pooled_destroy(s->pool);
    if (err != AML_SUCCESS) return err;
  } else {
    // A failed munmap below leaves data.allocator NULL and the unmapped regions popped: a
    // second destroy goes on with the rest.
    if (s->data.allocator) {
      const int err = buddy_allocator_destroy(&s->data.allocator);
      if (err != AML_SUCCESS) return err;
    }
    while (!s->mappings.empty()) {
      const auto& m = s->mappings.back();
      const int err = aml_area_munmap(s->data.area, m.ptr, m.size);
      if (err != AML_SUCCESS) return err;
      s->mappings.pop_back();
    }
  }
  pthread_mutex_destroy(&s->data.lock);
  delete s;
  *allocator = nullptr;
  return AML_SUCCESS;
}

void* aml_allocator_buddy_alloc(aml_allocator_data* data, size_t size) {
  buddy_state* s = state_of(data);
  if (!s) return fail_null_code(AML_EINVAL);
  if (s->pool) return memarea::aml::pooled_alloc(*s->pool, size ? size : 1);
  std::unique_lock lock(s->m);
  void* p = nullptr;
  const int err = alloc_from_regions(*s, lock, &p, size, block_owner::plain);
  if (err != AML_SUCCESS) return fail_null_code(-err);
  return p;
}

int aml_allocator_buddy_free(aml_allocator_data* data, void* ptr) {
  buddy_state* s = state_of(data);
  if (!s) return -AML_EINVAL;
  if (s->pool) return memarea::aml::pooled_free(*s->pool, ptr);
  std::lock_guard lock(s->m);
  if (!s->data.allocator) return -AML_EINVAL;  // a destroy failed halfway
  return s->data.allocator->free(ptr, block_owner::plain);
}

aml_allocator_ops aml_allocator_buddy_ops = {aml_allocator_buddy_alloc, aml_allocator_buddy_free,
                                             alloc_chunk_impl, free_chunk_impl};

}  // extern "C"
