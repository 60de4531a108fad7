// Compiles: the contract suite's own helpers and memarea's and AML's public headers, with the
// include roots of the contract suite (the control of api_includes_core.cpp and
// api_includes_testing.cpp).
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/memarea.h>
#include <memarea/memarea.hpp>

#include <aml.h>
