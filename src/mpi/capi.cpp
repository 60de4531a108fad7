// The C API of libmemarea_mpi (include/memarea/mpi.h) over the C++ one. Failures report as
// memarea's own C calls do, a status and this thread's memarea_last_error_message (set through
// memarea::c_call, over the public memarea_set_last_error: libmemarea_mpi uses memarea's
// public API only).
#include "shared.hpp"

#include <memarea/c_call.hpp>
#include <memarea/mpi.h>
#include <memarea/mpi.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <cmath>

struct memarea_mpi_window {
  memarea::mpi::shared_window w;
};
struct memarea_mpi_shared {
  memarea::mpi::shared_buffers s;
};

namespace memarea::mpi::detail {

/// Builds a window over a C area (a pooled one included), which the caller may destroy once
/// the window exists: the segment is freed by pointer, through its pool or its device.
struct window_access {
  static shared_window make(MPI_Comm comm, std::size_t bytes, memarea_area_t a,
                            const options& o) {
    memarea_pool_t pool = nullptr;
    unsigned flags = 0;
    require_ok(memarea_area_get_attributes(a, nullptr, &flags, &pool), "reading the area");
    auto allocate = [a, bytes, flags](int) -> void* {
      if (flags != 0) {
        throw error(errc::not_supported,
                    fmt::format("the area's flags {:#x} hand out host or managed memory; a "
                                "window needs device memory (flags 0, or a pool of such an area)",
                                flags));
      }
      void* p = nullptr;
      require_ok(memarea_area_mmap(a, &p, bytes, nullptr), "allocating the window's segment");
      return p;
    };
    auto release = [pool](void* p, std::size_t n) {
      if (pool) {
        require_ok(memarea_pool_free(pool, p, nullptr), "freeing the window's segment");
      } else {
        area(lookup(p).device).munmap(p, n);
      }
    };
    return shared_window(comm, bytes, allocate, release, o);
  }
};

}  // namespace memarea::mpi::detail

namespace {

using memarea::errc;
using memarea::error;

thread_local memarea_mpi_failure t_failure = MEMAREA_MPI_FAILURE_NONE;
thread_local int t_failed_rank = -1;

/// Runs f: success, or the status of what it threw with "fn: <its message>" as this thread's
/// memarea message (memarea::c_call, as memarea's own C calls), recording why a collective
/// failed for memarea_mpi_last_failure.
template <class F>
memarea_status mpi_call(const char* fn, F&& f) noexcept {
  t_failure = MEMAREA_MPI_FAILURE_NONE;
  t_failed_rank = -1;
  return memarea::c_call(fn, [&] {
    try {
      f();
    } catch (const memarea::mpi::collective_error& e) {
      t_failure = static_cast<memarea_mpi_failure>(e.kind());
      t_failed_rank = e.rank();
      throw;
    }
  });
}

/// Throws invalid_value when an output pointer is NULL.
void require(const void* p, const char* name) {
  if (!p) throw error(errc::invalid_value, fmt::format("{} is NULL", name));
}

memarea::mpi::options to_options(const memarea_mpi_options* c) {
  memarea::mpi::options o;
  if (!c) return o;
  if (c->flags != 0) {
    throw error(errc::invalid_value, fmt::format("options->flags {:#x} must be 0", c->flags));
  }
  if (!std::isfinite(c->timeout_seconds) || c->timeout_seconds <= 0 ||
      c->timeout_seconds > 1e7) {
    throw error(errc::invalid_value,
                fmt::format("options->timeout_seconds {} is not in (0, 1e7]", c->timeout_seconds));
  }
  o.timeout = std::chrono::milliseconds(
      static_cast<long long>(std::ceil(c->timeout_seconds * 1000.0)));
  o.device = c->device;
  return o;
}

template <class T>
T& need(T* p, const char* name) {
  require(p, name);
  return *p;
}

}  // namespace

