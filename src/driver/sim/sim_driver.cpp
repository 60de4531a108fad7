// The sim backend's driver: CUDA/HIP runtime semantics on host memory. This file: construction,
// devices, peer access and the helpers every part uses; the other parts are listed in
// sim_internal.hpp.
//
// Locking: m_ guards every table. It is never held while waiting for a stream (stream tasks take
// it to update managed-page state), and tasks never run user code, so no lock cycle exists.
// Lock order: event::m, then m_, then a stream's own mutex.
// Frees synchronise every stream first, as cudaFree does, so no queued copy outlives its memory.
#include "base/fault_guard.hpp"
#include "driver/sim/sim_internal.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace memarea::detail {
namespace sim {
static_assert(kMaxDevices <= page_attributes::max_devices, "accessed-by masks hold every device");

const char* native_name(errc c) noexcept {
  switch (c) {
    case errc::success:
      return "SIM_SUCCESS";
    case errc::invalid_value:
      return "SIM_ERROR_INVALID_VALUE";
    case errc::invalid_device:
      return "SIM_ERROR_INVALID_DEVICE";
    case errc::out_of_memory:
      return "SIM_ERROR_OUT_OF_MEMORY";
    case errc::not_supported:
      return "SIM_ERROR_NOT_SUPPORTED";
    case errc::no_device:
      return "SIM_ERROR_NO_DEVICE";
    case errc::not_found:
      return "SIM_ERROR_NOT_FOUND";
    case errc::busy:
      return "SIM_ERROR_NOT_READY";
    case errc::peer_access_unsupported:
      return "SIM_ERROR_PEER_ACCESS_UNSUPPORTED";
    case errc::peer_access_already_enabled:
      return "SIM_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case errc::peer_access_not_enabled:
      return "SIM_ERROR_PEER_ACCESS_NOT_ENABLED";
    case errc::too_many_peers:
      return "SIM_ERROR_TOO_MANY_PEERS";
    case errc::invalid_handle:
      return "SIM_ERROR_INVALID_HANDLE";
    case errc::invalid_context:
      return "SIM_ERROR_INVALID_CONTEXT";
    case errc::not_permitted:
      return "SIM_ERROR_NOT_PERMITTED";
    case errc::initialization:
      return "SIM_ERROR_INITIALIZATION";
    case errc::unknown:
      break;
  }
  return "SIM_ERROR_UNKNOWN";
}

dstatus from_errno(int e, const char* call) {
  errc c = errc::unknown;
  if (e == ENOMEM || e == ENOSPC || e == EMFILE || e == ENFILE || e == EFBIG) {
    c = errc::out_of_memory;
  } else if (e == EACCES || e == EPERM) {
    c = errc::not_permitted;
  }
  return fail(c, "{} failed: {}", call, std::error_code(e, std::generic_category()).message());
}

std::uint64_t next_id() {
  // Made once under fork_init_guard (first by the driver's constructor, before any of its own
  // locks is taken): a function-local static's guard, pending at fork(), would hang a child.
  auto& counter = made_once([] {
    std::uint64_t seed =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      seed ^= (std::uint64_t{rd()} << 32) ^ rd();
    } catch (...) {
      // No entropy source: the clock alone still makes collisions unlikely.
    }
    return new std::atomic<std::uint64_t>(seed);
  });
  return counter.fetch_add(1, std::memory_order_relaxed);
}

namespace {

/// The calling thread's current device, per driver instance (several sim drivers may live in one
/// test process; each starts at device 0 on every thread).
thread_local std::unordered_map<std::uint64_t, int> t_current_device;

}  // namespace

