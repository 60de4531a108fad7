// Whether the library under test has the topology measurement (CMake's MEMAREA_WITH_TOPO, which
// tests/CMakeLists.txt passes to the test programs as MEMAREA_TEST_WITH_TOPO), and what the
// topology report says where it does not (src/topo/topo_unavailable.cpp): the tests of the
// report expect that refusal in such a build, and the measurement otherwise.
#pragma once

namespace memarea::test {

/// Whether libmemarea was built with the topology measurement.
inline constexpr bool topo_built() {
#if defined(MEMAREA_TEST_WITH_TOPO) && !MEMAREA_TEST_WITH_TOPO
  return false;
#else
  return true;
#endif
}

/// The reason the topology report gives in a library built without the measurement (after the
/// C call's name, or "topo: " in the CLI's message).
inline constexpr const char* kTopoCompiledOut =
    "this memarea was built without the topology measurement (CMake option "
    "MEMAREA_WITH_TOPO=OFF); build it with MEMAREA_WITH_TOPO=ON for `memarea topo`";

}  // namespace memarea::test
