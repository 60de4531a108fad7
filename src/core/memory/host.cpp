// The host: NUMA nodes, and memarea's pageable host memory — allocation on a node, release, and
// the managed-memory calls on it (prefetch migrates between nodes, advice sets memory policies,
// the rest is recorded per page so range queries answer what was set).
#include "core/memory/host_impl.hpp"

#include "core/device_impl.hpp"
#include "core/memory/area_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "driver/host/host.hpp"
#include "driver/page_attributes.hpp"

#include <memarea/host.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace memarea {
namespace detail {
namespace {

/// What memarea keeps for one host allocation beside the registry's record.
struct host_entry {
  std::uint64_t id = 0;  ///< the record's id once adopted (0 until then)
  /// The policy allocate() gave the pages: what advice "the host, no particular node" and
  /// "unset preferred location" put back.
  detail::host::placement placement;
  page_attributes pages;        ///< one entry per managed_granularity bytes
};

/// Every live host allocation by base address. One mutex: advice holds it across its mbind so
/// that the kernel's policy and the recorded preference cannot be set by two callers crosswise.
struct host_table {
  ranked_mutex m{lock_rank::host_table};
  std::map<std::uintptr_t, host_entry> by_base;
};

/// Never destroyed: a host_buffer with static storage may be freed after this file's statics.
host_table& table() {
  return made_once([] { return new host_table; });
}

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

/// r's entry; invalid_value when r was freed meanwhile (its base may even be reused).
host_entry& entry_of(host_table& t, const record& r, const char* what) {
  auto it = t.by_base.find(addr(r.base));
  if (it == t.by_base.end() || it->second.id != r.id)
    throw error(errc::invalid_value,
                fmt::format("{}: the host allocation at {} was freed", what, r.base));
  return it->second;
}

/// The first and last attribute pages of [ptr, ptr+count) inside r.
std::pair<std::size_t, std::size_t> pages_of(const record& r, const void* ptr, std::size_t count) {
  const std::size_t off = addr(ptr) - addr(r.base);
  return {off / managed_granularity, (off + count - 1) / managed_granularity};
}

/// Waits for the work queued on s, as stream order demands before a synchronous migration.
/// Without devices no stream exists and nothing can be queued.
void wait_for(memarea_stream_t s, const char* what) {
  auto& sys = system::get();
  if (!s && sys.device_count() == 0) return;
  auto ref = resolve(s);
  check(sys.gpu().stream_synchronize(ref.device, ref.native), what);
}

/// "on NUMA node 1", "interleaved over NUMA nodes 0,1", "on any NUMA node": for messages.
std::string describe(const detail::host::placement& where) {
  std::string nodes;
  for (int n = 0; n < static_cast<int>(where.nodes.size() * sizeof(unsigned long) * 8); ++n) {
    if (!detail::host::mask_has(where.nodes, n)) continue;
    if (!nodes.empty()) nodes += ',';
    nodes += std::to_string(n);
  }
  switch (where.mode) {
    case detail::host::policy::default_policy: return "on any NUMA node";
    case detail::host::policy::bind: return fmt::format("bound to NUMA nodes {}", nodes);
    case detail::host::policy::preferred: return fmt::format("preferring NUMA nodes {}", nodes);
    case detail::host::policy::interleave:
      return fmt::format("interleaved over NUMA nodes {}", nodes);
  }
  return "with an unknown policy";
}

}  // namespace

void* host_malloc(std::size_t size, int node) {
  if (size == 0) throw error(errc::invalid_value, "host_malloc: size is 0");
  if (node < memarea::host::any_node)
    throw error(errc::invalid_device,
                fmt::format("host_malloc: NUMA node {} is neither a node nor -1 (any node)",
                            node));
  return host_malloc_placed(size, detail::host::placement_on(node), nullptr, nullptr);
}

void* host_malloc_placed(std::size_t size, const detail::host::placement& where, void* hint,
                         const void* tag) {
  const char* what = "host_malloc";
  if (size == 0) throw error(errc::invalid_value, fmt::format("{}: size is 0", what));
  const std::size_t ps = detail::host::page_size();
  if (size > SIZE_MAX - (ps - 1))
    throw error(errc::out_of_memory,
                fmt::format("{}: {} bytes is larger than any address space", what, size));
  const std::size_t span = (size + ps - 1) / ps * ps;
  auto& t = table();
  // The entry is built before the memory exists, so that running out of memory for it cannot
  // leave a mapping behind.
  host_entry e;
  e.placement = where;
  e.pages = page_attributes(span / managed_granularity);
  void* p = nullptr;
  // The message is built only on failure: building it after a success could throw with the
  // mapping not yet recorded anywhere.
  if (dstatus s = detail::host::allocate(size, where, hint, &p); !s.ok())
    check(s, fmt::format("{} of {} bytes ({})", what, size, describe(where)).c_str());
  try {
    std::lock_guard lock(t.m);
    t.by_base.insert_or_assign(addr(p), std::move(e));
  } catch (...) {
    (void)detail::host::deallocate(p, span);
    throw;
  }
  record r;
  r.base = p;
  r.size = span;
  r.requested = size;
  r.kind = MEMAREA_MEMORY_HOST;
  r.device = MEMAREA_CPU_DEVICE_ID;
  r.context_device = -1;  // no device context: copies run where the other end says
  r.made_by = origin::host;
  r.tag = tag;
  adopt(r);  // on failure release() drops the entry and unmaps
  std::lock_guard lock(t.m);
  if (auto it = t.by_base.find(addr(p)); it != t.by_base.end()) it->second.id = r.id;
  return p;
}

dstatus host_release(const record& r) {
  // Taken out before munmap: while p is mapped no other allocation can have its address, so
  // the entry found is r's own (id 0 when adopt() failed before the id was stored). Put back if
  // munmap fails, since the registry then keeps the allocation alive too.
  auto& t = table();
  decltype(t.by_base)::node_type taken;
  {
    std::lock_guard lock(t.m);
    auto it = t.by_base.find(addr(r.base));
    if (it != t.by_base.end() && (it->second.id == r.id || it->second.id == 0))
      taken = t.by_base.extract(it);
  }
  dstatus s = detail::host::deallocate(r.base, r.size);
  if (!s.ok() && !taken.empty()) {
    std::lock_guard lock(t.m);
    t.by_base.insert(std::move(taken));
  }
  return s;
}

void host_prefetch(const record& r, const void* ptr, std::size_t count, location to,
                   memarea_stream_t s) {
  const char* what = "mem_prefetch_async";
  auto& t = table();
  const auto [first, last] = pages_of(r, ptr, count);
  if (to.kind != location::type::device) {
    // Room for the record before the pages move, so that a migration is never left unrecorded
    // for want of memory (only a concurrent advice on the same pages could undo it).
    std::lock_guard lock(t.m);
    entry_of(t, r, what).pages.isolate(first, last);
  }
  switch (to.kind) {
    case location::type::device:
      throw error(errc::not_supported,
                  fmt::format("{}: {} is pageable host memory; it lives on host NUMA nodes and "
                              "cannot be prefetched to device {} (use managed memory)",
                              what, ptr, to.id));
    case location::type::host_numa:
      wait_for(s, what);
      check(detail::host::migrate(ptr, count, to.id), [&] {
        return fmt::format("{} of {} bytes at {} to NUMA node {}", what, count, ptr, to.id);
      });
      break;
    case location::type::host:
      break;  // host memory is on the host already: nothing moves
    case location::type::invalid:
      throw error(errc::invalid_device, fmt::format("{}: no location given", what));
  }
  std::lock_guard lock(t.m);
  try {
    entry_of(t, r, what).pages.prefetched(first, last, MEMAREA_CPU_DEVICE_ID);
  } catch (const std::bad_alloc&) {
    // A concurrent advice merged the runs isolate() split: the pages did move, and only the
    // record of it is lost (the query then answers what it knew before), as on sim.
  }
}

void host_advise(const record& r, const void* ptr, std::size_t count, memarea_mem_advice advice,
                 location where) {
  const char* what = "mem_advise";
  const bool on_device = where.kind == location::type::device;
  int id = MEMAREA_INVALID_DEVICE_ID;  // what the attribute table records
  switch (advice) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      break;
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if (on_device)
        throw error(errc::not_supported,
                    fmt::format("{}: {} is pageable host memory; it is placed on host NUMA nodes "
                                "only, not on device {} (use managed memory)",
                                what, ptr, where.id));
      id = MEMAREA_CPU_DEVICE_ID;
      break;
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
      if (on_device && !device_capabilities(where.id).pageable)
        throw error(errc::not_supported,
                    fmt::format("{}: device {} cannot access pageable host memory (no "
                                "pageable_memory_access), so {} cannot be accessed by it",
                                what, where.id, ptr));
      if (on_device && where.id >= page_attributes::max_devices)
        throw error(errc::not_supported,
                    fmt::format("{}: accessed-by records devices below {}, not {}", what,
                                page_attributes::max_devices, where.id));
      id = on_device ? where.id : MEMAREA_CPU_DEVICE_ID;
      break;
    default:
      throw error(errc::invalid_value,
                  fmt::format("{}: unknown advice {}", what, static_cast<int>(advice)));
  }
  auto& t = table();
  std::lock_guard lock(t.m);
  host_entry& e = entry_of(t, r, what);
  // Room for the record first: once the kernel has taken the advice, recording cannot fail.
  const auto [first, last] = pages_of(r, ptr, count);
  e.pages.isolate(first, last);
  const auto doing = [&] {  // the message, made only on failure
    return fmt::format("{} {} on {} bytes of host memory at {}", what, static_cast<int>(advice),
                       count, ptr);
  };
  // The allocation's own policy (a node, a set, or the default): what "the host, no particular
  // node" and unset go back to.
  auto restore = [&] {
    check(detail::host::set_policy(ptr, count, e.placement, false), doing);
  };
  switch (advice) {
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if (where.kind == location::type::host_numa) {
        check(detail::host::set_policy(ptr, count, detail::host::policy::preferred, where.id),
              doing);
      } else {
        restore();
      }
      break;
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      restore();
      break;
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
      // The device maps pageable memory itself (HMM, ATS): its driver takes the hint.
      if (on_device)
        check(system::get().gpu().mem_advise(ptr, count, advice, where), doing);
      break;
    default:
      break;  // read-mostly: no kernel meaning, recorded only
  }
  e.pages.advise(first, last, advice, id);
}

