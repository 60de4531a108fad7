// Events: the calls behind memarea_event_* and memarea::event, over the driver's events.
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/event.hpp>
#include <memarea/owner.hpp>

#include <fmt/format.h>

#include <utility>

namespace memarea::detail {

namespace {

constexpr unsigned kEventFlags =
    MEMAREA_EVENT_BLOCKING_SYNC | MEMAREA_EVENT_DISABLE_TIMING | MEMAREA_EVENT_INTERPROCESS;

memarea_event& live(memarea_event* e, const char* what) {
  if (!e) throw error(errc::invalid_value, fmt::format("{}: event is NULL", what));
  return *e;
}

}  // namespace

memarea_event* create_event(int device, unsigned flags) {
  if (flags & ~kEventFlags)
    throw error(errc::invalid_value,
                fmt::format("event create: unknown flags {:#x}", flags & ~kEventFlags));
  if (flags & MEMAREA_EVENT_INTERPROCESS)
    throw error(errc::not_supported,
                "event create: MEMAREA_EVENT_INTERPROCESS: memarea has no way to share an event "
                "with another process (no IPC event handles)");
  auto& sys = system::get();
  sys.check_device(device, "event create");
  native_event n = nullptr;
  const auto timing =
      (flags & MEMAREA_EVENT_DISABLE_TIMING) ? event_timing::off : event_timing::on;
  const auto sync = (flags & MEMAREA_EVENT_BLOCKING_SYNC) ? event_sync::block : event_sync::spin;
  check(sys.gpu().event_create(device, &n, timing, sync), "event create");
  memarea_event* e = nullptr;
  try {
    e = new memarea_event{{device, n, flags}};
  } catch (...) {
    (void)sys.gpu().event_destroy(device, n);
    throw;
  }
  count_user_event(device, 1);
  return e;
}

void destroy_event(memarea_event* e) {
  live(e, "event destroy");
  check(system::get().gpu().event_destroy(e->device, e->native), "event destroy");
  count_user_event(e->device, -1);
  delete e;
}

void record_event(memarea_event* e, const stream_object* s) {
  live(e, "event record");
  if (s && s->device != e->device)
    throw error(errc::invalid_value,
                fmt::format("event record: the event is on device {}, the stream on device {}",
                            e->device, s->device));
  const native_stream ns = s ? s->native : nullptr;
  check(system::get().gpu().event_record(e->native, e->device, ns), "event record");
}

void wait_event(const stream_object* s, memarea_event* e) {
  live(e, "stream wait event");
  const stream_ref on = resolve(s);
  check(system::get().gpu().stream_wait_event(on.device, on.native, e->native),
        "stream wait event");
}

bool query_event(memarea_event* e) {
  live(e, "event query");
  const dstatus st = system::get().gpu().event_query(e->native);
  if (st.code == errc::busy) return false;
  check(st, "event query");
  return true;
}

void synchronize_event(memarea_event* e) {
  live(e, "event synchronize");
  check(system::get().gpu().event_synchronize(e->native), "event synchronize");
}

float elapsed_ms(memarea_event* start, memarea_event* end) {
  live(start, "event elapsed");
  live(end, "event elapsed");
  float ms = 0;
  check(system::get().gpu().event_elapsed_ms(&ms, start->native, end->native), [&] {
    return fmt::format("event elapsed (start {}, end {}: both must be recorded, complete and "
                       "made with timing)",
                       fmt::ptr(start->native), fmt::ptr(end->native));
  });
  return ms;
}

}  // namespace memarea::detail

namespace memarea {

namespace {
memarea_event* as_c(detail::event_object* e) noexcept { return static_cast<memarea_event*>(e); }
}  // namespace

event::event(int device, event_flags flags)
    : handle_(detail::create_event(device == -1 ? get_device() : device,
                                   static_cast<unsigned>(flags))) {}

event::~event() {
  // Destroying a valid event fails only where the backend broke: the failure goes to the
  // release-failure record under the handle, still valid, for memarea_event_destroy by hand.
  if (handle_)
    detail::release_or_report(handle_, 0, [&] { detail::destroy_event(as_c(handle_)); });
}

event::event(event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    event old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void event::record(stream_view s) {
  detail::record_event(as_c(handle_), detail::handle_access::of(s));
}

bool event::query() const { return detail::query_event(as_c(handle_)); }

void event::synchronize() const { detail::synchronize_event(as_c(handle_)); }

int event::device() const noexcept { return handle_ ? handle_->device : -1; }

void* event::native_handle() const noexcept { return handle_ ? handle_->native : nullptr; }

float elapsed_ms(const event& start, const event& end) {
  return detail::elapsed_ms(as_c(start.handle_), as_c(end.handle_));
}

void stream_view::wait(const event& e) const {
  detail::wait_event(handle_, as_c(e.handle_));
}

void stream::wait(const event& e) const { stream_view(*this).wait(e); }

}  // namespace memarea
