// The sim backend's driver: CUDA/HIP runtime semantics on host memory.
//
// Locking: m_ guards every table. It is never held while waiting for a stream (stream tasks take
// it to update managed-page state), and tasks never run user code, so no lock cycle exists.
// Lock order: event::m, then m_, then a stream's own mutex.
// Frees synchronise every stream first, as cudaFree does, so no queued copy outlives its memory.
#include "base/fresh_mmap.hpp"
#include "base/housekeeper.hpp"
#include "base/lease.hpp"
#include "base/random_name.hpp"
#include "driver/sim/sim_driver.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <system_error>
#include <thread>

namespace memarea::detail {
namespace sim {
static_assert(kMaxDevices <= page_attributes::max_devices, "accessed-by masks hold every device");
namespace {

/// The sim's own error names, so messages show which layer refused ("SIM_ERROR_...").
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

/// A failed status with the sim's error name and a formatted explanation.
template <class... A>
dstatus fail(errc c, fmt::format_string<A...> f, A&&... args) {
  dstatus s;
  s.code = c;
  s.native = 0;
  s.native_name = native_name(c);
  s.detail = fmt::format(f, std::forward<A>(args)...);
  return s;
}

/// Translates an errno from a system call; anything not clearly a resource shortage is unknown,
/// never success.
dstatus from_errno(int e, const char* call) {
  errc c = errc::unknown;
  if (e == ENOMEM || e == ENOSPC || e == EMFILE || e == ENFILE || e == EFBIG) {
    c = errc::out_of_memory;
  } else if (e == EACCES || e == EPERM) {
    c = errc::not_permitted;
  }
  return fail(c, "{} failed: {}", call, std::error_code(e, std::generic_category()).message());
}

/// Rounds up to kPage; false on overflow (callers report out_of_memory, as a huge size would).
bool round_page(size_t n, size_t* out) {
  if (n > std::numeric_limits<size_t>::max() - (kPage - 1)) return false;
  *out = (n + kPage - 1) / kPage * kPage;
  return true;
}

/// A process-wide unique 64-bit id. Random start so that several processes (or a process reusing
/// a dead one's pid) never produce the same shm name.
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

/// The calling thread's current device, per driver instance (several sim drivers may live in one
/// test process; each starts at device 0 on every thread).
thread_local std::unordered_map<std::uint64_t, int> t_current_device;

/// The bytes of a sim IPC handle. 64 bytes, so it fits ipc_native_handle.
struct ipc_payload {
  char magic[4];
  std::int32_t device;  ///< exporting device
  std::uint64_t size;   ///< allocation size
  char name[48];        ///< shm name, NUL-terminated: /memarea-sim-<owner>-<random>
};
static_assert(sizeof(ipc_payload) <= sizeof(ipc_native_handle::bytes));
constexpr char kIpcMagic[4] = {'M', 'S', 'I', 'M'};
constexpr const char* kShmPrefix = "/memarea-sim-";
/// Hex digits of the random part of a device allocation's name (after the owner's 16): the
/// name must fit ipc_payload::name.
constexpr int kNameRandomDigits = 16;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

// --- construction ------------------------------------------------------------------------------

// --- fork() without exec ------------------------------------------------------------------------

namespace {
/// Every live sim driver, for the fork handlers. Never destroyed: a driver made during static
/// initialisation may outlive any static of this file.
std::mutex g_live_mutex;
std::vector<sim_driver*>& live_drivers() {
  static auto* all = new std::vector<sim_driver*>();
  return *all;
}
/// What children of fork() inherited and must never destroy (their worker threads stayed in the
/// parent: destroying a stream would join a thread of another process). Reachable, so leak
/// checkers stay quiet.
std::vector<std::shared_ptr<void>>* g_inherited = nullptr;
}  // namespace

namespace {
/// The streams whose queue locks on_fork_prepare holds across fork().
std::vector<std::shared_ptr<stream>>* g_fork_held = nullptr;
}  // namespace

/// The sim's part of fork(): after every lock of core is taken, before they are renewed in the
/// child (base/fork_safety.hpp orders them by rank). Made when memarea is loaded.
struct sim_driver::fork_hooks final : fork_participant {
  fork_hooks() noexcept : fork_participant(lock_rank::driver) {}
  void fork_prepare() noexcept override { on_fork_prepare(); }
  void fork_parent() noexcept override { on_fork_parent(); }
  void fork_child() noexcept override { on_fork_child(); }
};
namespace {
sim_driver::fork_hooks g_sim_fork_hooks;
}  // namespace

void sim_driver::on_fork_prepare() {
  g_live_mutex.lock();
  if (!g_fork_held) {
    g_fork_held = new std::vector<std::shared_ptr<stream>>();
    g_fork_held->reserve(256);  // push_back below runs with locks held: better not to allocate
  }
  // fork() copies a process whose other threads stop where they are. A stream worker stopped
  // inside a task may hold a lock of the C library or of a sanitizer (a task frees what it
  // captured), which the child would then wait on for ever. So fork at a moment when every
  // worker is between tasks: all locks held, no worker in a task. A worker in a task may be
  // waiting on another stream or on m_, so while one is busy everything is let go and tried
  // again. Queued work always finishes (a task waits only for work queued before it), but a
  // stream that stays busy does not stop fork() for ever: after 2 s it goes ahead as before.
  // In effect fork() waits for queued work to drain (it seldom lands between two tasks).
  // Streams being created or destroyed count too: made under m_, and until joined they are
  // listed in retiring_ and report busy.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    for (sim_driver* d : live_drivers()) d->m_.lock();
    bool busy = false;
    auto hold = [&](const std::shared_ptr<stream>& st) {
      if (!st) return;
      busy |= st->lock_for_fork();
      g_fork_held->push_back(st);
    };
    for (sim_driver* d : live_drivers()) {
      for (const auto& st : d->default_streams_) hold(st);
      for (const auto& [k, st] : d->streams_) hold(st);
      for (const auto& st : d->retiring_) hold(st);
    }
    if (!busy) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      // Said once, so that a child that later hangs in a lock can be traced back to here.
      static bool said = false;
      if (!said) {
        said = true;
        static const char msg[] =
            "memarea sim: fork() while a stream worker stayed busy for 2 s; the child may "
            "inherit a lock that worker held\n";
        (void)!::write(2, msg, sizeof msg - 1);
      }
      return;
    }
    for (const auto& st : *g_fork_held) st->unlock_after_fork();
    g_fork_held->clear();
    for (sim_driver* d : live_drivers()) d->m_.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void sim_driver::on_fork_parent() {
  for (const auto& st : *g_fork_held) st->unlock_after_fork();
  g_fork_held->clear();
  for (sim_driver* d : live_drivers()) d->m_.unlock();
  g_live_mutex.unlock();
}

void sim_driver::on_fork_child() {
  // Single-threaded now. Streams and events are the parent's (their threads did not come
  // along): set aside, so the child's first use starts fresh ones. Device memory stays mapped
  // (it is shared memory, so shared with the parent) but is the parent's: never unlinked or
  // exported here. The parent's IPC imports stay mapped too; a new open maps its own.
  if (!g_inherited) g_inherited = new std::vector<std::shared_ptr<void>>();
  for (sim_driver* d : live_drivers()) {
    for (auto& st : d->default_streams_)
      if (st) g_inherited->push_back(std::move(st));
    for (auto& [k, st] : d->streams_) g_inherited->push_back(std::move(st));
    for (auto& st : d->retiring_) g_inherited->push_back(std::move(st));
    d->retiring_.clear();
    for (auto& [k, ev] : d->events_) g_inherited->push_back(std::move(ev));
    d->streams_.clear();
    d->events_.clear();
    d->imported_.clear();
    for (auto& [base, a] : d->allocations_)
      if (a.from == origin::device) a.inherited = true;
  }
  on_fork_parent();  // the locks taken before fork(), now owned by this thread
}

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

/// Finds the stream a (device, native_stream) pair names; nullptr is the device's default stream,
/// created on first use unless `create` is false (then *out may stay null).
dstatus sim_driver::resolve_stream(int device, native_stream s, std::shared_ptr<stream>* out) {
  if (auto st = check_device(device); !st.ok()) return st;
  std::lock_guard lk(m_);
  if (s == nullptr) {
    auto& def = default_streams_[static_cast<size_t>(device)];
    if (!def) {
      try {
        def = std::make_shared<stream>(device);
      } catch (const std::exception& e) {
        return fail(errc::out_of_memory, "cannot start the default stream of device {}: {}", device,
                    e.what());
      }
    }
    *out = def;
    return dstatus::success();
  }
  auto it = streams_.find(s);
  if (it == streams_.end()) {
    return fail(errc::invalid_value, "stream {} is not a live sim stream", fmt::ptr(s));
  }
  *out = it->second;
  return dstatus::success();
}

/// Wraps fn with the legacy default stream's implicit ordering (CUDA and HIP without per-thread
/// default streams): work on a device's default stream first waits for all work already queued
/// on that device's other streams, and work on another stream first waits for the default
/// stream's queued work. Every wait targets a ticket queued before fn, so no cycle can form.
std::function<void()> sim_driver::order_with_default(const std::shared_ptr<stream>& st,
                                                     std::function<void()> fn) {
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> waits;
  {
    std::lock_guard lk(m_);
    const auto& def = default_streams_[static_cast<size_t>(st->device())];
    if (st == def) {
      for (auto& [k, other] : streams_) {
        if (other->device() != st->device()) continue;
        if (std::uint64_t t = other->last_ticket()) waits.emplace_back(other, t);
      }
    } else if (def) {
      if (std::uint64_t t = def->last_ticket()) waits.emplace_back(def, t);
    }
  }
  if (waits.empty()) return fn;
  return [waits = std::move(waits), fn = std::move(fn)] {
    for (auto& [other, t] : waits) other->wait(t);
    fn();
  };
}

dstatus sim_driver::enqueue(const std::shared_ptr<stream>& st, std::function<void()> fn) {
  if (st->enqueue(order_with_default(st, std::move(fn))) == 0) {
    return fail(errc::invalid_value, "the stream was destroyed");
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
  size_t off = addr(p) - it->first;
  if (n > it->second.size - off) {
    return fail(
        errc::invalid_value,
        "{} range of {} bytes at {} runs past the end of its allocation ({} bytes at {:#x})", what,
        n, fmt::ptr(p), it->second.size, it->first);
  }
  return dstatus::success();
}

/// The pages [first, last] of the managed allocation containing [p, p+count).
dstatus sim_driver::managed_range_locked(const void* p, size_t count, table::iterator* out,
                                         size_t* first, size_t* last) {
  if (p == nullptr) return fail(errc::invalid_value, "null pointer");
  if (count == 0) return fail(errc::invalid_value, "empty range");
  auto it = find_locked(p);
  if (it == allocations_.end() || it->second.from != origin::managed) {
    return fail(errc::invalid_value, "{} is not managed memory", fmt::ptr(p));
  }
  size_t off = addr(p) - it->first;
  if (count > it->second.size - off) {
    return fail(errc::invalid_value,
                "range of {} bytes at {} runs past the end of its managed allocation ({} bytes)",
                count, fmt::ptr(p), it->second.size);
  }
  *out = it;
  *first = off / kPage;
  *last = (off + count - 1) / kPage;
  return dstatus::success();
}

/// The CUDA-style id of a location: a device ordinal, or MEMAREA_CPU_DEVICE_ID for the host and
/// any host NUMA node (the sim has one host memory).
dstatus sim_driver::location_id(location where, int* id) const {
  switch (where.kind) {
    case location::type::device:
      if (auto st = check_device(where.id); !st.ok()) return st;
      *id = where.id;
      return dstatus::success();
    case location::type::host:
      *id = MEMAREA_CPU_DEVICE_ID;
      return dstatus::success();
    case location::type::host_numa:
      if (where.id < 0) {
        return fail(errc::invalid_device, "host NUMA node {} does not exist", where.id);
      }
      *id = MEMAREA_CPU_DEVICE_ID;
      return dstatus::success();
    case location::type::invalid:
      break;
  }
  return fail(errc::invalid_device, "no location given");
}

bool sim_driver::reachable(int device, int peer) const {
  if (config_.peer_groups.empty()) return true;
  int g = group_of_[static_cast<size_t>(device)];
  return g >= 0 && g == group_of_[static_cast<size_t>(peer)];
}

/// Waits for everything queued on every stream so far, as cudaFree does before it frees.
void sim_driver::synchronize_all() {
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> snap;
  {
    std::lock_guard lk(m_);
    for (auto& s : default_streams_) {
      if (s) snap.emplace_back(s, s->last_ticket());
    }
    for (auto& [k, s] : streams_) snap.emplace_back(s, s->last_ticket());
  }
  for (auto& [s, t] : snap) s->wait(t);
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
  p.pageable_memory_access = 0;
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
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    name = lease::object_name("sim", owner, random_u64(), kNameRandomDigits);
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    int e = errno;
    uncharge();
    return from_errno(e, "shm_open");
  }
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    uncharge();
    return from_errno(e, "ftruncate");
  }
  void* p = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    uncharge();
    return from_errno(e, "mmap");
  }
  allocation a;
  a.from = origin::device;
  a.size = size;
  a.map_len = len;
  a.accounted = size;
  a.device = device;
  a.shm_name = std::move(name);
  a.id = next_id();
  std::lock_guard lk(m_);
  allocations_.emplace(addr(p), std::move(a));
  *ptr = p;
  return dstatus::success();
}

namespace {
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

}  // namespace

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
  row[static_cast<size_t>(peer)] = false;
  return dstatus::success();
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

// --- copies ------------------------------------------------------------------------------------

dstatus sim_driver::memcpy_async(void* dst, const void* src, size_t size, int device,
                                 native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst || !src) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(dst, size, "destination"); !r.ok()) return r;
    if (auto r = check_range_locked(src, size, "source"); !r.ok()) return r;
  }
  return enqueue(st, [dst, src, size] { std::memmove(dst, src, size); });
}

