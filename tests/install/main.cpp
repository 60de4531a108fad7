// Uses an installed memarea through its CMake package.
#include <memarea/c_interop.hpp>
#include <memarea/memarea.hpp>
#include <cstdio>
int main() {
  std::printf("backend %s, %d device(s)\n", memarea::backend_name().c_str(), memarea::device_count());
  // The C API's names reach C++ code through c_interop.hpp: the default stream is NULL there.
  const memarea::stream_view default_stream;
  return memarea::to_c(default_stream) == nullptr ? 0 : 1;
}
