// The sim driver's memory shared between processes: legacy IPC handles (a device allocation's
// shm name in the handle's bytes) and shareable memory (a sealed memfd passed as a descriptor).
#include "base/fault_guard.hpp"
#include "base/fresh_mmap.hpp"
#include "base/lease.hpp"
#include "driver/sim/sim_internal.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace memarea::detail::sim {

// --- legacy IPC --------------------------------------------------------------------------------

dstatus sim_driver::ipc_get_handle(void* base, ipc_native_handle* handle) {
  if (!handle) return fail(errc::invalid_value, "handle is null");
  std::lock_guard lk(m_);
  auto it = allocations_.find(addr(base));
  if (it == allocations_.end() || it->second.from != origin::device) {
    auto in = find_locked(base);
    if (in != allocations_.end() && in->second.from == origin::device) {
      return fail(errc::invalid_value, "{} is inside device memory at {:#x}, not its base",
                  fmt::ptr(base), in->first);
    }
    return fail(errc::invalid_value, "{} is not device memory of this driver", fmt::ptr(base));
  }
  if (it->second.inherited) {
    return fail(errc::invalid_value,
                "{} was allocated by the parent process before fork(); only it can export it",
                fmt::ptr(base));
  }
  ipc_payload p;
  std::memset(&p, 0, sizeof p);
  std::memcpy(p.magic, kIpcMagic, sizeof p.magic);
  p.device = it->second.device;
  p.size = it->second.size;
  const std::string& name = it->second.shm_name;
  if (name.size() >= sizeof p.name) {
    return fail(errc::unknown, "shm name {} does not fit a handle", name);
  }
  std::memcpy(p.name, name.data(), name.size());
  std::memset(handle->bytes, 0, sizeof handle->bytes);
  std::memcpy(handle->bytes, &p, sizeof p);
  return dstatus::success();
}

dstatus sim_driver::ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                                    void** ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  if (flags != 0 && flags != MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS) {
    return fail(errc::invalid_value, "flags {:#x} must be 0 or LAZY_ENABLE_PEER_ACCESS", flags);
  }
  if (auto r = check_device(device); !r.ok()) return r;
  ipc_payload p;
  std::memcpy(&p, handle.bytes, sizeof p);
  if (std::memcmp(p.magic, kIpcMagic, sizeof p.magic) != 0) {
    return fail(errc::invalid_handle, "not a sim IPC handle (bad magic)");
  }
  if (std::memchr(p.name, '\0', sizeof p.name) == nullptr ||
      std::strncmp(p.name, kShmPrefix, std::strlen(kShmPrefix)) != 0 ||
      std::strchr(p.name + 1, '/') != nullptr || p.size == 0) {
    return fail(errc::invalid_handle, "corrupt sim IPC handle");
  }
  if (lease::current() != 0 && lease::owner_of(p.name) == lease::current()) {
    return fail(errc::invalid_context,
                "the handle was exported by this process; open it in another process");
  }
  if (p.device >= 0 && p.device < devices_ && p.device != device && !reachable(device, p.device)) {
    return fail(errc::peer_access_unsupported,
                "device {} cannot reach device {}, where the memory lives", device, p.device);
  }
  std::string name = p.name;
  // As a real driver refuses the handle of a process that has exited (its memory went with
  // it), even while the dead process's object is still in /dev/shm (until a sweep). Tested
  // before the driver's lock: it opens the exporter's lease (system calls).
  if (lease::test_owner(lease::owner_of(name)) == lease::holder::gone) {
    return fail(errc::invalid_handle, "the process that exported {} has exited", name);
  }
  std::lock_guard lk(m_);
  if (auto it = imported_.find(name); it != imported_.end()) {
    auto& a = allocations_.at(it->second);
    ++a.refs;  // same address, as CUDA returns for a second open in one context
    *ptr = reinterpret_cast<void*>(it->second);
    return dstatus::success();
  }
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) {
      return fail(errc::invalid_handle, "the memory of handle {} was freed", name);
    }
    return from_errno(e, "shm_open");
  }
  struct stat sb {};
  size_t len = 0;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return from_errno(e, "fstat");
  }
  // Only memory of this user that no other user can open was made by an exporter of ours
  // (device memory is made 0600): anything else could be another user's, planted under a name
  // a handle can carry.
  if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077) != 0) {
    close(fd);
    return fail(errc::not_permitted,
                "the shared memory of handle {} belongs to uid {} with mode {:04o}: only memory of "
                "this user (uid {}) that no other user can open is imported",
                name, sb.st_uid, sb.st_mode & 07777, geteuid());
  }
  // Exactly what its exporter made: its pages and its stamp.
  if (!round_page(p.size, &len) ||
      static_cast<std::uint64_t>(sb.st_size) != len + lease::kStampBytes ||
      !lease::stamped(fd, name)) {
    close(fd);
    return fail(errc::invalid_handle,
                "the shared memory of handle {} is not the {} bytes its exporter made", name,
                p.size);
  }
  void* m = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return from_errno(e, "mmap");
  // Its owner, or any process of this user, may still cut it short under the mapping.
  const int guard = fault_guard::watch(m, len);
  if (guard < 0) {
    munmap(m, len);
    return fail(errc::out_of_memory, "no memory to guard the mapping of handle {}", name);
  }
  allocation a;
  a.guard = guard;
  a.from = origin::ipc_imported;
  a.size = p.size;
  a.map_len = len;
  a.device = device;
  a.shm_name = name;
  a.id = next_id();
  allocations_.emplace(addr(m), std::move(a));
  imported_.emplace(std::move(name), addr(m));
  *ptr = m;
  return dstatus::success();
}