dstatus sim_driver::memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                      size_t size, int device, native_stream s) {
  if (auto r = check_device(dst_device); !r.ok()) return r;
  if (auto r = check_device(src_device); !r.ok()) return r;
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst || !src) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    auto is_device_range = [&](const void* p, int dev, const char* what) -> dstatus {
      auto it = find_locked(p);
      if (it == allocations_.end() ||
          (it->second.from != origin::device && it->second.from != origin::shareable) ||
          it->second.device != dev) {
        return fail(errc::invalid_value, "{} {} is not device memory of device {}", what,
                    fmt::ptr(p), dev);
      }
      return check_range_locked(p, size, what);
    };
    if (auto r = is_device_range(dst, dst_device, "destination"); !r.ok()) return r;
    if (auto r = is_device_range(src, src_device, "source"); !r.ok()) return r;
  }
  // With peer access off a real driver stages through the host; the sim's memory is one.
  return enqueue(st, [dst, src, size] { std::memmove(dst, src, size); });
}

dstatus sim_driver::memset_async(void* dst, int value, size_t size, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (size == 0) return dstatus::success();
  if (!dst) return fail(errc::invalid_value, "null pointer");
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(dst, size, "destination"); !r.ok()) return r;
  }
  return enqueue(st, [dst, value, size] { std::memset(dst, value, size); });
}