sim_driver::sim_driver(const sim_config& config) : config_(config), instance_(next_id()) {
  {
    std::lock_guard lk(g_live_mutex);
    live_drivers().push_back(this);
  }
  // The config may come from memarea::sim::configure rather than the parsed environment, so it is
  // validated again; a bad one gives a driver without devices (factories never throw).
  std::string bad;
  if (config.devices < 0 || config.devices > kMaxDevices) {
    bad = fmt::format("MEMAREA_SIM_DEVICES is {}, must be between 0 and {}", config.devices,
                      kMaxDevices);
  } else if (config.device_memory == 0) {
    bad = "MEMAREA_SIM_DEVICE_MEMORY is 0";
  } else if (config.max_peers < 0) {
    bad = fmt::format("MEMAREA_SIM_MAX_PEERS is {}, must not be negative", config.max_peers);
  }
  if (bad.empty()) {
    group_of_.assign(static_cast<size_t>(config.devices), -1);
    for (size_t g = 0; g < config.peer_groups.size() && bad.empty(); ++g) {
      for (int d : config.peer_groups[g]) {
        if (d < 0 || d >= config.devices) {
          bad = fmt::format("MEMAREA_SIM_PEER_GROUPS names device {}, which does not exist", d);
          break;
        }
        if (group_of_[static_cast<size_t>(d)] != -1) {
          bad = fmt::format("MEMAREA_SIM_PEER_GROUPS names device {} twice", d);
          break;
        }
        group_of_[static_cast<size_t>(d)] = static_cast<int>(g);
      }
    }
  }
  if (!bad.empty()) {
    reason_ = "invalid sim configuration: " + bad;
    group_of_.clear();
    return;
  }
  if (config.devices == 0) {
    reason_ = "MEMAREA_SIM_DEVICES is 0 or unset: the sim backend has no devices";
    return;
  }
  devices_ = config.devices;
  used_.assign(static_cast<size_t>(devices_), 0);
  peer_enabled_.assign(static_cast<size_t>(devices_),
                       std::vector<bool>(static_cast<size_t>(devices_), false));
  default_streams_.resize(static_cast<size_t>(devices_));
}

sim_driver::~sim_driver() {
  // The streams stop while the driver is still listed, so that a fork() meanwhile waits for
  // their workers to be joined (see on_fork_prepare) instead of missing them.
  std::vector<std::shared_ptr<stream>> all;
  {
    std::lock_guard lk(m_);
    for (auto& s : default_streams_) {
      if (s) all.push_back(s);
    }
    for (auto& [k, s] : streams_) all.push_back(s);
  }
  for (auto& s : all) s->shutdown();
  {
    std::lock_guard lk(g_live_mutex);
    auto& live = live_drivers();
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }
  std::lock_guard lk(m_);
  for (auto& [base, a] : allocations_) unmap(base, a);
  allocations_.clear();
  imported_.clear();
  events_.clear();
  streams_.clear();
  per_thread_.clear();
  default_streams_.clear();
  t_current_device.erase(instance_);
}

// --- helpers -----------------------------------------------------------------------------------

dstatus sim_driver::check_device(int device) const {
  if (devices_ == 0) return fail(errc::invalid_device, "no sim devices ({})", reason_);
  if (device < 0 || device >= devices_) {
    return fail(errc::invalid_device, "device {} does not exist (the sim has {} devices)", device,
                devices_);
  }
  return dstatus::success();
}

sim_driver::table::iterator sim_driver::find_locked(const void* p) {
  auto key = addr(p);
  auto it = allocations_.upper_bound(key);
  if (it == allocations_.begin()) return allocations_.end();
  --it;
  return key - it->first < it->second.size ? it : allocations_.end();
}

sim_driver::table::const_iterator sim_driver::find_locked(const void* p) const {
  auto key = addr(p);
  auto it = allocations_.upper_bound(key);
  if (it == allocations_.begin()) return allocations_.end();
  --it;
  return key - it->first < it->second.size ? it : allocations_.end();
}

/// A copy's range must stay inside the allocation it starts in; unknown memory is pageable host
/// memory, which the sim (like unified addressing) reads and writes directly.
dstatus sim_driver::check_range_locked(const void* p, size_t n, const char* what) {
  auto it = find_locked(p);
  if (it == allocations_.end()) return dstatus::success();
  if (fault_guard::damaged(it->second.guard)) {
    return fail(errc::invalid_value,
                "{} memory at {:#x} lost its backing: another process cut its shared-memory "
                "object {} short (ftruncate); it reads as zeros and cannot be copied",
                what, it->first, it->second.shm_name);
  }
  size_t off = addr(p) - it->first;
  if (n > it->second.size - off) {
    return fail(
        errc::invalid_value,
        "{} range of {} bytes at {} runs past the end of its allocation ({} bytes at {:#x})", what,
        n, fmt::ptr(p), it->second.size, it->first);
  }
  return dstatus::success();
}

