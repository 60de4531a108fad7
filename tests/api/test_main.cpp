// Entry point of the API tests: prints which backend and how many devices this run tests.
#include <memarea/memarea.hpp>

#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    std::printf("memarea API tests on backend '%s' with %d device(s)\n",
                memarea::backend_name().c_str(), memarea::device_count());
  } catch (const memarea::error& e) {
    std::printf("memarea failed to initialise: %s\n", e.what());
    return 1;
  }
  return RUN_ALL_TESTS();
}