// --- streams and events ------------------------------------------------------------------------

dstatus sim_driver::stream_create(int device, native_stream* s) {
  if (!s) return fail(errc::invalid_value, "stream is null");
  if (auto r = check_device(device); !r.ok()) return r;
  std::shared_ptr<stream> st;
  std::lock_guard lk(m_);
  try {
    st = std::make_shared<stream>(device);
  } catch (const std::exception& e) {
    return fail(errc::out_of_memory, "cannot start a stream thread: {}", e.what());
  }
  streams_.emplace(st.get(), st);
  *s = st.get();
  return dstatus::success();
}

dstatus sim_driver::stream_destroy(int device, native_stream s) {
  if (auto r = check_device(device); !r.ok()) return r;
  if (!s) return fail(errc::invalid_value, "the default stream cannot be destroyed");
  std::shared_ptr<stream> st;
  {
    std::lock_guard lk(m_);
    auto it = streams_.find(s);
    if (it == streams_.end()) {
      return fail(errc::invalid_value, "stream {} is not a live sim stream", fmt::ptr(s));
    }
    st = std::move(it->second);
    streams_.erase(it);
    retiring_.push_back(st);
  }
  st->shutdown();  // like cudaStreamDestroy, queued work still completes
  {
    std::lock_guard lk(m_);
    if (auto it = std::find(retiring_.begin(), retiring_.end(), st); it != retiring_.end())
      retiring_.erase(it);
  }
  return dstatus::success();
}

