// locate(): where a pointer of a copy, memset or 2D copy lives, and the calling thread's state
// of copies that makes it cheap. Inline, since it is on every copy's fixed cost: the common case
// is one thread-local fetch and a handful of compares against the thread's cache of the
// registry's answers (registry::lookup).
#pragma once

#include "core/copy/copy_impl.hpp"
#include "core/memory/registry.hpp"

#include <cstddef>

namespace memarea::detail {

/// The calling thread's state of copies, in one thread-local block so that a copy pays for one
/// thread-local lookup (a call to __tls_get_addr in a shared library). Trivially constructed
/// and destroyed: no guard or wrapper on access.
struct thread_state {
  copy_path last = copy_path::none;  ///< last_copy_path()
  registry_cache::cache lookups;     ///< locate()'s recent answers
  /// Where in `lookups` the last copy, memset or 2D copy found its destination and its source
  /// (registry::lookup's hints): a loop of them finds each at the first entry it asks.
  unsigned dst_hint = 0, src_hint = 0;
};
/// Every thread's (copy.cpp defines it). Hidden here as there: the library's own, reached
/// without the dynamic linker's lookup.
[[gnu::visibility("hidden")]] extern thread_local constinit thread_state t_state;

/// The calling thread's t_state, fetched once per call. The empty asm hides where the pointer
/// came from: otherwise GCC recomputes a thread-local address (a call to __tls_get_addr in a
/// shared library) at every use rather than keep it in a register or on the stack.
inline thread_state& this_thread_state() noexcept {
  thread_state* ts = &t_state;
  asm("" : "+r"(ts));
  return *ts;
}

/// locate()'s refusals: invalid_value naming `role` and `what`.
[[noreturn, gnu::cold]] void refuse_null(const char* role, const char* what);
[[noreturn, gnu::cold]] void refuse_past_end(const void* p, std::size_t n, const void* base,
                                             std::size_t size, const char* role,
                                             const char* what);
/// locate() for a pointer memarea did not allocate: the driver's word, or pageable memory.
endpoint locate_unregistered(const void* p, std::size_t n, const char* role, const char* what);

/// locate() on the registry `reg` with the calling thread's cache `lookups` (both fetched once
/// per call by the caller), starting at the entry `hint` names.
[[gnu::always_inline]] inline endpoint locate_in(const registry& reg,
                                                 registry_cache::cache& lookups, unsigned& hint,
                                                 const void* p, std::size_t n, const char* role,
                                                 const char* what) {
  if (!p) [[unlikely]]
    refuse_null(role, what);
  // Read from the cache entry at once (the next lookup may overwrite it), not copied first.
  if (const span_info* r = reg.lookup(p, lookups, hint)) [[likely]] {
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(p) -
                                                 static_cast<const char*>(r->base));
    if (n > r->size - offset) [[unlikely]]
      refuse_past_end(p, n, r->base, r->size, role, what);
    return {r->kind, r->device, r->context_device};
  }
  return locate_unregistered(p, n, role, what);
}

/// Which end of a copy a pointer is: each keeps a hint of its own into the thread's cache.
enum class copy_end : bool { destination, source };

/// Locates p and checks that [p, p+n) stays inside its allocation (invalid_value otherwise,
/// naming the end and `what`); NULL is invalid_value. Memory memarea allocated is found in its
/// registry (from the calling thread's cache, without a lock, while no allocation came or
/// went: registry::locate); other pointers are asked of the driver on every call, since
/// memory the driver made for someone else may come and go without memarea seeing it. The
/// lookup starts at the cache entry that last answered for this end (thread_state's dst_hint
/// or src_hint), so that a loop of memsets or 2D copies of one buffer finds it at the first
/// entry it asks, whatever else the thread looked up before the loop.
[[gnu::always_inline]] inline endpoint locate(const void* p, std::size_t n, copy_end end,
                                              const char* what) {
  auto& ts = this_thread_state();
  const bool to = end == copy_end::destination;
  return locate_in(allocations(), ts.lookups, to ? ts.dst_hint : ts.src_hint, p, n,
                   to ? "destination" : "source", what);
}

}  // namespace memarea::detail
