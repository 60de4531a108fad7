// AML's sized allocator (aml/higher/allocator/sized.h): pieces of one size. Over memarea's
// CUDA or HIP area they come from a memarea pool; over any other area each piece is one
// aml_area_mmap of the chunk size, kept for reuse when freed and unmapped at destruction.
// Unlike AML's, it is thread safe on both paths.
#include "allocator_impl.hpp"
#include "fork_lock.hpp"

#include <aml/higher/allocator/sized.h>

#include <mutex>
#include <new>

namespace {

using memarea::aml::fail_null_code;

/// Everything a sized allocator owns, in one host allocation. data.free_pools points back
/// here.
struct sized_state {
  aml_allocator allocator{};
  struct aml_allocator_sized data{};
  std::size_t chunk_size = 0;     // the size at creation (data.chunk_size is the caller's)
  std::optional<memarea::pool> pool;  // empty: through the area's own mmap and munmap
  // The area path, guarded by m: pieces mapped and free, and pieces handed out. idle's
  // capacity always covers every piece mapped, so that a free never allocates.
  memarea::aml::fork_safe_mutex m{memarea::aml::lock_rank::allocator};
  std::vector<void*> idle;
  memarea::aml::ptr_map<bool> live;
};

sized_state* state_of(aml_allocator_data* data) noexcept {
  if (!data) return nullptr;
  return static_cast<sized_state*>(reinterpret_cast<struct aml_allocator_sized*>(data)->free_pools);
}

/// The pool's alignment: AML documents pieces aligned on the chunk size; a pool aligns on a
/// power of two from 16 to 4096, so the largest one that divides the chunk size (no byte
/// wasted between pieces), at least 256 (what the area itself gives) and at most 4096.
std::size_t alignment_for(std::size_t chunk_size) noexcept {
  const std::size_t low = chunk_size & (~chunk_size + 1);  // the lowest set bit
  return std::clamp<std::size_t>(low, 256, 4096);
}

/// The area path: maps one piece. Called without the lock.
void* map_piece(sized_state& s) noexcept {
  return aml_area_mmap(s.data.area, s.chunk_size, s.data.opts);
}

/// The area path: unmaps every piece, idle and live; the first failure's code, or AML_SUCCESS.
int unmap_all(sized_state& s) noexcept {
  int first = AML_SUCCESS;
  auto unmap = [&](void* p) {
    const int err = aml_area_munmap(s.data.area, p, s.chunk_size);
    if (err != AML_SUCCESS && first == AML_SUCCESS) first = err;
  };
  for (void* p : s.idle) unmap(p);
  s.live.for_each([&](void* p, bool) { unmap(p); });
  return first;
}

}  // namespace

extern "C" {

int aml_allocator_sized_create(aml_allocator** allocator, size_t size, aml_area* area,
                               aml_area_mmap_options* opts) {
  if (!allocator || !area || size == 0) return -AML_EINVAL;
  auto* s = new (std::nothrow) sized_state;
  if (!s) return -AML_ENOMEM;
  s->chunk_size = size;
  s->data.chunk_size = size;
  s->data.area = area;
  s->data.opts = opts;
  s->data.free_pools = s;
  s->allocator.data = reinterpret_cast<aml_allocator_data*>(&s->data);
  s->allocator.ops = &aml_allocator_sized;
  s->pool = memarea::aml::pool_for_area(area, opts, alignment_for(size));
  // One piece now, as AML maps its first: an area that cannot give one fails here.
  if (s->pool) {
    void* p = memarea::aml::pooled_alloc(*s->pool, size);
    if (!p || memarea::aml::pooled_free(*s->pool, p) != AML_SUCCESS) {
      const int code = p ? AML_FAILURE : aml_errno;
      s->pool.reset();  // a forced destroy
      delete s;
      return -code;
    }
  } else {
    try {
      s->idle.reserve(16);
    } catch (const std::bad_alloc&) {
      delete s;
      return -AML_ENOMEM;
    }
    void* p = map_piece(*s);
    if (!p) {
      const int code = aml_errno;
      delete s;
      return -(code > 0 ? code : AML_ENOMEM);
    }
    s->idle.push_back(p);
  }
  *allocator = &s->allocator;
  return AML_SUCCESS;
}

int aml_allocator_sized_destroy(aml_allocator** allocator) {
  if (!allocator || !*allocator || (*allocator)->ops != &aml_allocator_sized) return -AML_EINVAL;
  sized_state* s = state_of((*allocator)->data);
  if (!s) return -AML_EINVAL;
  // AML documents that destruction unmaps everything, pieces still allocated included. With no
  // piece live, the pool's own destroy, whose failure is returned (memarea's message set). Else
  // a forced destroy, the pool's destructor (delete s), which gives back live pieces too;
  // memarea's API reports its failure (not a live pool, no host memory) only to the
  // release-failure record (take_release_failures), not to its caller.
  int err = AML_SUCCESS;
  if (!s->pool) {
    err = unmap_all(*s);
  } else if (!memarea::aml::pooled_live(*s->pool)) {
    err = memarea::aml::pooled_destroy(s->pool);
  }
  delete s;
  *allocator = nullptr;
  return err;
}

void* aml_allocator_sized_alloc(aml_allocator_data* data, size_t size) {
  sized_state* s = state_of(data);
  if (!s || size > s->chunk_size) return fail_null_code(AML_EINVAL);
  if (s->pool) return memarea::aml::pooled_alloc(*s->pool, s->chunk_size);
  void* p = nullptr;
  {
    std::lock_guard lock(s->m);
    if (!s->idle.empty()) {
      p = s->idle.back();
      s->idle.pop_back();
    }
  }
  const bool mapped_now = !p;
  if (mapped_now && !(p = map_piece(*s))) return nullptr;  // aml_errno is the area's
  {
    std::lock_guard lock(s->m);
    try {
      s->live.reserve_more(1);
      // Room in idle for every piece mapped, this one included: a free never allocates.
      const std::size_t pieces = s->idle.size() + s->live.size() + 1;
      if (s->idle.capacity() < pieces) s->idle.reserve(pieces * 2);
      s->live.insert(p, true);
      return p;
    } catch (const std::bad_alloc&) {
      if (!mapped_now) {
        s->idle.push_back(p);  // back where it was: it came from idle, which kept its room
        return fail_null_code(AML_ENOMEM);
      }
    }
  }
  // Unmapped without the lock: an area's munmap may do anything.
  (void)aml_area_munmap(s->data.area, p, s->chunk_size);
  return fail_null_code(AML_ENOMEM);
}

int aml_allocator_sized_free(aml_allocator_data* data, void* ptr) {
  sized_state* s = state_of(data);
  if (!s) return -AML_EINVAL;
  if (s->pool) return memarea::aml::pooled_free(*s->pool, ptr);
  std::lock_guard lock(s->m);
  if (!ptr || !s->live.erase(ptr)) return -AML_EINVAL;
  s->idle.push_back(ptr);  // within the capacity reserved at its allocation
  return AML_SUCCESS;
}

struct aml_allocator_ops aml_allocator_sized = {aml_allocator_sized_alloc,
                                                aml_allocator_sized_free, nullptr, nullptr};

}  // extern "C"