dstatus sim_driver::stream_synchronize(int device, native_stream s) {
  if (s == nullptr) {
    if (auto r = check_device(device); !r.ok()) return r;
    std::shared_ptr<stream> def;
    {
      std::lock_guard lk(m_);
      def = default_streams_[static_cast<size_t>(device)];
    }
    if (def) def->synchronize();  // never used: nothing to wait for, no thread to start
    return dstatus::success();
  }
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  st->synchronize();
  return dstatus::success();
}

dstatus sim_driver::event_create(int device, native_event* e, event_timing timing) {
  if (!e) return fail(errc::invalid_value, "event is null");
  if (auto r = check_device(device); !r.ok()) return r;
  auto ev = std::make_shared<event>();
  ev->timing = timing == event_timing::on;
  std::lock_guard lk(m_);
  events_.emplace(ev.get(), ev);
  *e = ev.get();
  return dstatus::success();
}

dstatus sim_driver::event_destroy(int device, native_event e) {
  if (auto r = check_device(device); !r.ok()) return r;
  std::lock_guard lk(m_);
  if (events_.erase(e) == 0) {
    return fail(errc::invalid_value, "event {} is not a live sim event", fmt::ptr(e));
  }
  return dstatus::success();  // a pending record keeps the event alive until it ran
}

