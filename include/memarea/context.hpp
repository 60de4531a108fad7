// memarea — contexts the user makes (CUDA's cuCtx* calls; docs/contexts.md).
//
// memarea's own calls run in each device's primary context whatever context is current, and
// leave the thread's current context as they found it. These calls are for code that makes its
// own contexts: they act on the calling thread's context stack as the driver's calls do.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

namespace memarea {

/// A context, owning (made by create: destroyed with the object) or not (wrap, current, pop).
/// Move-only. Every call throws memarea::error: invalid_context for a context that is not live,
/// not_supported where the backend has no user contexts.
class context {
 public:
  /// An empty context (native() is nullptr).
  context() noexcept = default;
  /// Makes a context on device (-1: the current device) with flags (MEMAREA_CONTEXT_*) and makes
  /// it current (pushed on the thread's stack). invalid_value: bad flags; invalid_device.
  static context create(int device, unsigned flags = 0);
  /// A non-owning context over the driver's handle; invalid_context when it is not live.
  static context wrap(void* native);
  /// The calling thread's current context, non-owning; empty when none is.
  static context current();
  /// Pops the thread's current context and returns it, non-owning; invalid_context when none is.
  static context pop();
  ~context();
  context(context&& o) noexcept;
  context& operator=(context&& o) noexcept;
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// The vendor's handle (CUcontext, hipCtx_t); nullptr when empty.
  void* native() const noexcept { return native_; }
  /// Whether the object destroys the context.
  bool owns() const noexcept { return owns_; }
  explicit operator bool() const noexcept { return native_ != nullptr; }
  /// The context's device.
  int device() const;
  /// The flags it was made with.
  unsigned flags() const;
  /// Waits for all its work.
  void synchronize() const;
  /// Makes it the thread's current context (replaces the top of the stack).
  void set_current() const;
  /// Pushes it on the thread's stack.
  void push() const;
  /// Enables access from the thread's current context to this one's memory; the statuses of
  /// memarea_context_enable_peer_access.
  void enable_peer_access(unsigned flags = 0) const;
  /// Disables it; peer_access_not_enabled when it is not on.
  void disable_peer_access() const;
  /// Destroys the context now (owning or not) and empties the object; throws what the driver said.
  void destroy();
  /// Gives up ownership; returns the handle and empties the object.
  void* release() noexcept;

 private:
  context(void* native, bool owns) noexcept : native_(native), owns_(owns) {}
  void* native_ = nullptr;
  bool owns_ = false;
};

}  // namespace memarea

#pragma GCC visibility pop
