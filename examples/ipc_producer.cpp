// Shares device memory with another process: allocates and fills a buffer, writes its IPC
// handle (256 hex digits) to a file (or stdout), waits for a consumer to open and close it,
// checks what the consumer wrote back, and frees the buffer.
//
//   example_ipc_producer /tmp/handle & example_ipc_consumer /tmp/handle; wait
#include <memarea/memarea.hpp>
#include <memarea/ipc.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  try {
    if (memarea::device_count() == 0) {
      std::cerr << "no GPU devices (set MEMAREA_SIM_DEVICES=1 to try the sim backend)\n";
      return 0;
    }
    constexpr std::size_t n = 1 << 20;
    memarea::buffer b = memarea::area(0).allocate(n);
    std::vector<unsigned char> data(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
    memarea::copy(b.data(), data.data(), n);

    const std::string hex = memarea::ipc::export_handle(b.data()).to_hex();
    if (argc > 1) {
      // Written whole, then renamed: the consumer never reads half a handle.
      const std::string tmp = std::string(argv[1]) + ".tmp";
      std::ofstream(tmp) << hex << "\n";
      std::rename(tmp.c_str(), argv[1]);
    } else {
      std::cout << hex << std::endl;
    }

    // The consumer came (importers > 0) and went (back to 0), or 60 s passed. A consumer can
    // open, write and close between two looks at the count: the bytes written back say so too.
    std::vector<unsigned char> back(n);
    std::size_t changed = 0;
    auto count_changed = [&] {
      memarea::copy(back.data(), b.data(), n);
      changed = 0;
      for (std::size_t i = 0; i < n; ++i) changed += back[i] == static_cast<unsigned char>(~data[i]);
      return changed;
    };
    bool seen = false;
    for (int i = 0; i < 6000; ++i) {
      const int k = memarea::ipc::importers(b.data());
      if (k > 0) seen = true;
      if (k == 0 && (seen || count_changed() == n)) {
        seen = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    count_changed();
    std::cerr << "producer: consumer " << (seen ? "came" : "never came") << "; " << changed
              << " of " << n << " bytes were written back\n";
    // Freeing while a consumer still had it open would be deferred until its close.
    return seen && changed == n ? 0 : 1;
  } catch (const memarea::error& e) {
    std::cerr << "producer: " << e.what() << "\n";
    return 1;
  }
}