std::uint64_t sim_driver::ipc_handle_owner(const ipc_native_handle& handle) const noexcept {
  ipc_payload p;
  std::memcpy(&p, handle.bytes, sizeof p);
  if (std::memcmp(p.magic, kIpcMagic, sizeof p.magic) != 0 ||
      std::memchr(p.name, '\0', sizeof p.name) == nullptr)
    return 0;  // not the sim's bytes: ipc_open_handle refuses them
  const std::uint64_t owner = lease::owner_of(p.name);
  // A name with no owner in it can be nobody's memory: the exporter named is never it.
  return owner != 0 ? owner : ~std::uint64_t{0};
}

dstatus sim_driver::ipc_close_handle(void* ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  allocation a;
  bool erased = false;
  auto st = take_allocation(
      m_, allocations_, used_, ptr, {origin::ipc_imported}, "an IPC mapping",
      [this] { synchronize_all(); }, &a, &erased, true);
  if (!st.ok() || !erased) return st;
  {
    std::lock_guard lk(m_);
    // After fork() the child's own mapping of a name may differ from an inherited one.
    if (auto it = imported_.find(a.shm_name); it != imported_.end() && it->second == addr(ptr))
      imported_.erase(it);
  }
  unmap(addr(ptr), a);
  return dstatus::success();
}

// --- shareable memory --------------------------------------------------------------------------

/// The seals of every shareable memfd: its size can never change.
constexpr int kShareableSeals = F_SEAL_SHRINK | F_SEAL_GROW;

dstatus sim_driver::shareable_create(int device, size_t size, shareable_allocation* out) {
  if (!out) return fail(errc::invalid_value, "out is null");
  if (auto r = check_device(device); !r.ok()) return r;
  if (size == 0) return fail(errc::invalid_value, "size is 0");
  size_t len = 0;
  if (!round_page(size, &len)) {
    return fail(errc::out_of_memory, "{} bytes cannot be allocated", size);
  }
  {
    std::lock_guard lk(m_);
    if (auto r = charge_locked(device, len); !r.ok()) return r;
  }
  auto uncharge = [&] {
    std::lock_guard lk(m_);
    used_[static_cast<size_t>(device)] -= len;
  };
  // Sealable: once sized, it is sealed against shrinking and growing, so an importer can map
  // it knowing that no process can cut it short under the mapping (SIGBUS).
  int fd = memfd_create("memarea-sim-shareable", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    int e = errno;
    uncharge();
    return from_errno(e, "memfd_create");
  }
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 ||
      fcntl(fd, F_ADD_SEALS, kShareableSeals | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    uncharge();
    return from_errno(e, "sizing and sealing the memfd");
  }
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    uncharge();
    return from_errno(e, "mmap");
  }
  allocation a;
  a.from = origin::shareable;
  a.size = len;
  a.map_len = len;
  a.accounted = len;
  a.device = device;
  a.fd = fd;
  a.id = next_id();
  shareable_allocation r;
  r.ptr = p;
  r.size = len;
  r.device = device;
  r.opaque[0] = a.id;
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *out = r;
  return dstatus::success();
}

