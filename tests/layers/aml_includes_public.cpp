// Compiles: libmemarea-aml's own headers, AML's and memarea's public ones, with the include roots
// of libmemarea-aml's objects (the control of aml_includes_core.cpp).
#include "allocator_impl.hpp"
#include "fork_lock.hpp"
#include "linux_numa.hpp"

#include <memarea/memarea.h>
#include <memarea/memarea.hpp>

#include <aml.h>
