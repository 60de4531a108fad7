// Must not compile: base sits below driver (tests/layers/CMakeLists.txt).
#include "driver/driver.hpp"