dstatus sim_driver::find_event(native_event e, std::shared_ptr<event>* out) {
  std::lock_guard lk(m_);
  auto it = events_.find(e);
  if (it == events_.end())
    return fail(errc::invalid_value, "event {} is not a live sim event", fmt::ptr(e));
  *out = it->second;
  return dstatus::success();
}

dstatus sim_driver::event_record(native_event e, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::lock_guard el(ev->m);
  std::uint64_t g = ++ev->generation;
  std::uint64_t ticket = st->enqueue(order_with_default(st, [ev, g] {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard l(ev->m);
    // A later record (on a faster stream) wins; an older one must not overwrite its time.
    if (g > ev->done_generation) {
      ev->done_generation = g;
      ev->when = now;
    }
  }));
  if (ticket == 0) {
    --ev->generation;
    return fail(errc::invalid_value, "the stream was destroyed");
  }
  ev->where = st;
  ev->ticket = ticket;
  return dstatus::success();
}

dstatus sim_driver::stream_wait_event(int device, native_stream s, native_event e) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::shared_ptr<stream> where;
  std::uint64_t ticket = 0;
  {
    std::lock_guard el(ev->m);
    where = ev->where;
    ticket = ev->ticket;
  }
  if (!where) return dstatus::success();  // never recorded: nothing to wait for (as CUDA)
  // The ticket was queued before this task, so waits only point backwards: no cycle can form.
  return enqueue(st, [where, ticket] { where->wait(ticket); });
}

