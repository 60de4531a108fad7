#include <memarea/error.hpp>

#include "base/fork_safety.hpp"

#include <mutex>
#include <utility>

// memarea_category() lives in src/base/error_category.cpp, where the driver layer may use it.
namespace memarea {
namespace {

constexpr std::size_t kMaxKept = 1024;

/// The handler and the kept failures. A ranked lock (fork takes it) and a leaf: nothing is
/// called under it, the handler least of all.
struct release_failures {
  detail::ranked_mutex m{detail::lock_rank::release_failures};
  std::function<void(const release_failure&)> handler;
  std::vector<release_failure> kept;
  std::size_t dropped = 0;
};

release_failures& failures() {
  static auto* f = new release_failures();  // never destroyed: destructors report at exit too
  return *f;
}

}  // namespace

void set_release_failure_handler(std::function<void(const release_failure&)> handler) {
  auto& f = failures();
  std::lock_guard lock(f.m);
  f.handler = std::move(handler);
}

std::vector<release_failure> take_release_failures(std::size_t* dropped) {
  auto& f = failures();
  std::vector<release_failure> out;
  std::lock_guard lock(f.m);
  out.swap(f.kept);
  if (dropped) *dropped = f.dropped;
  f.dropped = 0;
  return out;
}

void report_release_failure(const void* ptr, std::size_t size, const std::exception& e) noexcept {
  try {
    release_failure r;
    r.ptr = ptr;
    r.size = size;
    if (const auto* me = dynamic_cast<const error*>(&e)) {
      r.status = me->status();
      r.message = me->message();
    } else {
      r.message = e.what();
    }
    auto& f = failures();
    std::function<void(const release_failure&)> handler;
    {
      std::lock_guard lock(f.m);
      if (!f.handler) {
        if (f.kept.size() < kMaxKept) {
          f.kept.push_back(std::move(r));
        } else {
          ++f.dropped;
        }
        return;
      }
      handler = f.handler;
    }
    handler(r);
  } catch (...) {
    // Out of memory while recording, or a handler that threw: nothing more can be done here.
  }
}

}  // namespace memarea
