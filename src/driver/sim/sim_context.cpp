// The sim's user contexts: cuCtxCreate / Destroy / SetCurrent / GetCurrent / PushCurrent /
// PopCurrent / Synchronize / GetDevice / GetFlags and cuCtxEnablePeerAccess / Disable, with the
// statuses the CUDA driver documents (seed 003), on emulated devices.
#include "driver/sim/sim_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace memarea::detail::sim {
namespace {

/// Each thread's context stack, per driver instance (several sims may live in one process).
thread_local std::unordered_map<std::uint64_t, std::vector<std::uintptr_t>> t_stacks;

/// The scheduling bits (CU_CTX_SCHED_MASK) and every flag a context takes.
constexpr unsigned kSchedMask = 0x07u;
constexpr unsigned kAllFlags = 0x1Fu;

std::uintptr_t key(native_context c) { return reinterpret_cast<std::uintptr_t>(c); }
native_context handle(std::uintptr_t k) { return reinterpret_cast<native_context>(k); }

}  // namespace

dstatus sim_driver::context_create(int device, unsigned flags, native_context* c) {
  if (!c) return fail(errc::invalid_value, "context is null");
  if (auto st = check_device(device); !st.ok()) return st;
  const unsigned sched = flags & kSchedMask;
  if ((flags & ~kAllFlags) != 0 || (sched & (sched - 1)) != 0)
    return fail(errc::invalid_value, "context flags {:#x} are not valid", flags);
  std::uintptr_t k = 0;
  {
    std::lock_guard lk(ctx_m_);
    next_context_ += 0x10;  // never 0 (nullptr is no context) and never reused
    k = next_context_;
    contexts_[k] = user_context{device, flags, {}};
  }
  t_stacks[instance_].push_back(k);
  *c = handle(k);
  return dstatus::success();
}

dstatus sim_driver::context_destroy(native_context c) {
  {
    std::lock_guard lk(ctx_m_);
    auto it = contexts_.find(key(c));
    if (it == contexts_.end())
      return fail(errc::invalid_context, "context {} is not a live context", c);
    contexts_.erase(it);
    // Access others had to its memory ends with it.
    for (auto& [k, other] : contexts_) std::erase(other.peers, key(c));
  }
  // The calling thread no longer has it current (other threads' stacks
  // keep the stale handle, which answers invalid_context from then on).
  auto& stack = t_stacks[instance_];
  std::erase(stack, key(c));
  return dstatus::success();
}

dstatus sim_driver::context_set_current(native_context c) {
  auto& stack = t_stacks[instance_];
  if (!c) {
    if (!stack.empty()) stack.pop_back();
    return dstatus::success();
  }
  if (auto st = live_context(c, nullptr, nullptr); !st.ok()) return st;
  if (stack.empty())
    stack.push_back(key(c));
  else
    stack.back() = key(c);
  return dstatus::success();
}

dstatus sim_driver::context_get_current(native_context* c) {
  if (!c) return fail(errc::invalid_value, "context is null");
  auto& stack = t_stacks[instance_];
  *c = nullptr;
  if (stack.empty()) return dstatus::success();
  std::lock_guard lk(ctx_m_);
  if (!contexts_.count(stack.back()))
    return fail(errc::invalid_context, "the current context was destroyed");
  *c = handle(stack.back());
  return dstatus::success();
}

dstatus sim_driver::context_push(native_context c) {
  if (auto st = live_context(c, nullptr, nullptr); !st.ok()) return st;
  t_stacks[instance_].push_back(key(c));
  return dstatus::success();
}

dstatus sim_driver::context_pop(native_context* c) {
  if (!c) return fail(errc::invalid_value, "context is null");
  auto& stack = t_stacks[instance_];
  if (stack.empty()) return fail(errc::invalid_context, "no context is current to pop");
  *c = handle(stack.back());
  stack.pop_back();
  return dstatus::success();
}

dstatus sim_driver::context_synchronize(native_context c) {
  int device = 0;
  if (auto st = context_get_device(c, &device); !st.ok()) return st;
  return device_synchronize(device);
}

dstatus sim_driver::live_context(native_context c, int* device, unsigned* flags) {
  std::lock_guard lk(ctx_m_);
  auto it = contexts_.find(key(c));
  if (it == contexts_.end())
    return fail(errc::invalid_context, "context {} is not a live context", c);
  if (device) *device = it->second.device;
  if (flags) *flags = it->second.flags;
  return dstatus::success();
}

dstatus sim_driver::context_get_device(native_context c, int* device) {
  if (!device) return fail(errc::invalid_value, "device is null");
  return live_context(c, device, nullptr);
}

dstatus sim_driver::context_get_flags(native_context c, unsigned* flags) {
  if (!flags) return fail(errc::invalid_value, "flags is null");
  return live_context(c, nullptr, flags);
}

dstatus sim_driver::context_enable_peer_access(native_context peer, unsigned flags) {
  auto& stack = t_stacks[instance_];
  if (stack.empty()) return fail(errc::invalid_context, "no context is current");
  std::lock_guard lk(ctx_m_);
  auto cur = contexts_.find(stack.back());
  if (cur == contexts_.end())
    return fail(errc::invalid_context, "the current context was destroyed");
  auto p = contexts_.find(key(peer));
  if (p == contexts_.end())
    return fail(errc::invalid_context, "peer context {} is not a live context", peer);
  if (cur == p) return fail(errc::invalid_context, "a context cannot be its own peer");
  if (flags != 0) return fail(errc::invalid_value, "flags {:#x} must be 0", flags);
  const int d = cur->second.device;
  const int pd = p->second.device;
  if (d == pd || !reachable(d, pd))
    return fail(errc::peer_access_unsupported, "device {} cannot access device {}", d, pd);
  auto& peers = cur->second.peers;
  if (std::find(peers.begin(), peers.end(), p->first) != peers.end())
    return fail(errc::peer_access_already_enabled, "access to context {} is already enabled",
                peer);
  if (static_cast<long>(peers.size()) >= config_.max_peers)
    return fail(errc::too_many_peers, "the context already has {} peers (MEMAREA_SIM_MAX_PEERS={})",
                peers.size(), config_.max_peers);
  peers.push_back(p->first);
  return dstatus::success();
}

dstatus sim_driver::context_disable_peer_access(native_context peer) {
  auto& stack = t_stacks[instance_];
  if (stack.empty()) return fail(errc::invalid_context, "no context is current");
  std::lock_guard lk(ctx_m_);
  auto cur = contexts_.find(stack.back());
  if (cur == contexts_.end())
    return fail(errc::invalid_context, "the current context was destroyed");
  if (!contexts_.count(key(peer)))
    return fail(errc::invalid_context, "peer context {} is not a live context", peer);
  auto& peers = cur->second.peers;
  auto it = std::find(peers.begin(), peers.end(), key(peer));
  if (it == peers.end())
    return fail(errc::peer_access_not_enabled, "access to context {} has not been enabled", peer);
  peers.erase(it);
  return dstatus::success();
}

}  // namespace memarea::detail::sim
