// memarea's pooled AML area (memarea_aml.h): aml_area_mmap / aml_area_munmap on a memarea pool.
#include "aml_impl.hpp"

#include <memarea_aml.h>

#include <cstdlib>

namespace {

/// One block holds the area and its pool, freed together.
struct pooled_block {
  aml_area area;
  memarea_pool_t pool;
};

memarea_pool_t pool_of(const aml_area_data* data) {
  return data ? *reinterpret_cast<const memarea_pool_t*>(data) : nullptr;
}

void* pooled_mmap(const aml_area_data* data, size_t size, aml_area_mmap_options* opts) {
  memarea_pool_t pool = pool_of(data);
  if (!pool || opts) return memarea::aml::fail_null_code(AML_EINVAL);
  void* p = nullptr;
  const memarea_status s = memarea_pool_alloc(pool, &p, size, nullptr);
  if (s != MEMAREA_SUCCESS) return memarea::aml::fail_null(s);
  return p;
}

int pooled_munmap(const aml_area_data* data, void* ptr, size_t size) {
  memarea_pool_t pool = pool_of(data);
  if (!pool) return memarea::aml::fail_code(AML_EINVAL);
  const memarea_status s = memarea_pool_free_sized(pool, ptr, size, nullptr);
  if (s == MEMAREA_SUCCESS) return AML_SUCCESS;
  return memarea::aml::fail_status(s);
}

int pooled_fprintf(const aml_area_data* data, FILE* stream, const char* prefix) {
  if (!stream) return -AML_EINVAL;
  if (!prefix) prefix = "";
  std::fprintf(stream, "%s: area-memarea-pool: %p\n%s: pool: %p\n", prefix,
               static_cast<const void*>(data), prefix, static_cast<void*>(pool_of(data)));
  return AML_SUCCESS;
}

}  // namespace

extern "C" {

aml_area_ops memarea_aml_pooled_area_ops = {pooled_mmap, pooled_munmap, pooled_fprintf};

int memarea_aml_area_create_pooled(aml_area** area, memarea_pool_t pool) {
  if (!area) return -AML_EINVAL;
  *area = nullptr;
  if (!pool) return -AML_EINVAL;
  auto* b = static_cast<pooled_block*>(std::malloc(sizeof(pooled_block)));
  if (!b) return -AML_ENOMEM;
  b->pool = pool;
  b->area.ops = &memarea_aml_pooled_area_ops;
  b->area.data = reinterpret_cast<aml_area_data*>(&b->pool);
  *area = &b->area;
  return AML_SUCCESS;
}

void memarea_aml_area_destroy_pooled(aml_area** area) {
  if (!area || !*area || (*area)->ops != &memarea_aml_pooled_area_ops) return;
  std::free(*area);  // the area is the block's first member
  *area = nullptr;
}

}  // extern "C"
