// Opens memory another process shared (see ipc_producer.cpp): reads the handle from a file
// (or stdin), checks the bytes, writes their complement back and closes the mapping.
#include <memarea/memarea.hpp>
#include <memarea/ipc.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  try {
    if (memarea::device_count() == 0) {
      std::cerr << "no GPU devices (set MEMAREA_SIM_DEVICES=1 to try the sim backend)\n";
      return 0;
    }
    std::string hex;
    if (argc > 1) {
      for (int i = 0; i < 1000 && hex.empty(); ++i) {  // the producer may not have written yet
        std::ifstream(argv[1]) >> hex;
        if (hex.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } else {
      std::cin >> hex;
    }
    const auto h = memarea::ipc::handle::from_hex(hex);
    constexpr std::size_t n = 1 << 20;
    // Closed when m goes out of scope; opening on another device than the producer's works
    // with lazy peer access.
    memarea::ipc::mapping m(h, -1, memarea::ipc::lazy_enable_peer_access);
    std::vector<unsigned char> data(n);
    memarea::copy(data.data(), m.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] != static_cast<unsigned char>(i * 7 + 3)) {
        std::cerr << "consumer: byte " << i << " differs\n";
        return 1;
      }
      data[i] = static_cast<unsigned char>(~data[i]);
    }
    memarea::copy(m.data(), data.data(), n);
    std::cerr << "consumer: read and wrote back " << n << " bytes\n";
    return 0;
  } catch (const memarea::error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
