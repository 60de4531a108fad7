// The C API of user contexts (memarea.h, seed 003): over memarea::context.
#include "capi/c_call.hpp"

#include <memarea/context.hpp>
#include <memarea/memarea.h>

#include <utility>

using memarea::detail::c_call;
using memarea::detail::require;

namespace {

memarea_context_t to_c(void* native) { return static_cast<memarea_context_t>(native); }

/// A non-owning view of a C handle.
memarea::context view(memarea_context_t c) {
  // wrap checks liveness; calls that need a live context check it again in the driver.
  memarea::context v;
  if (c) v = memarea::context::wrap(c);
  return v;
}

}  // namespace

extern "C" {

memarea_status memarea_context_create(memarea_context_t* ctx, unsigned flags, int device) {
  return c_call(__func__, [&] {
    require(ctx, "ctx");
    *ctx = to_c(memarea::context::create(device, flags).release());
  });
}

memarea_status memarea_context_destroy(memarea_context_t ctx) {
  return c_call(__func__, [&] {
    memarea::context c = memarea::context::wrap(ctx);
    c.destroy();
  });
}

memarea_status memarea_context_wrap(memarea_context_t* ctx, void* native) {
  return c_call(__func__, [&] {
    require(ctx, "ctx");
    *ctx = to_c(memarea::context::wrap(native).native());
  });
}

memarea_status memarea_context_set_current(memarea_context_t ctx) {
  return c_call(__func__, [&] {
    if (ctx) {
      view(ctx).set_current();
    } else {
      memarea::context none;
      none.set_current();
    }
  });
}

memarea_status memarea_context_get_current(memarea_context_t* ctx) {
  return c_call(__func__, [&] {
    require(ctx, "ctx");
    *ctx = to_c(memarea::context::current().native());
  });
}

memarea_status memarea_context_push(memarea_context_t ctx) {
  return c_call(__func__, [&] { view(ctx).push(); });
}

memarea_status memarea_context_pop(memarea_context_t* ctx) {
  return c_call(__func__, [&] {
    void* c = memarea::context::pop().native();
    if (ctx) *ctx = to_c(c);
  });
}

memarea_status memarea_context_synchronize(memarea_context_t ctx) {
  return c_call(__func__, [&] { view(ctx).synchronize(); });
}

memarea_status memarea_context_get_device(int* device, memarea_context_t ctx) {
  return c_call(__func__, [&] {
    require(device, "device");
    *device = view(ctx).device();
  });
}

memarea_status memarea_context_get_flags(unsigned* flags, memarea_context_t ctx) {
  return c_call(__func__, [&] {
    require(flags, "flags");
    *flags = view(ctx).flags();
  });
}

memarea_status memarea_context_enable_peer_access(memarea_context_t peer_ctx, unsigned flags) {
  return c_call(__func__, [&] {
    memarea::context none;  // the driver says what an unknown peer is, after the current check
    (peer_ctx ? memarea::context::wrap(peer_ctx) : std::move(none)).enable_peer_access(flags);
  });
}

memarea_status memarea_context_disable_peer_access(memarea_context_t peer_ctx) {
  return c_call(__func__, [&] {
    memarea::context none;
    (peer_ctx ? memarea::context::wrap(peer_ctx) : std::move(none)).disable_peer_access();
  });
}

}  // extern "C"
