// Uses an installed memarea through its CMake package.
#include <memarea/memarea.hpp>
#include <cstdio>
int main() {
  std::printf("backend %s, %d device(s)\n", memarea::backend_name().c_str(), memarea::device_count());
  return 0;
}
