// The context calls of driver.hpp (contexts the user makes) for the CUDA and HIP backends, once
// for both: gpu_backend derives from this, and the Vendor traits give the entry points
// (cuCtxCreate / hipCtxCreate and their siblings, which HIP maps to CUDA's on its NVIDIA
// platform). A context is the vendor's handle as it is. Calls about one context that the vendor
// only makes on the current one (device, flags, synchronize) push it, ask, and pop it, so the
// thread's stack is as it was afterwards.
#pragma once

#include "driver/driver.hpp"

#include <string_view>

namespace memarea::detail {

/// The vendor's names of its context calls, for messages (Vendor::ctx_fn).
struct context_entry_names {
  const char* create;
  const char* destroy;
  const char* set_current;
  const char* get_current;
  const char* push;
  const char* pop;
  const char* synchronize;
  const char* get_device;
  const char* get_flags;
  const char* enable_peer;
  const char* disable_peer;
};

/// The status of a failed call of Vendor's: memarea's code (never success), the vendor's code and
/// name, and the vendor's words with the call's name as detail. Cold and out of line, so that
/// every call's success path stays a compare; gpu_backend's calls translate through it too.
template <class Vendor>
[[gnu::cold, gnu::noinline]] dstatus vendor_failure(const Vendor& v, typename Vendor::result r,
                                                    std::string_view fn) {
  dstatus s;
  s.native = static_cast<int>(r);
  s.code = Vendor::code(r);
  if (s.code == errc::success) s.code = errc::unknown;  // a failed call never reads as success
  s.native_name = Vendor::error_name(r);
  s.detail = v.detail(r, fn);
  return s;
}

/// Backend: gpu_backend<Vendor>, whose vendor() is the traits object.
template <class Backend, class Vendor>
class gpu_contexts : public driver {
 public:
  using result = typename Vendor::result;

  dstatus context_create(int device, unsigned flags, native_context* c) override {
    if (auto st = ready(Vendor::ctx_fn.create); !st.ok()) return st;
    return call(v().user_ctx_create(c, flags, device), Vendor::ctx_fn.create);
  }
  dstatus context_destroy(native_context c) override {
    if (auto st = ready(Vendor::ctx_fn.destroy); !st.ok()) return st;
    if (!c) return null_context(Vendor::ctx_fn.destroy);
    return call(v().user_ctx_destroy(c), Vendor::ctx_fn.destroy);
  }
  dstatus context_set_current(native_context c) override {
    if (auto st = ready(Vendor::ctx_fn.set_current); !st.ok()) return st;
    return call(v().user_ctx_set_current(c), Vendor::ctx_fn.set_current);
  }
  dstatus context_get_current(native_context* c) override {
    if (auto st = ready(Vendor::ctx_fn.get_current); !st.ok()) return st;
    return call(v().user_ctx_get_current(c), Vendor::ctx_fn.get_current);
  }
  dstatus context_push(native_context c) override {
    if (auto st = ready(Vendor::ctx_fn.push); !st.ok()) return st;
    if (!c) return null_context(Vendor::ctx_fn.push);
    return call(v().user_ctx_push(c), Vendor::ctx_fn.push);
  }
  dstatus context_pop(native_context* c) override {
    if (auto st = ready(Vendor::ctx_fn.pop); !st.ok()) return st;
    return call(v().user_ctx_pop(c), Vendor::ctx_fn.pop);
  }
  dstatus context_synchronize(native_context c) override {
    return in_context(c, Vendor::ctx_fn.synchronize, [&] { return v().user_ctx_synchronize(); });
  }
  dstatus context_get_device(native_context c, int* device) override {
    return in_context(c, Vendor::ctx_fn.get_device,
                      [&] { return v().user_ctx_get_device(device); });
  }
  dstatus context_get_flags(native_context c, unsigned* flags) override {
    return in_context(c, Vendor::ctx_fn.get_flags, [&] { return v().user_ctx_get_flags(flags); });
  }
  dstatus context_enable_peer_access(native_context peer, unsigned flags) override {
    if (auto st = ready(Vendor::ctx_fn.enable_peer); !st.ok()) return st;
    if (!peer) return null_context(Vendor::ctx_fn.enable_peer);
    return call(v().user_ctx_enable_peer(peer, flags), Vendor::ctx_fn.enable_peer);
  }
  dstatus context_disable_peer_access(native_context peer) override {
    if (auto st = ready(Vendor::ctx_fn.disable_peer); !st.ok()) return st;
    if (!peer) return null_context(Vendor::ctx_fn.disable_peer);
    return call(v().user_ctx_disable_peer(peer), Vendor::ctx_fn.disable_peer);
  }

 private:
  const Vendor& v() { return static_cast<Backend&>(*this).vendor(); }

  /// not_supported where the library lacks the context calls (or has no devices).
  dstatus ready(const char* what) {
    if (v().device_count() > 0 && v().has_user_contexts()) return {};
    dstatus s;
    s.code = v().device_count() > 0 ? errc::not_supported : errc::no_device;
    s.detail = std::string(what) + ": the " + Vendor::name + " library has no user contexts";
    return s;
  }
  /// The driver's answer for a NULL context, where passing NULL would mean "the current one".
  static dstatus null_context(const char* fn) {
    dstatus s;
    s.code = errc::invalid_context;
    s.detail = std::string(fn) + ": NULL is not a context";
    return s;
  }
  /// fn with c pushed, then popped whatever fn answered.
  template <class F>
  dstatus in_context(native_context c, const char* fn, F&& f) {
    if (auto st = ready(fn); !st.ok()) return st;
    if (!c) return null_context(fn);
    if (auto st = call(v().user_ctx_push(c), Vendor::ctx_fn.push); !st.ok()) return st;
    dstatus st = call(f(), fn);
    native_context popped = nullptr;
    dstatus pst = call(v().user_ctx_pop(&popped), Vendor::ctx_fn.pop);
    return st.ok() ? pst : st;
  }
  dstatus call(result r, std::string_view fn) {
    if (r == Vendor::success) return {};
    return vendor_failure(v(), r, fn);
  }
};

}  // namespace memarea::detail
