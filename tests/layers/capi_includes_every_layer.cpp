// Must compile: the top layer sees every layer below it (the control for the three probes that
// must not compile; tests/layers/CMakeLists.txt).
#include "base/lease.hpp"
#include "capi/c_call.hpp"
#include "core/memory/registry.hpp"
#include "driver/driver.hpp"