extern "C" {

memarea_status memarea_mpi_last_failure(memarea_mpi_failure* kind, int* rank) {
  if (kind) *kind = t_failure;
  if (rank) *rank = t_failed_rank;
  return MEMAREA_SUCCESS;
}

memarea_status memarea_mpi_window_create(memarea_mpi_window_t* window, MPI_Comm comm,
                                         size_t bytes_per_rank, memarea_area_t area,
                                         const memarea_mpi_options* options) {
  return mpi_call(__func__, [&] {
    require(window, "window");
    auto o = to_options(options);
    if (area) {
      *window = new memarea_mpi_window{
          memarea::mpi::detail::window_access::make(comm, bytes_per_rank, area, o)};
    } else {
      *window = new memarea_mpi_window{memarea::mpi::shared_window(comm, bytes_per_rank, o)};
    }
  });
}

memarea_status memarea_mpi_window_destroy(memarea_mpi_window_t window) {
  return mpi_call(__func__, [&] {
    require(window, "window");
    std::unique_ptr<memarea_mpi_window> w(window);  // gone whatever destroy throws
    w->w.destroy();
  });
}

memarea_status memarea_mpi_window_local(memarea_mpi_window_t window, void** ptr) {
  return mpi_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = need(window, "window").w.local();
  });
}

memarea_status memarea_mpi_window_remote(memarea_mpi_window_t window, int node_rank, void** ptr) {
  return mpi_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = need(window, "window").w.remote(node_rank);
  });
}

memarea_status memarea_mpi_window_node_rank(memarea_mpi_window_t window, int* node_rank,
                                            int* node_size) {
  return mpi_call(__func__, [&] {
    auto& w = need(window, "window").w;
    if (node_rank) *node_rank = w.node_rank();
    if (node_size) *node_size = w.node_size();
  });
}

memarea_status memarea_mpi_window_node_comm(memarea_mpi_window_t window, MPI_Comm* comm) {
  return mpi_call(__func__, [&] {
    require(comm, "comm");
    *comm = need(window, "window").w.node_comm();
  });
}

memarea_status memarea_mpi_window_can_access(memarea_mpi_window_t window, int node_rank,
                                             int* can_access) {
  return mpi_call(__func__, [&] {
    require(can_access, "can_access");
    *can_access = need(window, "window").w.can_access(node_rank) ? 1 : 0;
  });
}

memarea_status memarea_mpi_window_fence(memarea_mpi_window_t window) {
  return mpi_call(__func__, [&] { need(window, "window").w.fence(); });
}

memarea_status memarea_mpi_share(memarea_mpi_shared_t* shared, MPI_Comm comm, const void* buffer,
                                 const memarea_mpi_options* options) {
  return mpi_call(__func__, [&] {
    require(shared, "shared");
    auto o = to_options(options);
    *shared = new memarea_mpi_shared{memarea::mpi::share(comm, buffer, o)};
  });
}

memarea_status memarea_mpi_shared_get(memarea_mpi_shared_t shared, int node_rank, void** ptr,
                                      size_t* size) {
  return mpi_call(__func__, [&] {
    require(ptr, "ptr");
    auto& s = need(shared, "shared").s;
    void* p = s.get(node_rank);
    if (size) *size = s.size(node_rank);
    *ptr = p;
  });
}

memarea_status memarea_mpi_shared_node_rank(memarea_mpi_shared_t shared, int* node_rank,
                                            int* node_size) {
  return mpi_call(__func__, [&] {
    auto& s = need(shared, "shared").s;
    if (node_rank) *node_rank = s.node_rank();
    if (node_size) *node_size = s.node_size();
  });
}

memarea_status memarea_mpi_shared_can_access(memarea_mpi_shared_t shared, int node_rank,
                                             int* can_access) {
  return mpi_call(__func__, [&] {
    require(can_access, "can_access");
    *can_access = need(shared, "shared").s.can_access(node_rank) ? 1 : 0;
  });
}

memarea_status memarea_mpi_shared_close(memarea_mpi_shared_t shared) {
  return mpi_call(__func__, [&] {
    require(shared, "shared");
    std::unique_ptr<memarea_mpi_shared> s(shared);  // gone whatever close throws
    s->s.close();
  });
}

}  // extern "C"
