// User contexts (include/memarea/context.hpp): flag and device checks, then the backend's
// context calls (driver.hpp), which act on the calling thread's context stack.
#include "core/system.hpp"

#include <memarea/context.hpp>
#include <memarea/memarea.h>

#include <fmt/format.h>

#include <mutex>
#include <unordered_set>
#include <utility>

namespace memarea {
namespace {

detail::driver& backend() { return detail::system::get().gpu().backend(); }

/// Contexts destroyed through memarea. CUDA does not check a context handle (it follows a
/// destroyed one into freed memory), so memarea answers INVALID_CONTEXT for these itself. A
/// handle leaves the set when the driver hands it out again: made by memarea_context_create,
/// or seen current or popped (a context the user made with the driver at the same address).
struct destroyed_contexts {
  std::mutex m;
  std::unordered_set<void*> handles;
};

destroyed_contexts& destroyed() {
  static auto* d = new destroyed_contexts;  // never destroyed: contexts may go during exit
  return *d;
}

void refuse_destroyed(void* c, const char* what) {
  if (!c) return;
  auto& d = destroyed();
  std::lock_guard g(d.m);
  if (d.handles.count(c))
    throw error(errc::invalid_context,
                fmt::format("{}: context {} was destroyed", what, c));
}

void live_again(void* c) {
  if (!c) return;
  auto& d = destroyed();
  std::lock_guard g(d.m);
  d.handles.erase(c);
}

detail::dstatus destroy_native(void* c) {
  detail::dstatus st = backend().context_destroy(c);
  if (st.ok() && c) {
    auto& d = destroyed();
    std::lock_guard g(d.m);
    d.handles.insert(c);
  }
  return st;
}

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
  live_again(c);
  return context(c, true);
}

context context::wrap(void* native) {
  refuse_destroyed(native, "memarea::context::wrap");
  int device = 0;
  detail::check(backend().context_get_device(native, &device), "memarea::context::wrap");
  return context(native, false);
}

context context::current() {
  void* c = nullptr;
  detail::check(backend().context_get_current(&c), "memarea::context::current");
  live_again(c);
  return context(c, false);
}

context context::pop() {
  void* c = nullptr;
  detail::check(backend().context_pop(&c), "memarea::context::pop");
  live_again(c);
  return context(c, false);
}

context::~context() {
  if (owns_ && native_) (void)destroy_native(native_);
}

context::context(context&& o) noexcept
    : native_(std::exchange(o.native_, nullptr)), owns_(std::exchange(o.owns_, false)) {}

context& context::operator=(context&& o) noexcept {
  if (this != &o) {
    if (owns_ && native_) (void)destroy_native(native_);
    native_ = std::exchange(o.native_, nullptr);
    owns_ = std::exchange(o.owns_, false);
  }
  return *this;
}

int context::device() const {
  refuse_destroyed(native_, "memarea::context::device");
  int d = 0;
  detail::check(backend().context_get_device(native_, &d), "memarea::context::device");
  return d;
}

unsigned context::flags() const {
  refuse_destroyed(native_, "memarea::context::flags");
  unsigned f = 0;
  detail::check(backend().context_get_flags(native_, &f), "memarea::context::flags");
  return f;
}

void context::synchronize() const {
  refuse_destroyed(native_, "memarea::context::synchronize");
  detail::check(backend().context_synchronize(native_), "memarea::context::synchronize");
}

void context::set_current() const {
  refuse_destroyed(native_, "memarea::context::set_current");
  detail::check(backend().context_set_current(native_), "memarea::context::set_current");
}

void context::push() const {
  refuse_destroyed(native_, "memarea::context::push");
  detail::check(backend().context_push(native_), "memarea::context::push");
}

void context::enable_peer_access(unsigned flags) const {
  refuse_destroyed(native_, "memarea::context::enable_peer_access");
  // The seed's rule, which CUDA itself does not keep (it answers PEER_ACCESS_UNSUPPORTED, having
  // judged the device first): the current context is not its own peer.
  void* current = nullptr;
  if (native_ && backend().context_get_current(&current).ok() && current == native_)
    throw error(errc::invalid_context,
                "memarea::context::enable_peer_access: the context is the current one");
  detail::check(backend().context_enable_peer_access(native_, flags),
                "memarea::context::enable_peer_access");
}

void context::disable_peer_access() const {
  refuse_destroyed(native_, "memarea::context::disable_peer_access");
  detail::check(backend().context_disable_peer_access(native_),
                "memarea::context::disable_peer_access");
}

void context::destroy() {
  void* c = std::exchange(native_, nullptr);
  owns_ = false;
  refuse_destroyed(c, "memarea::context::destroy");
  detail::check(destroy_native(c), "memarea::context::destroy");
}

void* context::release() noexcept {
  owns_ = false;
  return std::exchange(native_, nullptr);
}

}  // namespace memarea
