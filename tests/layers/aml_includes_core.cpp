// Must not compile: libmemarea-aml uses memarea's public API only (tests/layers/CMakeLists.txt).
#include "core/memory/registry.hpp"
