// Pageable host memory on NUMA nodes: allocate on a node, prefer another, prefetch the pages
// there, ask where they are and what was advised, copy to a device; then the same through the C
// API. Needs no GPU: `MEMAREA_BACKEND=none ./example_host_numa` (or sim, with devices).
#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/host.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace mm = memarea::managed;

int main() {
  try {
    const auto nodes = memarea::host::numa_nodes();
    std::printf("%zu NUMA node(s)%s\n", nodes.size(),
                memarea::host::numa_available() ? "" : " (no NUMA support: node 0 only)");
    const int first = nodes.front().id;
    const int last = nodes.back().id;

    const std::size_t n = std::size_t{8} << 20;
    memarea::host::host_buffer buf(n, first);  // bound to the first node, freed on scope exit
    std::memset(buf.data(), 1, n);             // first touch places the pages
    std::printf("written: pages on node %d\n", memarea::host::node_of(buf.data(), n));

    // Prefer the last node for pages placed from now on, then move the placed ones there.
    mm::advise(buf.data(), n, mm::advice::set_preferred_location, mm::location::host_numa(last));
    mm::advise(buf.data(), n, mm::advice::set_read_mostly);  // recorded only: no kernel meaning
    mm::prefetch(buf.data(), n, mm::location::host_numa(last));
    std::printf("after prefetch to node %d: pages on node %d; preferred %s, last prefetch %s, "
                "read mostly %d\n",
                last, memarea::host::node_of(buf.data(), n),
                mm::to_string(mm::preferred_location(buf.data(), n)).c_str(),
                mm::to_string(mm::last_prefetch_location(buf.data(), n)).c_str(),
                mm::read_mostly(buf.data(), n));
    std::printf("memarea knows it as %s memory\n",
                memarea::to_string(memarea::lookup(buf.data()).kind));

    // A device cannot hold pageable memory, but copies to and from devices work as usual.
    if (memarea::device_count() > 0) {
      try {
        mm::prefetch(buf.data(), n, mm::location::device(0));
      } catch (const memarea::error& e) {
        std::printf("prefetch to device 0: %s\n", e.what());
      }
      memarea::buffer dev = memarea::area(0).allocate(n);
      memarea::copy(dev.data(), buf.data(), n);
      std::vector<unsigned char> back(n);
      memarea::copy(back.data(), dev.data(), n);
      std::printf("to device 0 and back: %s\n",
                  std::memcmp(back.data(), buf.data(), n) == 0 ? "intact" : "CHANGED");
    }

    // The C API: allocate on a node, prefetch to a node, free.
    void* p = nullptr;
    if (memarea_host_malloc(&p, 100000, first) != MEMAREA_SUCCESS) {
      std::printf("host_malloc: %s\n", memarea_last_error_message());
      return 1;
    }
    std::memset(p, 2, 100000);
    memarea_mem_prefetch_host_numa_async(p, 100000, last, nullptr);
    memarea_mem_advise_host_numa(p, 100000, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, last);
    int preferred = 0;
    memarea_mem_range_get_attribute(&preferred, sizeof preferred,
                                    MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 100000);
    std::printf("C API: preferred location %d (MEMAREA_CPU_DEVICE_ID is %d)\n", preferred,
                MEMAREA_CPU_DEVICE_ID);
    memarea_status st = memarea_mem_prefetch_host_numa_async(p, 100000, last + 1, nullptr);
    std::printf("prefetch to node %d: %s\n", last + 1, memarea_status_name(st));
    memarea_free(p);
  } catch (const memarea::error& e) {
    std::printf("memarea error: %s\n", e.what());
    return 1;
  }
  return 0;
}
