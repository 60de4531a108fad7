// Must not compile: libmemarea_mpi uses memarea's public API only (tests/layers/CMakeLists.txt).
#include "capi/c_call.hpp"
