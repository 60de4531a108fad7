// Entry point of the API suites, the contract suite (tests/api) and the white-box suite
// (tests/whitebox): prints which suite, which backend and how many devices this run tests.
#include <memarea/memarea.hpp>

#include <gtest/gtest.h>

#include <cstdio>

#ifndef MEMAREA_SUITE_NAME
#define MEMAREA_SUITE_NAME "API"
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    std::printf("memarea %s tests on backend '%s' with %d device(s)\n", MEMAREA_SUITE_NAME,
                memarea::backend_name().c_str(), memarea::device_count());
  } catch (const memarea::error& e) {
    std::printf("memarea failed to initialise: %s\n", e.what());
    return 1;
  }
  return RUN_ALL_TESTS();
}