dstatus sim_driver::event_synchronize(native_event e) {
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::shared_ptr<stream> where;
  std::uint64_t ticket = 0;
  {
    std::lock_guard el(ev->m);
    where = ev->where;
    ticket = ev->ticket;
  }
  if (where) where->wait(ticket);
  return dstatus::success();
}

dstatus sim_driver::enqueue_host_task(int device, native_stream s, std::function<void()> fn) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  return enqueue(st, std::move(fn));
}

dstatus sim_driver::stream_query(int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (s == nullptr) {
    if (auto r = check_device(device); !r.ok()) return r;
    std::lock_guard lk(m_);
    st = default_streams_[static_cast<size_t>(device)];
  } else if (auto r = resolve_stream(device, s, &st); !r.ok()) {
    return r;
  }
  if (!st || st->idle()) return dstatus::success();
  return dstatus::not_ready(0, "SIM_ERROR_NOT_READY");
}

dstatus sim_driver::event_query(native_event e) {
  std::shared_ptr<event> ev;
  if (auto r = find_event(e, &ev); !r.ok()) return r;
  std::lock_guard el(ev->m);
  if (ev->done_generation == ev->generation) return dstatus::success();
  return dstatus::not_ready(0, "SIM_ERROR_NOT_READY");
}

dstatus sim_driver::event_elapsed_ms(float* ms, native_event start, native_event end) {
  if (!ms) return fail(errc::invalid_value, "ms is null");
  std::shared_ptr<event> a, b;
  {
    std::lock_guard lk(m_);
    auto ia = events_.find(start);
    auto ib = events_.find(end);
    if (ia == events_.end() || ib == events_.end()) {
      return fail(errc::invalid_value, "event {} is not a live sim event",
                  fmt::ptr(ia == events_.end() ? start : end));
    }
    a = ia->second;
    b = ib->second;
  }
  auto stamp = [](event& ev, std::chrono::steady_clock::time_point* t) -> dstatus {
    std::lock_guard el(ev.m);
    // As CUDA (CUDA_ERROR_INVALID_HANDLE) and HIP refuse events made without timing.
    if (!ev.timing) return fail(errc::invalid_handle, "the event was made without timing");
    if (ev.generation == 0) return fail(errc::invalid_value, "the event was never recorded");
    if (ev.done_generation != ev.generation) {
      return fail(errc::busy, "the event's latest record has not completed yet");
    }
    *t = ev.when;
    return dstatus::success();
  };
  std::chrono::steady_clock::time_point ta, tb;
  if (auto r = stamp(*a, &ta); !r.ok()) return r;
  if (auto r = stamp(*b, &tb); !r.ok()) return r;
  *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
  return dstatus::success();
}

dstatus sim_driver::device_synchronize(int device) {
  if (auto r = check_device(device); !r.ok()) return r;
  std::vector<std::pair<std::shared_ptr<stream>, std::uint64_t>> snap;
  {
    std::lock_guard lk(m_);
    if (auto& def = default_streams_[static_cast<size_t>(device)]) {
      snap.emplace_back(def, def->last_ticket());
    }
    for (auto& [k, s] : streams_) {
      if (s->device() == device) snap.emplace_back(s, s->last_ticket());
    }
  }
  for (auto& [s, t] : snap) s->wait(t);
  return dstatus::success();
}

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
  if (fstat(fd, &sb) != 0 || !round_page(p.size, &len) ||
      static_cast<std::uint64_t>(sb.st_size) < len) {
    close(fd);
    return fail(errc::invalid_handle, "the shared memory of handle {} is not {} bytes", name,
                p.size);
  }
  void* m = fresh_mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return from_errno(e, "mmap");
  allocation a;
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

// --- managed memory ----------------------------------------------------------------------------

