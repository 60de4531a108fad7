// Managed memory from C++: allocate, advise, prefetch to a device and back, query the range's
// attributes, and the same through the C API. Runs on any backend:
// `MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 ./example_managed`.
#include <memarea/device.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>
#include <memarea/stream.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

namespace mm = memarea::managed;

int main() {
  try {
    if (memarea::device_count() == 0) {
      std::printf("no devices on backend '%s'; nothing to show\n",
                  memarea::backend_name().c_str());
      return 0;
    }
    const int dev = memarea::device_count() - 1;
    if (!memarea::get_device_properties(dev).managed_memory) {
      // Allocating would be MEMAREA_ERROR_NOT_SUPPORTED; examples/host_numa.cpp needs no device.
      std::printf("device %d has no managed memory; nothing to show\n", dev);
      return 0;
    }
    memarea::set_device(dev);
    const std::size_t n = std::size_t{4} << 20;
    mm::managed_buffer buf(n);  // on the current device, whole 4 KiB pages
    std::memset(buf.data(), 7, n);

    // Hints: mostly read, best kept on `dev`, and read by the host too.
    mm::advise(buf.data(), n, mm::advice::set_read_mostly);
    mm::advise(buf.data(), n, mm::advice::set_preferred_location, mm::location::device(dev));
    mm::advise(buf.data(), n, mm::advice::set_accessed_by, mm::location::host());

    memarea::stream s(dev);
    mm::prefetch(buf.data(), n, mm::location::device(dev), s);
    s.synchronize();
    std::printf("read mostly: %d, preferred: %s, last prefetch: %s\n",
                mm::read_mostly(buf.data(), n),
                mm::to_string(mm::preferred_location(buf.data(), n)).c_str(),
                mm::to_string(mm::last_prefetch_location(buf.data(), n)).c_str());
    std::printf("accessed by:");
    for (int id : mm::accessed_by(buf.data(), n)) std::printf(" %d", id);
    std::printf("\n");

    mm::prefetch(buf.data(), n, mm::location::host(), s);
    s.synchronize();
    const auto* bytes = static_cast<const unsigned char*>(buf.data());
    std::printf("first byte back on the host: %d\n", bytes[0]);

    // The C API: the same calls, statuses instead of exceptions.
    void* p = nullptr;
    if (memarea_malloc_managed(&p, 10000, MEMAREA_MEM_ATTACH_GLOBAL) != MEMAREA_SUCCESS) {
      std::printf("malloc_managed: %s\n", memarea_last_error_message());
      return 1;
    }
    memarea_mem_advise(p, 10000, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, MEMAREA_CPU_DEVICE_ID);
    int preferred = 0;
    memarea_mem_range_get_attribute(&preferred, sizeof preferred,
                                    MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 10000);
    std::printf("C API preferred location: %d (MEMAREA_CPU_DEVICE_ID is %d)\n", preferred,
                MEMAREA_CPU_DEVICE_ID);
    memarea_status st = memarea_mem_prefetch_async(p, 10000, 99, nullptr);
    std::printf("prefetch to device 99: %s\n", memarea_status_name(st));
    memarea_free(p);
  } catch (const memarea::error& e) {
    std::printf("memarea error: %s\n", e.what());
    return 1;
  }
  return 0;
}
