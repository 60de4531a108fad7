// Devices, the current device, streams and the sim settings: the C++ API over the system; and
// each device's capabilities as core's rooms ask for them (device_impl.hpp).
#include "core/device_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/device.hpp>
#include <memarea/owner.hpp>
#include <memarea/sim.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace memarea {
using detail::check;
using detail::system;

std::string backend_name() { return system::get().gpu().name(); }

int device_count() { return system::get().device_count(); }

device_properties get_device_properties(int device) {
  auto& sys = system::get();
  sys.check_device(device, "get_device_properties");
  memarea_device_properties p;
  std::memset(&p, 0, sizeof p);
  check(sys.gpu().get_properties(device, &p), "get_device_properties");
  device_properties r;
  r.name = p.name;
  r.backend = p.backend;
  r.ordinal = p.ordinal;
  r.pci_bus_id = p.pci_bus_id;
  r.total_memory = p.total_memory;
  r.free_memory = p.free_memory;
  r.unified_addressing = p.unified_addressing != 0;
  r.managed_memory = p.managed_memory != 0;
  r.concurrent_managed_access = p.concurrent_managed_access != 0;
  r.pageable_memory_access = p.pageable_memory_access != 0;
  r.can_map_host_memory = p.can_map_host_memory != 0;
  r.virtual_memory_management = p.virtual_memory_management != 0;
  r.ipc = p.ipc != 0;
  r.compute_major = p.compute_major;
  r.compute_minor = p.compute_minor;
  return r;
}

void set_device(int device) {
  auto& sys = system::get();
  sys.check_device(device, "set_device");
  check(sys.gpu().set_current_device(device), "set_device");
}

int get_device() { return detail::current_device(); }

void device_synchronize(int device) {
  auto& sys = system::get();
  sys.check_device(device, "device_synchronize");
  check(sys.gpu().device_synchronize(device), "device_synchronize");
}

device_guard::device_guard(int device) : previous_(get_device()) {
  if (device != previous_) set_device(device);
}

device_guard::~device_guard() {
  // Restoring fails only where the backend broke. A destructor must not throw: the failure goes
  // to the release-failure record (no memory to name), the thread's device left as it is.
  int now = previous_;
  auto& gpu = system::get().gpu();
  if (gpu.get_current_device(&now).ok() && now == previous_) return;
  const detail::dstatus st = gpu.set_current_device(previous_);
  if (st.ok()) return;
  detail::release_or_report(nullptr, 0, [&] {
    check(st, [&] {
      return fmt::format("device_guard end: device {} not made current again", previous_);
    });
  });
}

std::vector<backend_info> backends() {
  std::vector<backend_info> out;
  for (auto& r : system::get().reports())
    out.push_back(backend_info{r.name, r.active, r.devices, r.reason, r.version});
  return out;
}

namespace detail {

/// Read once per device: prefetch asks on every call, and get_properties also queries free
/// memory, which costs a driver round trip.
namespace {
struct caps_cache {
  ranked_mutex m{lock_rank::device_caps};
  std::vector<std::optional<device_caps>> by_device;  // guarded by m
};
}  // namespace

device_caps device_capabilities(int device) {
  auto& sys = system::get();
  sys.check_device(device, "device capabilities");
  // Made on first use (memarea may be called during static initialisation); never destroyed.
  auto& caps = made_once([] { return new caps_cache; });
  std::lock_guard lock(caps.m);
  auto& cache = caps.by_device;
  if (cache.empty()) cache.resize(static_cast<std::size_t>(sys.device_count()));
  auto& c = cache[static_cast<std::size_t>(device)];
  if (!c) {
    memarea_device_properties p;
    std::memset(&p, 0, sizeof p);
    check(sys.gpu().get_properties(device, &p), "device capabilities: device properties");
    c = device_caps{p.managed_memory != 0, p.concurrent_managed_access != 0,
                    p.pageable_memory_access != 0};
  }
  return *c;
}

}  // namespace detail

// --- streams --------------------------------------------------------------------------------

