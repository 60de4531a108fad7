// The sim driver's allocations: device memory (shm objects named after this process's lease),
// pinned and registered host memory, managed memory, and their frees and pointer queries.
//
// Frees synchronise every stream first, as cudaFree does, so no queued copy outlives its memory.
#include "base/fault_guard.hpp"
#include "base/fresh_mmap.hpp"
#include "base/housekeeper.hpp"
#include "base/lease.hpp"
#include "base/random_name.hpp"
#include "driver/sim/sim_internal.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <new>

namespace memarea::detail::sim {

// --- allocation --------------------------------------------------------------------------------

dstatus sim_driver::malloc_device(int device, size_t size, void** ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  if (auto st = check_device(device); !st.ok()) return st;
  if (size == 0) {  // cudaMalloc(0) succeeds with a null pointer
    *ptr = nullptr;
    return dstatus::success();
  }
  size_t len = 0;
  if (!round_page(size, &len)) {
    return fail(errc::out_of_memory, "{} bytes cannot be allocated", size);
  }
  {
    std::lock_guard lk(m_);
    if (auto st = charge_locked(device, size); !st.ok()) return st;
  }
  auto uncharge = [&] {
    std::lock_guard lk(m_);
    used_[static_cast<size_t>(device)] -= size;
  };
  // Named after this process's lease (base/lease.hpp), so that a sweep removes it once the
  // process is gone however it died, plus a random part another user cannot guess; a name that
  // exists already is someone else's: never ours to use or remove, so another one is drawn.
  int lease_error = 0;
  const std::uint64_t owner = lease::own(&lease_error);
  if (owner == 0) {
    uncharge();
    return from_errno(lease_error, "making this process's lease in /dev/shm");
  }
  housekeeper::start();  // the sweep of what dead processes left (idempotent, cheap once)
  std::string name;
  int fd = -1;
  // The object's pages, then its stamp (what the sweep asks before it removes anything).
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    name = lease::object_name("sim", owner, random_u64(), kNameRandomDigits);
    fd = lease::create_object(name, len);
    if (fd != -EEXIST) break;
  }
  if (fd < 0) {
    uncharge();
    return from_errno(-fd, "making the device memory's shm object");
  }
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  const int guard = p == MAP_FAILED ? -1 : fault_guard::watch(p, len);
  if (p == MAP_FAILED || guard < 0) {
    if (p != MAP_FAILED) munmap(p, len);
    shm_unlink(name.c_str());
    uncharge();
    return p == MAP_FAILED ? from_errno(e, "mmap")
                           : fail(errc::out_of_memory, "no memory to guard the shm object");
  }
  allocation a;
  a.from = origin::device;
  a.size = size;
  a.map_len = len;
  a.accounted = size;
  a.device = device;
  a.shm_name = std::move(name);
  a.guard = guard;
  a.id = next_id();
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *ptr = p;
  return dstatus::success();
}

/// Words for an origin in messages.
const char* origin_name(origin o) {
  switch (o) {
    case origin::device:
      return "device memory";
    case origin::host:
      return "pinned host memory";
    case origin::registered:
      return "a registered host range";
    case origin::managed:
      return "managed memory";
    case origin::ipc_imported:
      return "an IPC mapping";
    case origin::shareable:
      return "shareable memory";
    case origin::shareable_imported:
      return "imported shareable memory";
  }
  return "memory";
}

/// Removes the allocation whose base is ptr and whose origin is one of `accepted`, after waiting
/// for all queued work (so no copy still touches it), and gives its bytes back to its device in
/// the same critical section; *out gets the entry to unmap. Validates before waiting, so a bad
/// pointer changes and waits for nothing. With decrement_refs only the last reference removes.
dstatus take_allocation(std::mutex& m, std::map<std::uintptr_t, allocation>& allocations,
                        std::vector<size_t>& used, const void* ptr,
                        std::initializer_list<origin> accepted, const char* want,
                        const std::function<void()>& sync, allocation* out, bool* erased,
                        bool decrement_refs) {
  auto check = [&](std::map<std::uintptr_t, allocation>::iterator* where) -> dstatus {
    auto key = addr(ptr);
    auto it = allocations.find(key);
    if (it == allocations.end()) {
      auto up = allocations.upper_bound(key);
      if (up != allocations.begin()) {
        --up;
        if (key - up->first < up->second.size) {
          return fail(errc::invalid_value,
                      "{} is inside {} (at {:#x}), not the start of an allocation", fmt::ptr(ptr),
                      origin_name(up->second.from), up->first);
        }
      }
      return fail(errc::invalid_value, "{} is not {} of this driver", fmt::ptr(ptr), want);
    }
    if (std::find(accepted.begin(), accepted.end(), it->second.from) == accepted.end()) {
      return fail(errc::invalid_value, "{} is {}, not {}", fmt::ptr(ptr),
                  origin_name(it->second.from), want);
    }
    *where = it;
    return dstatus::success();
  };
  {
    std::lock_guard lk(m);
    std::map<std::uintptr_t, allocation>::iterator it;
    if (auto st = check(&it); !st.ok()) return st;
  }
  if (sync) sync();
  std::lock_guard lk(m);
  std::map<std::uintptr_t, allocation>::iterator it;
  if (auto st = check(&it); !st.ok()) return st;  // freed by another thread meanwhile
  if (decrement_refs && --it->second.refs > 0) {
    *erased = false;
    return dstatus::success();
  }
  *out = std::move(it->second);
  allocations.erase(it);
  if (out->accounted) used[static_cast<size_t>(out->device)] -= out->accounted;
  *erased = true;
  return dstatus::success();
}


