// Must not compile: driver sits below core (tests/layers/CMakeLists.txt).
#include "core/memory/registry.hpp"
