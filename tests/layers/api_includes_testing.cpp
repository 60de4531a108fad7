// Must not compile: the testing interface is the white-box suite's, never the contract suite's
// (tests/layers/CMakeLists.txt).
#include "testing/memarea_testing.hpp"