dstatus sim_driver::shareable_export_fd(const shareable_allocation& a, int* fd) {
  if (!fd) return fail(errc::invalid_value, "fd is null");
  std::lock_guard lk(m_);
  auto it = allocations_.find(addr(a.ptr));
  if (it == allocations_.end() ||
      (it->second.from != origin::shareable && it->second.from != origin::shareable_imported)) {
    return fail(errc::invalid_value, "{} is not shareable memory of this driver", fmt::ptr(a.ptr));
  }
  int n = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (n < 0) return from_errno(errno, "fcntl(F_DUPFD_CLOEXEC)");
  *fd = n;
  return dstatus::success();
}

dstatus sim_driver::shareable_import_fd(int device, int fd, size_t size,
                                        shareable_allocation* out) {
  if (!out) return fail(errc::invalid_value, "out is null");
  if (auto r = check_device(device); !r.ok()) return r;
  if (fd < 0) return fail(errc::invalid_value, "fd {} is not a file descriptor", fd);
  if (size == 0) return fail(errc::invalid_value, "size is 0");
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    if (e == EBADF) return fail(errc::invalid_value, "fd {} is not open", fd);
    return from_errno(e, "fstat");
  }
  // Only what shareable_create makes: a memfd sealed against shrinking and growing. A regular
  // file, a pipe or an unsealed memfd could be cut short after the import (SIGBUS on access).
  const int seals = S_ISREG(sb.st_mode) ? fcntl(fd, F_GET_SEALS) : -1;
  if (seals < 0 || (seals & kShareableSeals) != kShareableSeals) {
    return fail(errc::invalid_value,
                "fd {} is not shareable memory: not a memfd sealed against shrinking and growing",
                fd);
  }
  if (sb.st_size < 0 || static_cast<std::uint64_t>(sb.st_size) < size) {
    return fail(errc::invalid_value, "fd {} holds {} bytes, {} requested", fd, sb.st_size, size);
  }
  size_t len = 0;
  if (!round_page(size, &len)) return fail(errc::invalid_value, "size {} is too large", size);
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller keeps fd; we keep a copy for export
  if (own < 0) return from_errno(errno, "fcntl(F_DUPFD_CLOEXEC)");
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(own);
    if (e == EACCES || e == ENODEV || e == EINVAL) {
      return fail(errc::invalid_value, "fd {} cannot be mapped read-write", fd);
    }
    return from_errno(e, "mmap");
  }
  allocation a;
  a.from = origin::shareable_imported;
  a.size = size;
  a.map_len = len;
  a.device = device;
  a.fd = own;
  a.id = next_id();
  shareable_allocation r;
  r.ptr = p;
  r.size = size;
  r.device = device;
  r.opaque[0] = a.id;
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *out = r;
  return dstatus::success();
}

dstatus sim_driver::shareable_release(const shareable_allocation& a) {
  if (!a.ptr) return fail(errc::invalid_value, "the allocation is empty");
  allocation taken;
  bool erased = false;
  auto st = take_allocation(
      m_, allocations_, used_, a.ptr, {origin::shareable, origin::shareable_imported},
      "shareable memory", [this] { synchronize_all(); }, &taken, &erased, false);
  if (!st.ok()) return st;
  unmap(addr(a.ptr), taken);
  return dstatus::success();
}

}  // namespace memarea::detail::sim
