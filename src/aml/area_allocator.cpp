// AML's area allocator (aml/higher/allocator/area.h): one piece of the area per allocation.
// Over memarea's CUDA or HIP area the pieces come from a memarea pool (no driver call, no lock
// of ours, no host allocation per call); over any other area each allocation is one
// aml_area_mmap, remembered with its size for the munmap.
#include "allocator_impl.hpp"
#include "fork_lock.hpp"

#include <aml/higher/allocator/area.h>

#include <mutex>
#include <new>

namespace {

using memarea::aml::fail_null_code;

/// Everything an area allocator owns, in one host allocation. data.chunks points back here.
struct area_allocator {
  aml_allocator allocator{};
  aml_allocator_area_data data{};
  std::optional<memarea::pool> pool;  // empty: through the area's own mmap and munmap
  /// Guards live (the area path). Fork-safe: fork() never leaves it held in the child.
  memarea::aml::fork_safe_mutex m{memarea::aml::lock_rank::allocator};
  memarea::aml::ptr_map<std::size_t> live;  // the area path: each live piece's size
};

area_allocator* state_of(aml_allocator_data* data) noexcept {
  if (!data) return nullptr;
  return static_cast<area_allocator*>(reinterpret_cast<aml_allocator_area_data*>(data)->chunks);
}

}  // namespace

extern "C" {

int aml_allocator_area_create(aml_allocator** out, aml_area* area, aml_area_mmap_options* opts) {
  if (!out || !area) return -AML_EINVAL;
  auto* a = new (std::nothrow) area_allocator;
  if (!a) return -AML_ENOMEM;
  if (pthread_mutex_init(&a->data.lock, nullptr) != 0) {
    delete a;
    return -AML_FAILURE;
  }
  a->data.area = area;
  a->data.opts = opts;
  a->data.chunks = a;
  a->allocator.data = reinterpret_cast<aml_allocator_data*>(&a->data);
  a->allocator.ops = &aml_allocator_area_ops;
  // 256 bytes, what cudaMalloc and hipMalloc guarantee.
  a->pool = memarea::aml::pool_for_area(area, opts, 256);
  *out = &a->allocator;
  return AML_SUCCESS;
}

int aml_allocator_area_destroy(aml_allocator** allocator) {
  if (!allocator || !*allocator || (*allocator)->ops != &aml_allocator_area_ops)
    return -AML_EINVAL;
  area_allocator* a = state_of((*allocator)->data);
  if (!a) return -AML_EINVAL;
  if (a->pool) {
    // The pool refuses while pieces are live (BUSY): nothing changes then.
    const int err = memarea::aml::pooled_destroy(a->pool);
    if (err != AML_SUCCESS) return err;
  } else {
    std::lock_guard lock(a->m);
    if (a->live.size() != 0) return -AML_EBUSY;
  }
  pthread_mutex_destroy(&a->data.lock);
  delete a;
  *allocator = nullptr;
  return AML_SUCCESS;
}

void* aml_allocator_area_alloc(aml_allocator_data* data, size_t size) {
  area_allocator* a = state_of(data);
  if (!a || size == 0) return fail_null_code(AML_EINVAL);
  if (a->pool) return memarea::aml::pooled_alloc(*a->pool, size);
  aml_area* area = a->data.area;
  // The area is called without our lock: other threads' frees need not wait for the driver.
  void* p = aml_area_mmap(area, size, a->data.opts);
  if (!p) return nullptr;  // aml_errno is the area's
  {
    std::lock_guard lock(a->m);
    try {
      a->live.reserve_more(1);
      a->live.insert(p, size);
      return p;
    } catch (const std::bad_alloc&) {
    }
  }
  (void)aml_area_munmap(area, p, size);  // without the lock, as the mmap
  return fail_null_code(AML_ENOMEM);
}

int aml_allocator_area_free(aml_allocator_data* data, void* ptr) {
  area_allocator* a = state_of(data);
  if (!a) return -AML_EINVAL;
  if (a->pool) return memarea::aml::pooled_free(*a->pool, ptr);
  std::size_t size = 0;
  {
    std::lock_guard lock(a->m);
    const std::size_t* found = a->live.find(ptr);
    if (!found) return -AML_EINVAL;
    size = *found;
    a->live.erase(ptr);  // first, so that a second free of ptr meanwhile is refused
  }
  // Unmapped without the lock: an area's munmap may do anything.
  const int err = aml_area_munmap(a->data.area, ptr, size);
  if (err != AML_SUCCESS) {
    std::lock_guard lock(a->m);
    a->live.insert(ptr, size);  // still live, still ours (the erase left room for it)
  }
  return err;
}

aml_allocator_ops aml_allocator_area_ops = {aml_allocator_area_alloc, aml_allocator_area_free,
                                            nullptr, nullptr};

}  // extern "C"
