// User contexts (include/memarea/context.hpp): flag and device checks, then the backend's
// context calls (driver.hpp), which act on the calling thread's context stack.
#include "core/system.hpp"

#include <memarea/context.hpp>
#include <memarea/memarea.h>

#include <utility>

namespace memarea {
namespace {

detail::driver& backend() { return detail::system::get().gpu().backend(); }

}  // namespace

context context::create(int device, unsigned flags) {
  constexpr unsigned all = 0x1Fu;
  const unsigned sched = flags & 0x07u;
  if ((flags & ~all) != 0 || (sched & (sched - 1)) != 0)
    throw error(errc::invalid_value, "memarea::context::create: flags are not valid");
  if (device == -1) device = detail::current_device();
  detail::system::get().check_device(device, "memarea::context::create");
  void* c = nullptr;
  detail::check(backend().context_create(device, flags, &c), "memarea::context::create");
  return context(c, true);
}

context context::wrap(void* native) {
  int device = 0;
  detail::check(backend().context_get_device(native, &device), "memarea::context::wrap");
  return context(native, false);
}

context context::current() {
  void* c = nullptr;
  detail::check(backend().context_get_current(&c), "memarea::context::current");
  return context(c, false);
}

context context::pop() {
  void* c = nullptr;
  detail::check(backend().context_pop(&c), "memarea::context::pop");
  return context(c, false);
}

context::~context() {
  if (owns_ && native_) (void)backend().context_destroy(native_);
}

context::context(context&& o) noexcept
    : native_(std::exchange(o.native_, nullptr)), owns_(std::exchange(o.owns_, false)) {}

context& context::operator=(context&& o) noexcept {
  if (this != &o) {
    if (owns_ && native_) (void)backend().context_destroy(native_);
    native_ = std::exchange(o.native_, nullptr);
    owns_ = std::exchange(o.owns_, false);
  }
  return *this;
}

int context::device() const {
  int d = 0;
  detail::check(backend().context_get_device(native_, &d), "memarea::context::device");
  return d;
}

unsigned context::flags() const {
  unsigned f = 0;
  detail::check(backend().context_get_flags(native_, &f), "memarea::context::flags");
  return f;
}

void context::synchronize() const {
  detail::check(backend().context_synchronize(native_), "memarea::context::synchronize");
}

void context::set_current() const {
  detail::check(backend().context_set_current(native_), "memarea::context::set_current");
}

void context::push() const {
  detail::check(backend().context_push(native_), "memarea::context::push");
}

void context::enable_peer_access(unsigned flags) const {
  detail::check(backend().context_enable_peer_access(native_, flags),
                "memarea::context::enable_peer_access");
}

void context::disable_peer_access() const {
  detail::check(backend().context_disable_peer_access(native_),
                "memarea::context::disable_peer_access");
}

void context::destroy() {
  void* c = std::exchange(native_, nullptr);
  owns_ = false;
  detail::check(backend().context_destroy(c), "memarea::context::destroy");
}

void* context::release() noexcept {
  owns_ = false;
  return std::exchange(native_, nullptr);
}

}  // namespace memarea
