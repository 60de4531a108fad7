// Internals of areas (core/memory/area.cpp) shared by the rooms above them and the C API.
#pragma once

#include "core/memory/registry.hpp"
#include "driver/driver.hpp"

#include <cstddef>
#include <functional>

namespace memarea::detail {

/// The kind of memory an area with these flags hands out.
memarea_memory_kind kind_of_flags(unsigned flags) noexcept;
/// Throws invalid_value for unknown bits, invalid_device for a bad device (-1 is allowed).
void validate_area(int device, unsigned flags, const char* what);
/// Allocates through an area's value; option_device < 0: the area's device. tag goes on the
/// allocation's record (nullptr: none).
void* area_mmap(int area_device, unsigned flags, std::size_t size, int option_device,
                void* option_ptr, const void* tag = nullptr);
/// Frees through an area's value; invalid_value (changing nothing) for a bad pointer or size.
void area_munmap(int area_device, unsigned flags, void* ptr, std::size_t size);
/// Frees a registered allocation after validate(record) accepted it (validate throws to
/// refuse) and the registry's observer had its say (memory_observer::before_free: it may
/// refuse, or take the driver's free over); invalid_value when ptr is not the start of a live
/// allocation.
void free_record(void* ptr, const std::function<void(const record&)>& validate, const char* what);
/// memarea_free / free: any live memarea allocation that was not made by a pool (managed, from
/// an area, or pageable host memory) by its base alone.
void managed_free(void* ptr);
/// memarea_free_tagged / free_tagged: frees the allocation at ptr when it carries tag (not null)
/// and, size not 0, asked for exactly size bytes; invalid_value (nothing freed) otherwise.
void free_tagged(void* ptr, std::size_t size, const void* tag);
/// Gives r a fresh id and records it; if the registry throws, r goes back to the driver first.
void adopt(record& r);
/// Gives an allocation back to the driver.
dstatus release(const record& r);
/// Managed sizes are rounded up to whole 4 KiB pages.
constexpr std::size_t managed_granularity = 4096;
constexpr std::size_t round_up_managed(std::size_t n) {
  return (n + managed_granularity - 1) / managed_granularity * managed_granularity;
}

}  // namespace memarea::detail
