// The C API of pools (include/memarea/memarea.h, "Pools").
#include "capi/c_call.hpp"
#include "core/pool/pool_impl.hpp"

#include <memarea/pool.hpp>


using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_pool_create(memarea_pool_t* pool, memarea_area_t area,
                                   const memarea_pool_options* options) {
  return c_call(__func__, [&] {
    require(pool, "pool");
    *pool = area ? memarea::detail::pool_create_c(&area->device, &area->flags, options)
                 : memarea::detail::pool_create_c(nullptr, nullptr, options);
  });
}

memarea_status memarea_pool_destroy(memarea_pool_t pool) {
  return c_call(__func__, [&] { memarea::detail::pool_destroy_c(pool, false); });
}

memarea_status memarea_pool_alloc(memarea_pool_t pool, void** ptr, size_t size,
                                  memarea_stream_t stream) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = memarea::detail::pool_alloc_c(pool, size, stream);
  });
}

memarea_status memarea_pool_free(memarea_pool_t pool, void* ptr, memarea_stream_t stream) {
  return c_call(__func__, [&] { memarea::detail::pool_free_c(pool, ptr, stream); });
}

memarea_status memarea_pool_free_sized(memarea_pool_t pool, void* ptr, size_t size,
                                       memarea_stream_t stream) {
  return c_call(__func__, [&] {
    memarea::detail::pool_free_sized_c(pool, ptr, size, stream, "pool free");
  });
}

memarea_status memarea_area_create_pooled(memarea_area_t* area, memarea_pool_t pool) {
  return c_call(__func__, [&] {
    require(area, "area");
    int device = -1;
    unsigned flags = 0;
    memarea::detail::pool_area_of_c(pool, &device, &flags);
    *area = new memarea_area{device, flags, pool};
  });
}

memarea_status memarea_area_get_attributes(memarea_area_t area, int* device, unsigned* flags,
                                           memarea_pool_t* pool) {
  return c_call(__func__, [&] {
    require(area, "area");
    if (device) *device = area->device;
    if (flags) *flags = area->flags;
    if (pool) *pool = area->pool;
  });
}

memarea_status memarea_pool_trim(memarea_pool_t pool, size_t keep_bytes) {
  return c_call(__func__, [&] { memarea::detail::pool_trim_c(pool, keep_bytes); });
}

memarea_status memarea_pool_get_stats(memarea_pool_t pool, memarea_pool_stats* stats) {
  return c_call(__func__, [&] {
    require(stats, "stats");
    *stats = memarea::detail::pool_stats_c(pool);
  });
}

}  // extern "C"
