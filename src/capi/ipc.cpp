// The C API of inter-process sharing (memarea.h): thin wrappers over memarea::ipc.
#include "capi/c_call.hpp"
#include "core/ipc/ipc_impl.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/ipc.hpp>
#include <memarea/memarea.h>

using memarea::detail::c_call;
using memarea::detail::c_call_hot;
using memarea::detail::require;

extern "C" {

memarea_status memarea_ipc_get_mem_handle(memarea_ipc_handle_t* handle, void* ptr) {
  return c_call_hot(__func__, [&] {
    require(handle, "handle");
    *handle = memarea::to_c(memarea::ipc::export_handle(ptr));
  });
}

memarea_status memarea_ipc_open_mem_handle(void** ptr, memarea_ipc_handle_t handle,
                                           unsigned flags) {
  return c_call_hot(__func__, [&] {
    require(ptr, "ptr");
    *ptr = memarea::detail::ipc_internal::open_bytes(handle.bytes, -1, flags);
  });
}

memarea_status memarea_ipc_close_mem_handle(void* ptr) {
  return c_call_hot(__func__, [&] { memarea::ipc::close(ptr); });
}

memarea_status memarea_ipc_remove_stale_objects(size_t* removed) {
  return c_call(__func__, [&] {
    const std::size_t n = memarea::ipc::remove_stale_objects();
    if (removed) *removed = n;
  });
}

memarea_status memarea_ipc_sweep(memarea_ipc_sweep_report* report, int dry_run) {
  return c_call(__func__, [&] {
    const auto r = memarea::ipc::sweep(dry_run != 0);
    if (report) *report = memarea_ipc_sweep_report{r.removed.size(), r.live_owners, r.left_alone,
                                                   r.busy};
  });
}

memarea_status memarea_ipc_owner_id(unsigned long long* owner) {
  return c_call(__func__, [&] {
    require(owner, "owner");
    *owner = memarea::ipc::owner_id();
  });
}

memarea_status memarea_shareable_create(void** ptr, size_t* allocated, size_t size, int device) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    auto s = memarea::ipc::create_shareable(size, device);
    *ptr = s.ptr;
    if (allocated) *allocated = s.size;
  });
}

memarea_status memarea_shareable_export_fd(int* fd, void* ptr) {
  return c_call(__func__, [&] {
    require(fd, "fd");
    *fd = memarea::ipc::export_fd(ptr);
  });
}

memarea_status memarea_shareable_import_fd(void** ptr, int fd, size_t size, int device) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = memarea::ipc::import_fd(fd, size, device).ptr;
  });
}

memarea_status memarea_shareable_release(void* ptr) {
  return c_call(__func__, [&] { memarea::ipc::release_shareable(ptr); });
}

memarea_status memarea_ipc_send_fd(int socket, int fd, const void* payload, size_t size) {
  return c_call(__func__, [&] { memarea::ipc::send_fd(socket, fd, payload, size); });
}

memarea_status memarea_ipc_recv_fd(int socket, int* fd, void* payload, size_t capacity,
                                   size_t* received) {
  return c_call(__func__, [&] {
    require(fd, "fd");
    *fd = memarea::ipc::receive_fd(socket, payload, capacity, received);
  });
}

memarea_status memarea_ipc_recv_fd_timeout(int socket, int* fd, void* payload, size_t capacity,
                                           size_t* received, int timeout_ms) {
  return c_call(__func__, [&] {
    require(fd, "fd");
    *fd = memarea::ipc::receive_fd(socket, payload, capacity, received, timeout_ms);
  });
}

}  // extern "C"