dstatus sim_driver::free_device(void* ptr) {
  if (!ptr) return dstatus::success();  // cudaFree(nullptr) is a no-op
  allocation a;
  bool erased = false;
  auto st = take_allocation(
      m_, allocations_, used_, ptr, {origin::device}, "device memory",
      [this] { synchronize_all(); }, &a, &erased, false);
  if (!st.ok()) return st;
  unmap(addr(ptr), a);
  return dstatus::success();
}

dstatus sim_driver::malloc_host(int device, size_t size, unsigned flags, void** ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  if (auto st = check_device(device); !st.ok()) return st;
  if (flags & ~unsigned{host_portable | host_mapped}) {
    return fail(errc::invalid_value, "unknown host allocation flags {:#x}", flags);
  }
  if (size == 0) {
    *ptr = nullptr;
    return dstatus::success();
  }
  size_t len = 0;
  if (!round_page(size, &len)) {
    return fail(errc::out_of_memory, "{} bytes cannot be allocated", size);
  }
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return from_errno(errno, "mmap");
  allocation a;
  a.from = origin::host;
  a.size = size;
  a.map_len = len;
  a.device = MEMAREA_CPU_DEVICE_ID;
  a.flags = flags;
  a.id = next_id();
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *ptr = p;
  return dstatus::success();
}

dstatus sim_driver::free_host(void* ptr) {
  if (!ptr) return dstatus::success();
  allocation a;
  bool erased = false;
  auto st = take_allocation(
      m_, allocations_, used_, ptr, {origin::host}, "pinned host memory",
      [this] { synchronize_all(); }, &a, &erased, false);
  if (!st.ok()) return st;
  unmap(addr(ptr), a);
  return dstatus::success();
}

dstatus sim_driver::host_register(int device, void* ptr, size_t size, unsigned flags) {
  if (!ptr || size == 0) return fail(errc::invalid_value, "null pointer or empty range");
  if (auto st = check_device(device); !st.ok()) return st;
  if (flags & ~unsigned{host_portable | host_mapped}) {
    return fail(errc::invalid_value, "unknown host registration flags {:#x}", flags);
  }
  auto begin = addr(ptr);
  if (size > std::numeric_limits<std::uintptr_t>::max() - begin) {
    return fail(errc::invalid_value, "range of {} bytes at {} wraps around", size, fmt::ptr(ptr));
  }
  auto end = begin + size;
  std::lock_guard lk(m_);
  // Entries never overlap, so only the last one starting before `end` can intersect the range.
  auto it = allocations_.lower_bound(end);
  if (it != allocations_.begin()) {
    --it;
    if (it->first + std::max(it->second.map_len, it->second.size) > begin) {
      return fail(errc::invalid_value,
                  "[{}, +{}) overlaps {} at {:#x} (host memory already registered)", fmt::ptr(ptr),
                  size, origin_name(it->second.from), it->first);
    }
  }
  allocation a;
  a.from = origin::registered;
  a.size = size;
  a.map_len = size;
  a.device = MEMAREA_CPU_DEVICE_ID;
  a.flags = flags;
  a.id = next_id();
  allocations_.emplace(begin, std::move(a));
  return dstatus::success();
}

dstatus sim_driver::host_unregister(void* ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  allocation a;
  bool erased = false;
  // The memory stays the caller's and mapped, so queued copies from it need no wait.
  return take_allocation(m_, allocations_, used_, ptr, {origin::registered},
                         "a registered host range", nullptr, &a, &erased, false);
}

