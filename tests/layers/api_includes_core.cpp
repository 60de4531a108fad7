// Must not compile: the contract suite (tests/api) uses memarea's public API only
// (tests/layers/CMakeLists.txt).
#include "core/memory/registry.hpp"
