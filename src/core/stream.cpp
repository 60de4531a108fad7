// Streams made outside memarea: the wrapped native streams (a table that gives one stream
// object per device and native stream, for the life of the process), forgetting one before its
// owner destroys it, and what the C++ stream view says of them; and the sim's native streams
// and gates, which let tests make such streams and slow them down. Streams memarea makes are in
// device.cpp.
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "driver/sim/sim_driver.hpp"

#include <memarea/sim.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace memarea::detail {

namespace {

/// The wrapped streams, by (device, native stream). Entries are never removed: a handle given
/// out stays valid for the life of the process, and the table holds one small entry per native
/// stream ever wrapped (drivers reuse a destroyed stream's handle, so that stays bounded by the
/// streams alive at once, in practice).
struct wrapped_table {
  ranked_mutex m{lock_rank::wrapped_streams};
  std::map<std::pair<int, std::uintptr_t>, memarea_stream*> by_native;  // guarded by m
};

/// Validates a named native stream of device: live where the driver can tell, and of that
/// device where it can say which.
void check_native(driver_front& gpu, native_stream native, int device) {
  int found = -1;
  dstatus asked = gpu.stream_get_device(native, &found);
  // HIP answers an invalid handle, the sim an invalid value: either way the caller named no live
  // stream, which wrap documents as invalid_value.
  if (asked.code == errc::invalid_handle) asked.code = errc::invalid_value;
  check(asked, [&] {
    return fmt::format("stream wrap: {} is not a live stream the driver knows", fmt::ptr(native));
  });
  if (found >= 0 && found != device)
    throw error(errc::invalid_value,
                fmt::format("stream wrap: stream {} belongs to device {}, not device {}",
                            fmt::ptr(native), found, device));
}

}  // namespace

memarea_stream* wrap_stream(void* native, int device) {
  auto& sys = system::get();
  if (device == -1) device = current_device();  // as stream(-1): the thread's current device
  sys.check_device(device, "stream wrap");
  if (reinterpret_cast<std::uintptr_t>(native) == legacy_stream_value) native = nullptr;
  // Asked on every wrap, never remembered: the handle may now name a new stream.
  if (!is_special_stream(native)) check_native(sys.gpu(), native, device);
  auto& table = made_once([] { return new wrapped_table; });
  const std::pair key{device, reinterpret_cast<std::uintptr_t>(native)};
  std::lock_guard lock(table.m);
  auto it = table.by_native.find(key);
  if (it != table.by_native.end()) return it->second;
  auto* s = new memarea_stream{{device, native, true}};
  try {
    table.by_native.emplace(key, s);
  } catch (...) {
    delete s;
    throw;
  }
  return s;
}

bool query_stream(const stream_object* s) {
  const stream_ref on = resolve(s);
  const dstatus st = system::get().gpu().stream_query(on.device, on.native);
  if (st.code == errc::busy) return false;
  check(st, "stream query");
  return true;
}

void forget_stream(const stream_object* s) {
  if (!s || is_special_stream(s->native)) return;  // the default streams are never destroyed
  system::get().check_device(s->device, "stream forget");
  if (auto retire = stream_events::before_destroy.load(std::memory_order_acquire))
    retire(s->device, s->native);
}

}  // namespace memarea::detail

namespace memarea {

stream_view stream_view::wrap(void* native, int device) {
  return stream_view(detail::wrap_stream(native, device));
}

stream_view stream_view::per_thread(int device) {
  return wrap(reinterpret_cast<void*>(detail::per_thread_stream_value), device);
}

bool stream_view::is_wrapped() const noexcept { return handle_ && handle_->wrapped; }

bool operator==(stream_view a, stream_view b) noexcept {
  if (a.handle_ == b.handle_) return true;
  if (!a.handle_ || !b.handle_) return false;
  return a.handle_->device == b.handle_->device && a.handle_->native == b.handle_->native;
}

bool stream_view::query() const { return detail::query_stream(handle_); }

bool stream::query() const { return stream_view(*this).query(); }

void forget_stream(stream_view s) { detail::forget_stream(detail::handle_access::of(s)); }

}  // namespace memarea

// --- the sim's native streams and gates -------------------------------------------------------

namespace memarea::sim {

namespace {
detail::driver_front& sim_front(const char* what) {
  auto& gpu = detail::system::get().gpu();
  if (std::string_view(gpu.name()) != "sim")
    throw error(errc::not_supported,
                fmt::format("{}: the active backend is {}, not sim", what, gpu.name()));
  return gpu;
}
}  // namespace

void* create_native_stream(int device) {
  auto& gpu = sim_front("sim create_native_stream");
  detail::system::get().check_device(device, "sim create_native_stream");
  detail::native_stream s = nullptr;
  detail::check(gpu.stream_create(device, &s), "sim create_native_stream");
  return s;
}

void destroy_native_stream(void* native, int device) {
  auto& gpu = sim_front("sim destroy_native_stream");
  detail::system::get().check_device(device, "sim destroy_native_stream");
  detail::check(gpu.stream_destroy(device, native), "sim destroy_native_stream");
}

struct stream_gate::state {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
};

stream_gate::stream_gate(stream_view s) : state_(std::make_shared<state>()) {
  auto& gpu = sim_front("sim stream_gate");
  auto* driver = dynamic_cast<detail::sim::sim_driver*>(&gpu.backend());
  if (!driver) throw error(errc::not_supported, "sim stream_gate: the sim driver is not active");
  const detail::stream_ref on = detail::resolve(detail::handle_access::of(s));
  detail::check(driver->enqueue_host_task(on.device, on.native,
                                          [st = state_] {
                                            std::unique_lock lock(st->m);
                                            st->cv.wait(lock, [&] { return st->open; });
                                          }),
                "sim stream_gate");
}

stream_gate::~stream_gate() { open(); }

void stream_gate::open() {
  {
    std::lock_guard lock(state_->m);
    state_->open = true;
  }
  state_->cv.notify_all();
}

}  // namespace memarea::sim