dstatus sim_driver::host_get_device_pointer(void** device_ptr, void* host_ptr) {
  if (!device_ptr || !host_ptr) return fail(errc::invalid_value, "null pointer");
  std::lock_guard lk(m_);
  auto it = find_locked(host_ptr);
  if (it == allocations_.end() ||
      (it->second.from != origin::host && it->second.from != origin::registered)) {
    return fail(errc::invalid_value, "{} is not pinned or registered host memory",
                fmt::ptr(host_ptr));
  }
  if (!(it->second.flags & host_mapped)) {
    return fail(errc::invalid_value, "{} is host memory that was not mapped (host_mapped)",
                fmt::ptr(host_ptr));
  }
  *device_ptr = host_ptr;  // unified addressing: one address everywhere
  return dstatus::success();
}

dstatus sim_driver::malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) {
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  if (auto st = check_device(device); !st.ok()) return st;
  if (attach_flags != MEMAREA_MEM_ATTACH_GLOBAL && attach_flags != MEMAREA_MEM_ATTACH_HOST) {
    return fail(errc::invalid_value, "attach flags {:#x} must be GLOBAL or HOST", attach_flags);
  }
  if (size == 0) return fail(errc::invalid_value, "managed allocations cannot be empty");
  if (!config_.managed_memory) {
    return fail(errc::not_supported,
                "device {} has no managed memory (MEMAREA_SIM_MANAGED_MEMORY=0)", device);
  }
  size_t len = 0;
  if (!round_page(size, &len)) {
    return fail(errc::out_of_memory, "{} bytes cannot be allocated", size);
  }
  {
    std::lock_guard lk(m_);
    if (auto st = charge_locked(device, len); !st.ok()) return st;
  }
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    std::lock_guard lk(m_);
    used_[static_cast<size_t>(device)] -= len;
    return from_errno(e, "mmap");
  }
  allocation a;
  a.from = origin::managed;
  a.size = size;
  a.map_len = len;
  a.accounted = len;
  a.device = device;
  a.flags = attach_flags;
  a.id = next_id();
  try {
    a.pages = page_attributes(len / kPage);
  } catch (const std::bad_alloc&) {
    munmap(p, len);
    std::lock_guard lk(m_);
    used_[static_cast<size_t>(device)] -= len;
    return fail(errc::out_of_memory, "no memory for the page table of {} bytes", size);
  }
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *ptr = p;
  return dstatus::success();
}

dstatus sim_driver::free_managed(void* ptr) {
  if (!ptr) return dstatus::success();
  allocation a;
  bool erased = false;
  auto st = take_allocation(
      m_, allocations_, used_, ptr, {origin::managed}, "managed memory",
      [this] { synchronize_all(); }, &a, &erased, false);
  if (!st.ok()) return st;
  unmap(addr(ptr), a);
  return dstatus::success();
}

dstatus sim_driver::address_range(const void* ptr, void** base, size_t* size) {
  std::lock_guard lk(m_);
  auto it = find_locked(ptr);
  if (it == allocations_.end()) {
    return fail(errc::not_found, "{} is not in any sim allocation", fmt::ptr(ptr));
  }
  *base = reinterpret_cast<void*>(it->first);
  *size = it->second.size;
  return dstatus::success();
}

dstatus sim_driver::pointer_query(const void* ptr, pointer_info* info) {
  if (!info) return fail(errc::invalid_value, "info is null");
  std::lock_guard lk(m_);
  auto it = find_locked(ptr);
  if (it == allocations_.end()) {
    return fail(errc::not_found, "{} is not in any sim allocation", fmt::ptr(ptr));
  }
  const allocation& a = it->second;
  pointer_info r;
  r.base = reinterpret_cast<void*>(it->first);
  r.size = a.size;
  r.device = a.device;
  switch (a.from) {
    case origin::device:
    case origin::shareable:
      r.kind = MEMAREA_MEMORY_DEVICE;
      break;
    case origin::host:
      r.kind = (a.flags & host_mapped) ? MEMAREA_MEMORY_MAPPED : MEMAREA_MEMORY_HOST_PINNED;
      break;
    case origin::registered:
      r.kind = MEMAREA_MEMORY_REGISTERED;
      break;
    case origin::managed:
      r.kind = MEMAREA_MEMORY_MANAGED;
      break;
    case origin::ipc_imported:
    case origin::shareable_imported:
      r.kind = MEMAREA_MEMORY_IPC_IMPORTED;
      break;
  }
  *info = r;
  return dstatus::success();
}

}  // namespace memarea::detail::sim
