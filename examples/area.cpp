// Areas from C++: device, pinned and managed memory on a chosen device; lookup; copies.
// Runs on any backend: `MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 ./example_area`.
#include <memarea/memarea.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  try {
    if (memarea::device_count() == 0) {
      std::printf("no devices (%s): nothing to show\n", memarea::backend_name().c_str());
      return 0;
    }
    const int last = memarea::device_count() - 1;
    memarea::area device_area(last);  // device memory on the last device
    memarea::area pinned(memarea::area::current_device,
                         memarea::area_flags::host | memarea::area_flags::global);

    memarea::buffer d = device_area.allocate(1 << 20);
    memarea::buffer h = pinned.allocate(1 << 20);
    std::memset(h.data(), 0x5a, h.size());
    memarea::copy(d.data(), h.data(), h.size());

    auto info = memarea::lookup(static_cast<char*>(d.data()) + 1000);
    std::printf("%p is inside a %zu-byte %s allocation on device %d\n",
                static_cast<void*>(static_cast<char*>(d.data()) + 1000), info.size, memarea::to_string(info.kind),
                info.device);
    std::printf("the thread's device is still %d\n", memarea::get_device());
  } catch (const memarea::error& e) {
    std::fprintf(stderr, "memarea: %s\n", e.what());
    return 1;
  }
  return 0;
}