void host_range_attribute(const record& r, void* data, std::size_t data_size,
                          memarea_mem_range_attribute attribute, const void* ptr,
                          std::size_t count) {
  const char* what = "mem_range_get_attribute";
  auto& t = table();
  std::lock_guard lock(t.m);
  auto [first, last] = pages_of(r, ptr, count);
  if (!entry_of(t, r, what).pages.answer(attribute, data, data_size, first, last))
    throw error(errc::invalid_value, fmt::format("{}: data_size {} does not fit attribute {}", what,
                                                 data_size, static_cast<int>(attribute)));
}

}  // namespace detail

// --- C++ API ------------------------------------------------------------------------------------

namespace host {

bool numa_available() noexcept { return detail::host::numa_available(); }

std::vector<numa_node> numa_nodes() {
  std::vector<numa_node> out;
  for (auto& n : detail::host::numa_nodes())
    out.push_back(numa_node{n.id, n.total_bytes, n.free_bytes, n.cpus});
  return out;
}

void* allocate(std::size_t size, int node) { return detail::host_malloc(size, node); }

void* allocate_placed(std::size_t size, const placement& where, void* hint, const void* tag) {
  detail::host::placement p;
  switch (where.mode) {
    case policy::default_policy: p.mode = detail::host::policy::default_policy; break;
    case policy::bind: p.mode = detail::host::policy::bind; break;
    case policy::preferred: p.mode = detail::host::policy::preferred; break;
    case policy::interleave: p.mode = detail::host::policy::interleave; break;
    default:
      throw error(errc::invalid_value,
                  fmt::format("host_malloc: unknown policy {}", static_cast<int>(where.mode)));
  }
  if (p.mode != detail::host::policy::default_policy) p.nodes = where.nodes;
  return detail::host_malloc_placed(size, p, hint, tag);
}

void free(void* ptr) { detail::managed_free(ptr); }

int node_of(const void* ptr, std::size_t n) {
  int node = MEMAREA_INVALID_DEVICE_ID;
  detail::check(detail::host::query_node(ptr, n, &node), "host::node_of");
  return node;
}

}  // namespace host
}  // namespace memarea