bool sim_driver::reachable(int device, int peer) const {
  if (config_.peer_groups.empty()) return true;
  int g = group_of_[static_cast<size_t>(device)];
  return g >= 0 && g == group_of_[static_cast<size_t>(peer)];
}

/// Charges bytes to device or says why it does not fit; changes nothing on failure.
dstatus sim_driver::charge_locked(int device, size_t bytes) {
  size_t& used = used_[static_cast<size_t>(device)];
  size_t free = config_.device_memory - used;
  if (bytes > free) {
    return fail(errc::out_of_memory, "device {} has {} bytes free of {}, {} requested", device,
                free, config_.device_memory, bytes);
  }
  used += bytes;
  return dstatus::success();
}

/// Gives the allocation's resources back to the system; the table entry is the caller's.
void sim_driver::unmap(std::uintptr_t base, allocation& a) {
  void* p = reinterpret_cast<void*>(base);
  fault_guard::unwatch(std::exchange(a.guard, -1));
  switch (a.from) {
    case origin::device:
      munmap(p, a.map_len);
      if (!a.inherited) shm_unlink(a.shm_name.c_str());
      break;
    case origin::host:
    case origin::managed:
    case origin::ipc_imported:
      munmap(p, a.map_len);
      break;
    case origin::registered:
      break;  // the caller's memory
    case origin::shareable:
    case origin::shareable_imported:
      munmap(p, a.map_len);
      if (a.fd >= 0) close(a.fd);
      a.fd = -1;
      break;
  }
}

// --- identity ----------------------------------------------------------------------------------

dstatus sim_driver::get_properties(int device, memarea_device_properties* props) {
  if (!props) return fail(errc::invalid_value, "props is null");
  if (auto st = check_device(device); !st.ok()) return st;
  memarea_device_properties p;
  std::memset(&p, 0, sizeof p);
  std::snprintf(p.name, sizeof p.name, "memarea sim device %d", device);
  std::snprintf(p.backend, sizeof p.backend, "sim");
  p.ordinal = device;
  std::snprintf(p.pci_bus_id, sizeof p.pci_bus_id, "sim:0000:%d", device);
  p.total_memory = config_.device_memory;
  {
    std::lock_guard lk(m_);
    p.free_memory = config_.device_memory - used_[static_cast<size_t>(device)];
  }
  p.unified_addressing = 1;
  p.managed_memory = config_.managed_memory ? 1 : 0;
  // Concurrent access to managed memory needs managed memory (as CUDA reports it).
  p.concurrent_managed_access =
      (config_.managed_memory && config_.concurrent_managed_access) ? 1 : 0;
  p.pageable_memory_access = config_.pageable(device) ? 1 : 0;
  p.can_map_host_memory = 1;
  p.virtual_memory_management = 1;
  p.ipc = 1;
  p.compute_major = 0;
  p.compute_minor = 0;
  *props = p;
  return dstatus::success();
}

dstatus sim_driver::mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return fail(errc::invalid_value, "null output pointer");
  if (auto st = check_device(device); !st.ok()) return st;
  std::lock_guard lk(m_);
  *total_bytes = config_.device_memory;
  *free_bytes = config_.device_memory - used_[static_cast<size_t>(device)];
  return dstatus::success();
}

dstatus sim_driver::set_current_device(int device) {
  if (devices_ == 0) return fail(errc::no_device, "no sim devices ({})", reason_);
  if (auto st = check_device(device); !st.ok()) return st;
  if (injected_count_.load(std::memory_order_acquire) != 0) {
    std::lock_guard lk(m_);
    if (take_injected_locked(injectable::set_current_device))
      return fail(errc::unknown, "device {} not made current: a failure injected by a test",
                  device);
  }
  t_current_device[instance_] = device;
  return dstatus::success();
}