namespace detail {
namespace {
/// user_objects_on's counts, per device; devices past the table are not counted (no backend
/// has that many), which only makes their reset find the streams later, after its caches.
constexpr int max_counted_devices = 256;
struct user_counts {
  std::atomic<long> streams{0}, events{0};
};
std::array<user_counts, max_counted_devices> g_user_counts;
void count_user(int device, std::atomic<long> user_counts::*which, long delta) noexcept {
  if (device >= 0 && device < max_counted_devices)
    (g_user_counts[static_cast<std::size_t>(device)].*which).fetch_add(delta,
                                                                       std::memory_order_relaxed);
}
}  // namespace

void count_user_event(int device, long delta) noexcept {
  count_user(device, &user_counts::events, delta);
}

user_objects user_objects_on(int device) {
  if (device < 0 || device >= max_counted_devices) return {};
  const auto& c = g_user_counts[static_cast<std::size_t>(device)];
  return {c.streams.load(std::memory_order_relaxed), c.events.load(std::memory_order_relaxed)};
}

memarea_stream* create_stream(int device) {
  auto& sys = system::get();
  sys.check_device(device, "stream_create");
  native_stream n = nullptr;
  check(sys.gpu().stream_create(device, &n), "stream_create");
  memarea_stream* s = nullptr;
  try {
    s = new memarea_stream{{device, n}};
  } catch (...) {
    (void)sys.gpu().stream_destroy(device, n);
    throw;
  }
  count_user(device, &user_counts::streams, 1);
  return s;
}

void destroy_stream(memarea_stream* s) {
  if (!s) throw error(errc::invalid_value, "stream_destroy: the default stream (NULL) cannot be destroyed");
  if (s->wrapped)
    throw error(errc::invalid_value,
                fmt::format("stream_destroy: stream {} was wrapped, not made by memarea: its "
                            "owner destroys it (after memarea_stream_forget)",
                            fmt::ptr(s->native)));
  if (auto retire = stream_events::before_destroy.load(std::memory_order_acquire))
    retire(s->device, s->native);
  check(system::get().gpu().stream_destroy(s->device, s->native), "stream_destroy");
  count_user(s->device, &user_counts::streams, -1);
  delete s;
}
}  // namespace detail

stream::stream(int device)
    : handle_(detail::create_stream(device == -1 ? get_device() : device)) {}

stream::~stream() {
  // Destroying a valid stream fails only where the backend broke. Then the handle stays
  // valid (destroy_stream deletes it only after the driver's destroy), and the failure goes to
  // the release-failure record under it, for memarea_stream_destroy by hand.
  if (handle_)
    detail::release_or_report(handle_, 0, [&] {
      detail::destroy_stream(static_cast<memarea_stream*>(handle_));
    });
}

stream::stream(stream&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    stream old(std::move(*this));
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

void stream::synchronize() const { stream_view(*this).synchronize(); }

int stream::device() const noexcept { return handle_ ? handle_->device : -1; }

void* stream::native_handle() const noexcept { return handle_ ? handle_->native : nullptr; }

int stream_view::device() const noexcept { return handle_ ? handle_->device : -1; }

void* stream_view::native_handle() const noexcept { return handle_ ? handle_->native : nullptr; }

void stream_view::synchronize() const {
  auto ref = detail::resolve(handle_);
  check(system::get().gpu().stream_synchronize(ref.device, ref.native), "stream synchronize");
}

// --- sim ------------------------------------------------------------------------------------

namespace sim {
namespace {
detail::sim_config to_config(const settings& s) {
  detail::sim_config c;
  c.devices = s.devices;
  c.device_memory = s.device_memory;
  c.peer_groups = s.peer_groups;
  c.max_peers = s.max_peers;
  c.concurrent_managed_access = s.concurrent_managed_access;
  c.managed_memory = s.managed_memory;
  c.pageable_devices = s.pageable_devices;
  return c;
}
}  // namespace

settings from_environment() {
  auto c = detail::sim_config_from_env();
  return settings{c.devices, c.device_memory, c.peer_groups, c.max_peers,
                  c.concurrent_managed_access, c.managed_memory, c.pageable_devices};
}

void configure(const settings& s) { detail::configure_sim(to_config(s)); }

std::size_t parse_size(const std::string& text) { return detail::parse_size(text, "size"); }

}  // namespace sim
}  // namespace memarea
