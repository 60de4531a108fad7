// Must not compile: core sits below the C API (tests/layers/CMakeLists.txt).
#include "capi/c_call.hpp"