dstatus sim_driver::get_current_device(int* device) {
  if (!device) return fail(errc::invalid_value, "device is null");
  if (devices_ == 0) return fail(errc::no_device, "no sim devices ({})", reason_);
  auto it = t_current_device.find(instance_);
  *device = it == t_current_device.end() ? 0 : it->second;
  return dstatus::success();
}

// --- peer access -------------------------------------------------------------------------------

dstatus sim_driver::can_access_peer(int device, int peer, int* can_access) {
  if (!can_access) return fail(errc::invalid_value, "can_access is null");
  if (auto st = check_device(device); !st.ok()) return st;
  if (auto st = check_device(peer); !st.ok()) return st;
  *can_access = (device != peer && reachable(device, peer)) ? 1 : 0;
  return dstatus::success();
}

dstatus sim_driver::enable_peer_access(int device, int peer, unsigned flags) {
  if (auto st = check_device(device); !st.ok()) return st;
  if (auto st = check_device(peer); !st.ok()) return st;
  if (flags != 0) return fail(errc::invalid_value, "flags {:#x} must be 0", flags);
  if (device == peer) {
    return fail(errc::invalid_device, "device {} cannot be its own peer", device);
  }
  if (!reachable(device, peer)) {
    return fail(errc::peer_access_unsupported,
                "device {} cannot reach device {} (MEMAREA_SIM_PEER_GROUPS)", device, peer);
  }
  std::lock_guard lk(m_);
  auto& row = peer_enabled_[static_cast<size_t>(device)];
  if (row[static_cast<size_t>(peer)]) {
    return fail(errc::peer_access_already_enabled,
                "peer access from device {} to device {} is already enabled", device, peer);
  }
  auto enabled = std::count(row.begin(), row.end(), true);
  if (enabled >= config_.max_peers) {
    return fail(errc::too_many_peers, "device {} already has {} peers (MEMAREA_SIM_MAX_PEERS={})",
                device, enabled, config_.max_peers);
  }
  row[static_cast<size_t>(peer)] = true;
  return dstatus::success();
}

dstatus sim_driver::disable_peer_access(int device, int peer) {
  if (auto st = check_device(device); !st.ok()) return st;
  if (auto st = check_device(peer); !st.ok()) return st;
  if (device == peer) {
    return fail(errc::invalid_device, "device {} cannot be its own peer", device);
  }
  std::lock_guard lk(m_);
  auto& row = peer_enabled_[static_cast<size_t>(device)];
  if (!row[static_cast<size_t>(peer)]) {
    return fail(errc::peer_access_not_enabled,
                "peer access from device {} to device {} has not been enabled", device, peer);
  }
  if (take_injected_locked(injectable::disable_peer_access))
    return fail(errc::unknown,
                "peer access from device {} to device {} not disabled: a failure injected by a "
                "test",
                device, peer);
  row[static_cast<size_t>(peer)] = false;
  return dstatus::success();
}

bool sim_driver::take_injected_locked(injectable call) {
  auto it = std::find(injected_.begin(), injected_.end(), call);
  if (it == injected_.end()) return false;
  injected_.erase(it);
  injected_count_.store(injected_.size(), std::memory_order_release);
  return true;
}

dstatus sim_driver::get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) {
  if (!value) return fail(errc::invalid_value, "value is null");
  if (auto st = check_device(src); !st.ok()) return st;
  if (auto st = check_device(dst); !st.ok()) return st;
  if (src == dst) return fail(errc::invalid_device, "source and destination are both {}", src);
  int can = reachable(src, dst) ? 1 : 0;
  switch (attr) {
    case MEMAREA_P2P_ATTR_PERFORMANCE_RANK:
      *value = 0;
      return dstatus::success();
    case MEMAREA_P2P_ATTR_ACCESS_SUPPORTED:
      *value = can;
      return dstatus::success();
    case MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED:
      *value = can;
      return dstatus::success();
    case MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED:
      *value = 0;
      return dstatus::success();
  }
  return fail(errc::invalid_value, "unknown peer attribute {}", static_cast<int>(attr));
}

}  // namespace sim

std::unique_ptr<driver> make_sim_driver(const sim_config& config) {
  return std::make_unique<sim::sim_driver>(config);
}

}  // namespace memarea::detail
