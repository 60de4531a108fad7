// Caps per device and the out-of-memory path (memory_limit.hpp): the cold path's order is
// cap or driver refusal -> trim every pool of the device -> retry -> handlers -> one retry ->
// fail. No memarea lock is held while a handler runs (area_mmap calls the driver with none),
// so a handler may free and trim.
#include "core/memory/memory_limit.hpp"

#include "core/system.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

namespace memarea {
namespace detail::limits {

std::atomic<std::size_t> g_caps[usage::kDevices] = {};
std::atomic<const pool_hooks*> g_pool_hooks{nullptr};

namespace {

/// Bytes admitted under caps, per device, whose records do not count them yet.
std::atomic<std::size_t> g_pending[usage::kDevices] = {};

struct handler_entry {
  oom_handler_id id;
  std::shared_ptr<const oom_handler> fn;
};

/// The handlers, in the order added; copied out under the lock and called without it.
struct handler_list {
  std::mutex m;
  std::vector<handler_entry> v;
  oom_handler_id next = 1;
};

handler_list& handlers() {
  static auto* h = new handler_list;  // never destroyed: allocations may fail during exit
  return *h;
}

/// Set while this thread runs handlers: an allocation a handler makes that fails just fails.
thread_local bool t_in_handlers = false;

std::size_t reserved_of(int device) noexcept {
  const usage::row& r = usage::at(device);
  const std::int64_t v = r.now[usage::direct].load(std::memory_order_relaxed) +
                         r.now[usage::pool_reserved].load(std::memory_order_relaxed);
  return v > 0 ? static_cast<std::size_t>(v) : 0;
}

int checked_device(int device, const char* what) {
  if (device == -1) device = current_device();
  system::get().check_device(device, what);
  if (device >= usage::kDevices)
    throw error(errc::invalid_device, fmt::format("{}: device {} is past the {} memarea counts",
                                                  what, device, usage::kDevices));
  return device;
}

/// Bytes of "8GiB", "512M", "1048576" (K, M, G, T and KiB, MiB, GiB, TiB: powers of 1024);
/// false for anything else, or past SIZE_MAX.
bool parse_bytes(std::string_view t, std::size_t& out) {
  std::size_t i = 0, v = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    const std::size_t d = static_cast<std::size_t>(t[i++] - '0');
    if (v > (SIZE_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (i == 0) return false;
  std::string_view unit = t.substr(i);
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (!unit.empty()) return false;
  if (v > (SIZE_MAX >> shift)) return false;
  out = v << shift;
  return true;
}

/// MEMAREA_MEMORY_LIMIT ("0:8GiB,1:4GiB"), read as the library loads: any bad entry leaves
/// every cap unset, with a warning on stderr. Devices are judged against the rows memarea
/// counts, not the devices present (the driver is not loaded yet).
const bool g_env_read = [] {
  const char* env = std::getenv("MEMAREA_MEMORY_LIMIT");
  if (!env || !*env) return true;
  std::vector<std::pair<int, std::size_t>> caps;
  std::string_view rest(env);
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t colon = item.find(':');
    std::size_t bytes = 0, dev = 0;
    if (colon == std::string_view::npos || colon == 0 || colon > 2 ||
        !parse_bytes(item.substr(0, colon), dev) || dev >= std::size_t{usage::kDevices} ||
        !parse_bytes(item.substr(colon + 1), bytes)) {
      std::fprintf(stderr,
                   "memarea: MEMAREA_MEMORY_LIMIT=\"%s\" ignored: \"%.*s\" is not DEVICE:BYTES "
                   "(a device 0-%d, bytes as 8GiB, 512M or 1048576)\n",
                   env, static_cast<int>(item.size()), item.data(), usage::kDevices - 1);
      return false;
    }
    caps.emplace_back(static_cast<int>(dev), bytes);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  for (auto [d, b] : caps) g_caps[d].store(b, std::memory_order_relaxed);
  return true;
}();

}  // namespace

admission::~admission() {
  if (bytes) g_pending[device].fetch_sub(bytes, std::memory_order_relaxed);
}

void allocate_slow(int device, std::size_t bytes, admission& adm,
                   const std::function<dstatus()>& alloc, const dstatus* first,
                   const std::string& what) {
  oom_info info;
  info.device = device;
  info.bytes = bytes;
  info.reason = oom_reason::driver;
  dstatus last = first ? *first : dstatus{};
  const auto attempt = [&]() -> bool {
    const std::size_t cap = g_caps[device].load(std::memory_order_relaxed);
    info.limit = cap;
    if (cap) {
      const std::size_t before = g_pending[device].fetch_add(bytes, std::memory_order_relaxed);
      const std::size_t reserved = reserved_of(device);
      info.reserved = reserved;
      if (bytes > cap || before > cap - bytes || reserved > cap - bytes - before) {
        g_pending[device].fetch_sub(bytes, std::memory_order_relaxed);
        info.reason = oom_reason::limit;
        return false;
      }
      adm.device = device;
      adm.bytes = bytes;
    }
    last = alloc();
    if (last.ok()) return true;
    if (adm.bytes) {
      g_pending[device].fetch_sub(bytes, std::memory_order_relaxed);
      adm.bytes = 0;
    }
    if (last.code != errc::out_of_memory) throw_status(last, what);
    info.reason = oom_reason::driver;
    info.reserved = reserved_of(device);
    return false;
  };
  if (!first && attempt()) return;
  // What every pool of the device caches goes back first.
  const pool_hooks* pools = g_pool_hooks.load(std::memory_order_acquire);
  if (pools) pools->trim_device(device);
  if (attempt()) return;

  std::string handler_error;
  if (!t_in_handlers) {
    std::vector<handler_entry> copy;
    {
      auto& h = handlers();
      std::lock_guard g(h.m);
      copy = h.v;
    }
    bool retry = false;
    t_in_handlers = true;
    for (const auto& e : copy) {
      try {
        retry = (*e.fn)(info) || retry;
      } catch (const std::exception& x) {
        handler_error = x.what();
        break;
      } catch (...) {
        handler_error = "an exception that is not a std::exception";
        break;
      }
    }
    t_in_handlers = false;
    if (retry && handler_error.empty() && attempt()) return;
  }

  std::string why = info.reason == oom_reason::limit
                        ? fmt::format("past device {}'s memory limit of {} bytes ({} reserved)",
                                      device, info.limit, info.reserved)
                        : fmt::format("the driver is out of memory ({}{}{})", last.native_name,
                                      *last.detail.c_str() ? ": " : "", last.detail.c_str());
  const std::int64_t direct = usage::at(device).now[usage::direct].load(std::memory_order_relaxed);
  std::string msg = fmt::format("{}: {}; largest users on device {}: allocations outside pools "
                                "{} bytes",
                                what, why, device, direct > 0 ? direct : 0);
  if (pools) msg += pools->largest_users(device, 3);
  if (!handler_error.empty()) msg += "; an out-of-memory handler threw: " + handler_error;
  throw error(errc::out_of_memory, msg, info.reason == oom_reason::driver ? last.native_name : "");
}

}  // namespace detail::limits

void set_memory_limit(int device, std::size_t bytes) {
  device = detail::limits::checked_device(device, "set memory limit");
  detail::limits::g_caps[device].store(bytes, std::memory_order_relaxed);
}

std::size_t memory_limit(int device) {
  device = detail::limits::checked_device(device, "get memory limit");
  return detail::limits::g_caps[device].load(std::memory_order_relaxed);
}

oom_handler_id add_oom_handler(oom_handler handler) {
  if (!handler) throw error(errc::invalid_value, "add oom handler: the handler is empty");
  auto fn = std::make_shared<const oom_handler>(std::move(handler));
  auto& h = detail::limits::handlers();
  std::lock_guard g(h.m);
  const oom_handler_id id = h.next++;
  h.v.push_back({id, std::move(fn)});
  return id;
}

void remove_oom_handler(oom_handler_id id) {
  auto& h = detail::limits::handlers();
  std::shared_ptr<const oom_handler> gone;  // destroyed after the lock
  {
    std::lock_guard g(h.m);
    auto it = std::find_if(h.v.begin(), h.v.end(), [&](const auto& e) { return e.id == id; });
    if (it == h.v.end())
      throw error(errc::invalid_value,
                  fmt::format("remove oom handler: {} names no handler", id));
    gone = std::move(it->fn);
    h.v.erase(it);
  }
}

}  // namespace memarea
