// AML's generic allocator calls (aml/higher/allocator.h) and what the three allocators share:
// the pool behind an allocator over memarea's CUDA, HIP or linux area, and the table of chunks.
#include "allocator_impl.hpp"

#include <memarea/area.hpp>

#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <aml/area/linux.h>

#include <new>

namespace memarea::aml {

namespace {

/// A pool for an allocator: over the area (device, flags) or, both NULL, pageable host memory
/// on host_node; every freed byte kept (an allocator caches), pieces aligned on alignment.
/// Empty when the pool cannot be made.
std::optional<memarea::pool> make_allocator_pool(const int* device, const unsigned* flags,
                                                 std::size_t alignment, int host_node) noexcept {
  memarea::pool_options po;
  po.release_threshold = SIZE_MAX;
  po.alignment = alignment;
  po.host_node = host_node;
  std::optional<memarea::pool> pool;
  (void)memarea::c_call("aml allocator create", [&] {
    if (device)
      pool.emplace(memarea::area(*device, *flags), po);
    else
      pool.emplace(memarea::pool::host(po));
  });
  return pool;
}

}  // namespace

std::optional<memarea::pool> pool_for_area(const aml_area* area, const aml_area_mmap_options* opts,
                                           std::size_t alignment) noexcept {
  if (!area || !area->data) return std::nullopt;
  if (area->ops == &aml_area_linux_ops) {
    // Without options (files, shared or fixed mappings take the area's own calls), when a
    // pool places pages as the area would.
    int node = -1;
    if (opts || !linux_area_pool_node(area->data, &node)) return std::nullopt;
    return make_allocator_pool(nullptr, nullptr, alignment, node);
  }
  if (area->ops != &aml_area_cuda_ops && area->ops != &aml_area_hip_ops) return std::nullopt;
  // Both flavours' data and options share one layout (src/aml/gpu_area.cpp checks it).
  const auto* data = reinterpret_cast<const aml_area_cuda_data*>(area->data);
  const auto* options = reinterpret_cast<const aml_area_cuda_mmap_options*>(opts);
  auto flags = static_cast<unsigned>(data->flags);
  // Managed memory ignores MAPPED (the area documents it), which a pool would refuse.
  if (flags & MEMAREA_AREA_UNIFIED) flags &= ~static_cast<unsigned>(MEMAREA_AREA_MAPPED);
  // MAPPED without HOST registers the options' host range at each mmap: nothing to pool.
  if ((flags & MEMAREA_AREA_MAPPED) && !(flags & MEMAREA_AREA_HOST)) return std::nullopt;
  const int device = (options && options->device >= 0) ? options->device
                                                        : (data->device < 0 ? -1 : data->device);
  return make_allocator_pool(&device, &flags, alignment, -1);
}

void* pooled_alloc(memarea::pool& pool, std::size_t size) noexcept {
  void* p = nullptr;
  const memarea_status s = memarea::c_call("aml_alloc", [&] { p = pool.allocate(size); });
  if (s != MEMAREA_SUCCESS) return fail_null(s);
  return p;
}

int pooled_free(memarea::pool& pool, void* ptr) noexcept {
  const memarea_status s = memarea::c_call("aml_free", [&] { pool.deallocate(ptr); });
  return s == MEMAREA_SUCCESS ? AML_SUCCESS : -code_of(s);
}

bool pooled_live(const memarea::pool& pool) noexcept {
  memarea::pool_stats st{};
  const memarea_status s = memarea::c_call("aml allocator destroy", [&] { st = pool.stats(); });
  // bytes_in_use counts live pieces and pieces held for IPC; a failing read refuses too.
  return s != MEMAREA_SUCCESS || st.live_allocations > 0 || st.bytes_in_use > 0;
}

int pooled_destroy(std::optional<memarea::pool>& pool) noexcept {
  if (!pool) return AML_SUCCESS;
  const memarea_status s = memarea::c_call("aml allocator destroy", [&] { pool->destroy(); });
  if (s != MEMAREA_SUCCESS) return -code_of(s);
  pool.reset();
  return AML_SUCCESS;
}

// --- chunk_table ------------------------------------------------------------------------------

aml_allocator_chunk* chunk_table::take(void* ptr, std::size_t size) noexcept {
  if (!free_) {
    // A new slab twice the last (16 records first): log2(n) slabs for n live chunks.
    const std::size_t n = slab_sizes_.empty() ? 16 : slab_sizes_.back() * 2;
    try {
      slabs_.reserve(slabs_.size() + 1);
      slab_sizes_.reserve(slab_sizes_.size() + 1);
      std::unique_ptr<record[]> slab(new record[n]);
      for (std::size_t i = 0; i < n; ++i)
        slab[i] = record{{nullptr, 0, nullptr}, nullptr, i + 1 < n ? &slab[i + 1] : nullptr,
                         false};
      free_ = &slab[0];
      slabs_.push_back(std::move(slab));
      slab_sizes_.push_back(n);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
  record* r = free_;
  free_ = r->next_free;
  *r = record{{ptr, size, nullptr}, ptr, nullptr, true};
  ++live_;
  return &r->chunk;
}

chunk_table::record* chunk_table::find(const aml_allocator_chunk* c) const noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(c);
  for (std::size_t k = 0; k < slabs_.size(); ++k) {
    const auto base = reinterpret_cast<std::uintptr_t>(slabs_[k].get());
    const std::size_t bytes = slab_sizes_[k] * sizeof(record);
    if (a < base || a - base >= bytes || (a - base) % sizeof(record) != 0) continue;
    return &slabs_[k][(a - base) / sizeof(record)];
  }
  return nullptr;
}

void* chunk_table::live_ptr(const aml_allocator_chunk* c) const noexcept {
  const record* r = find(c);
  return (r && r->live) ? r->ptr : nullptr;
}

void chunk_table::give_back(aml_allocator_chunk* c) noexcept {
  record* r = find(c);
  if (!r || !r->live) return;
  r->live = false;
  r->ptr = nullptr;
  r->next_free = free_;
  free_ = r;
  --live_;
}

}  // namespace memarea::aml

using memarea::aml::fail_null_code;

extern "C" {

// AML's rules: a NULL allocator (or one without data or ops) is AML_EINVAL; freeing NULL is a
// success. Where AML asserts that a required operation exists, memarea answers AML_ENOTSUP.

void* aml_alloc(aml_allocator* allocator, size_t size) {
  if (!allocator || !allocator->data || !allocator->ops) return fail_null_code(AML_EINVAL);
  if (!allocator->ops->alloc) return fail_null_code(AML_ENOTSUP);
  return allocator->ops->alloc(allocator->data, size);
}

int aml_free(aml_allocator* allocator, void* ptr) {
  if (!ptr) return AML_SUCCESS;
  if (!allocator || !allocator->data || !allocator->ops) return -AML_EINVAL;
  if (!allocator->ops->free) return -AML_ENOTSUP;
  return allocator->ops->free(allocator->data, ptr);
}

aml_allocator_chunk* aml_allocator_alloc_chunk(aml_allocator* allocator, size_t size) {
  if (!allocator || !allocator->data || !allocator->ops)
    return memarea::aml::fail_chunk(AML_EINVAL);
  if (!allocator->ops->alloc_chunk) return memarea::aml::fail_chunk(AML_ENOTSUP);
  return allocator->ops->alloc_chunk(allocator->data, size);
}

int aml_allocator_free_chunk(aml_allocator* allocator, aml_allocator_chunk* chunk) {
  if (!chunk) return AML_SUCCESS;
  if (!allocator || !allocator->data || !allocator->ops) return -AML_EINVAL;
  if (!allocator->ops->free_chunk) return -AML_ENOTSUP;
  return allocator->ops->free_chunk(allocator->data, chunk);
}

}  // extern "C"