dstatus sim_driver::mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                                       native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  int loc = MEMAREA_INVALID_DEVICE_ID;
  if (auto r = location_id(to, &loc); !r.ok()) return r;
  std::uintptr_t base = 0;
  std::uint64_t id = 0;
  size_t first = 0, last = 0;
  {
    std::lock_guard lk(m_);
    table::iterator it;
    if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
    base = it->first;
    id = it->second.id;
  }
  // Without concurrent managed access prefetching is only a hint the driver drops (RMM, Umpire).
  if (!config_.concurrent_managed_access) return dstatus::success();
  return enqueue(st, [this, base, id, first, last, loc] {
    std::lock_guard lk(m_);
    auto it = allocations_.find(base);
    if (it == allocations_.end() || it->second.id != id) return;  // freed meanwhile
    try {
      it->second.pages.prefetched(first, last, loc);
    } catch (const std::bad_alloc&) {
      // No memory for a new run of the attribute table: the answer keeps the older location.
    }
  });
}

dstatus sim_driver::mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                               location where) {
  bool needs_location = false;
  switch (advice) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      break;  // the location is ignored, as CUDA ignores the device
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
      needs_location = true;
      break;
    default:
      return fail(errc::invalid_value, "unknown advice {}", static_cast<int>(advice));
  }
  int loc = MEMAREA_INVALID_DEVICE_ID;
  if (needs_location) {
    if (auto r = location_id(where, &loc); !r.ok()) return r;
  }
  std::lock_guard lk(m_);
  table::iterator it;
  size_t first = 0, last = 0;
  if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
  // loc is a validated ordinal (< kMaxDevices) or the CPU, so the table takes it.
  try {
    it->second.pages.advise(first, last, advice, loc);
  } catch (const std::bad_alloc&) {
    return fail(errc::out_of_memory, "no memory for the page attributes of {}", fmt::ptr(ptr));
  }
  return dstatus::success();
}

dstatus sim_driver::mem_range_get_attribute(void* data, size_t data_size,
                                            memarea_mem_range_attribute attribute, const void* ptr,
                                            size_t count) {
  if (!data) return fail(errc::invalid_value, "data is null");
  if (!page_attributes::fits(attribute, data_size)) {
    return fail(errc::invalid_value,
                "unknown range attribute {} or data_size {} that does not fit it (4 bytes; "
                "ACCESSED_BY: a non-zero multiple of 4)",
                static_cast<int>(attribute), data_size);
  }
  std::lock_guard lk(m_);
  table::iterator it;
  size_t first = 0, last = 0;
  if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
  it->second.pages.answer(attribute, data, data_size, first, last);
  return dstatus::success();
}

dstatus sim_driver::stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                            unsigned flags) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (flags != MEMAREA_MEM_ATTACH_GLOBAL && flags != MEMAREA_MEM_ATTACH_HOST &&
      flags != MEMAREA_MEM_ATTACH_SINGLE) {
    return fail(errc::invalid_value, "flags {:#x} must be exactly one of GLOBAL, HOST, SINGLE",
                flags);
  }
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  std::uintptr_t base = 0;
  std::uint64_t id = 0;
  {
    std::lock_guard lk(m_);
    auto it = find_locked(ptr);
    if (it == allocations_.end() || it->second.from != origin::managed) {
      return fail(errc::invalid_value, "{} is not managed memory", fmt::ptr(ptr));
    }
    size_t off = addr(ptr) - it->first;
    if (length != 0 && length > it->second.size - off) {
      return fail(errc::invalid_value,
                  "length {} at {} runs past the end of its managed allocation ({} bytes)", length,
                  fmt::ptr(ptr), it->second.size);
    }
    base = it->first;
    id = it->second.id;
  }
  return enqueue(st, [this, base, id, flags] {
    std::lock_guard lk(m_);
    auto it = allocations_.find(base);
    if (it != allocations_.end() && it->second.id == id) it->second.flags = flags;
  });
}

unsigned sim_driver::attach_flags(const void* ptr) const {
  std::lock_guard lk(m_);
  auto it = find_locked(ptr);
  if (it == allocations_.end() || it->second.from != origin::managed) return 0;
  return it->second.flags;
}

}  // namespace sim

std::unique_ptr<driver> make_sim_driver(const sim_config& config) {
  return std::make_unique<sim::sim_driver>(config);
}

}  // namespace memarea::detail
