// memarea — the whole C++ API. Not included here: memarea/c_interop.hpp (conversions to and from
// the C API's types, for code that also calls memarea.h) and memarea/mpi.hpp (libmemarea_mpi).
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/event.hpp>
#include <memarea/host.hpp>
#include <memarea/limits.hpp>
#include <memarea/ipc.hpp>
#include <memarea/managed.hpp>
#include <memarea/owner.hpp>
#include <memarea/context.hpp>
#include <memarea/peer.hpp>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>
#include <memarea/sim.hpp>
#include <memarea/stream.hpp>
#include <memarea/usage.hpp>

#pragma GCC visibility pop
