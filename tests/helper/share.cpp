// memarea_test_helper's `share` command (tests/helper/main.cpp lists the commands): a process
// that both exports and imports, for the usage and `memarea ps` tests.
#include <memarea/memarea.hpp>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/lease.hpp"

namespace memarea_helper {

int share(int argc, char** argv) {
  if (argc != 3) return 64;
  const std::size_t n = std::stoull(argv[2]);
  const memarea::area a(0);
  void* p = a.mmap(n);
  std::cout << memarea::ipc::export_handle(p).to_hex() << std::endl;
  std::vector<void*> opened;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd, hex;
    in >> cmd >> hex;
    try {
      if (cmd == "open") {
        opened.push_back(memarea::ipc::open(memarea::ipc::handle::from_hex(hex)));
        std::cout << "ok" << std::endl;
      } else if (cmd == "owner") {
        char b[17];
        std::snprintf(b, sizeof b, "%016llx",
                      static_cast<unsigned long long>(memarea::detail::lease::current()));
        std::cout << b << std::endl;
      } else if (cmd == "usage") {
        const memarea::usage_figures f = memarea::memory_usage(0);
        std::cout << "live=" << f.live << " reserved=" << f.reserved
                  << " exported=" << f.exported << " imported=" << f.imported << std::endl;
      }
    } catch (const memarea::error& e) {
      std::cout << memarea::to_string(e.status()) << std::endl;
    }
  }
  for (void* q : opened) memarea::ipc::close(q);
  a.munmap(p, n);
  return 0;
}

}  // namespace memarea_helper
