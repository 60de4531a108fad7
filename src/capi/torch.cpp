// The allocator entry points for PyTorch's CUDAPluggableAllocator (memarea/torch.h): a pool
// per device, the pieces handed out by pointer, and the streams PyTorch passes, wrapped once
// per thread.
//
// Why a table of the pieces here, when a pool knows its own: the pool a device draws from
// changes (memarea.torch.use_pool), and a piece must go back to the pool it came from, from
// any thread and after the change. PyTorch keeps the same table on its side of the call.
#include "base/fork_safety.hpp"
#include "base/pointer_table.hpp"
#include "capi/c_call.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/error.hpp>
#include <memarea/torch.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

using memarea::detail::c_call;
using memarea::detail::require;

namespace memarea::detail {
namespace {

/// A piece handed out: its pool, device and the size asked for.
struct torch_piece {
  memarea_pool_t pool;
  int device;
  std::size_t size;
};

/// The live pieces by address, in shards so that threads freeing different pieces seldom meet.
/// An array per shard (pointer_table), not a node-based map: an allocation and a free of a
/// node for every piece cost more than the rest of the table's work.
struct torch_table {
  static constexpr std::size_t kShards = 16;
  struct shard {
    ranked_mutex m{lock_rank::torch_pieces};
    pointer_table<torch_piece> live;
  };
  std::array<shard, kShards> shards;
  std::atomic<std::size_t> refused{0};

  shard& of(std::uintptr_t p) noexcept {
    // Pieces are at least 16-byte aligned: the bits above those pick the shard.
    return shards[((p >> 8) ^ (p >> 4)) % kShards];
  }
};

torch_table& table() {
  return made_once([] { return new torch_table; });
}

/// The pool set for each device (null: the default) and each device's default pool, made at
/// first use. Sized by the device count when first needed (the backend does not change).
struct torch_pools {
  explicit torch_pools(std::size_t n) : set(n), fallback(n) {}
  std::vector<std::atomic<memarea_pool_t>> set;
  std::vector<std::atomic<memarea_pool_t>> fallback;
};

torch_pools& pools() {
  return made_once([] {
    return new torch_pools(static_cast<std::size_t>(system::get().device_count()));
  });
}

int checked_device(int device, const char* what) {
  auto& sys = system::get();
  if (device == -1) device = current_device();
  sys.check_device(device, what);
  return device;
}

/// The pool that allocations on device draw from: the one set, else its default (made here,
/// at most one kept however many threads race to make it).
memarea_pool_t pool_for(int device) {
  auto& ps = pools();
  const auto d = static_cast<std::size_t>(device);
  if (memarea_pool_t p = ps.set[d].load(std::memory_order_acquire)) [[likely]]
    return p;
  if (memarea_pool_t p = ps.fallback[d].load(std::memory_order_acquire)) [[likely]]
    return p;
  const unsigned flags = MEMAREA_AREA_DEFAULT;
  memarea_pool_t made = pool_create_c(&device, &flags, nullptr);
  memarea_pool_t expected = nullptr;
  if (!ps.fallback[d].compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    pool_destroy_c(made, false);  // another thread's came first; this one holds nothing
    return expected;
  }
  return made;
}

/// The stream object of native stream s of device, from a small per-thread cache: wrapping
/// asks the driver whether the stream is live (a call per allocation otherwise), and a
/// wrapped handle is valid for the life of the process, so what was found once stays right.
memarea_stream_t stream_for(void* s, int device) {
  struct entry {
    void* native;
    int device = -1;
    memarea_stream_t handle = nullptr;
  };
  thread_local std::array<entry, 4> cache{};
  thread_local unsigned next = 0;
  for (const entry& e : cache)
    if (e.handle && e.native == s && e.device == device) return e.handle;
  memarea_stream_t h = wrap_stream(s, device);
  cache[next++ % cache.size()] = entry{s, device, h};
  return h;
}

void* torch_malloc(std::ptrdiff_t size, int device, void* stream) {
  if (size < 0)
    throw error(errc::invalid_value, fmt::format("size {} is negative", size));
  if (size == 0) return nullptr;
  device = checked_device(device, "torch malloc");
  memarea_pool_t pool = pool_for(device);
  void* p = pool_alloc_c(pool, static_cast<std::size_t>(size), stream_for(stream, device));
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  auto& sh = table().of(key);
  try {
    std::lock_guard lock(sh.m);
    sh.live.insert_or_assign(key, torch_piece{pool, device, static_cast<std::size_t>(size)});
  } catch (...) {
    pool_free_c(pool, p, nullptr);  // no memory for the entry: the piece goes back at once
    throw;
  }
  return p;
}

void torch_free(void* ptr, std::ptrdiff_t size, void* stream) {
  auto& t = table();
  auto refuse = [&t](std::string message) {
    t.refused.fetch_add(1, std::memory_order_relaxed);
    throw error(errc::invalid_value, std::move(message));
  };
  if (!ptr) {
    if (size == 0) return;  // memarea_torch_malloc(0)'s NULL
    refuse(fmt::format("NULL with size {}", size));
  }
  const auto key = reinterpret_cast<std::uintptr_t>(ptr);
  auto& sh = t.of(key);
  torch_piece piece{};
  {
    std::lock_guard lock(sh.m);
    const torch_piece* found = sh.live.find(key);
    if (!found)
      refuse(fmt::format("{} was not handed out by memarea_torch_malloc, or is freed already",
                         ptr));
    if (size != 0 && static_cast<std::size_t>(size) != found->size)
      refuse(fmt::format("{} holds {} bytes, not {}", ptr, found->size, size));
    piece = *found;
    sh.live.erase(key);
  }
  memarea_stream_t s = stream_for(stream, piece.device);
  try {
    pool_free_c(piece.pool, ptr, s);
  } catch (...) {
    // Still the pool's (a free that throws changes nothing): kept, so that a retry may work.
    std::lock_guard lock(sh.m);
    sh.live.insert_or_assign(key, piece);
    throw;
  }
}

}  // namespace
}  // namespace memarea::detail

extern "C" {

void* memarea_torch_malloc(ptrdiff_t size, int device, void* stream) {
  void* p = nullptr;
  (void)c_call(__func__, [&] { p = memarea::detail::torch_malloc(size, device, stream); });
  return p;
}

void memarea_torch_free(void* ptr, ptrdiff_t size, int device, void* stream) {
  (void)device;  // the piece's own device is kept with it
  (void)c_call(__func__, [&] { memarea::detail::torch_free(ptr, size, stream); });
}

memarea_status memarea_torch_set_pool(int device, memarea_pool_t pool) {
  return c_call(__func__, [&] {
    device = memarea::detail::checked_device(device, "torch set pool");
    if (pool) {
      int pool_device = -1;
      unsigned flags = 0;
      memarea::detail::pool_area_of_c(pool, &pool_device, &flags);
      if (pool_device != device)
        throw memarea::error(memarea::errc::invalid_value,
                             fmt::format("the pool is on device {}, not {}", pool_device, device));
      if ((flags & MEMAREA_AREA_HOST) != 0 && (flags & MEMAREA_AREA_UNIFIED) == 0)
        throw memarea::error(memarea::errc::invalid_value,
                             "the pool is of pinned host memory: torch's CUDA tensors need "
                             "device or managed memory");
    }
    memarea::detail::pools().set[static_cast<std::size_t>(device)].store(
        pool, std::memory_order_release);
  });
}

memarea_status memarea_torch_get_pool(memarea_pool_t* pool, int device) {
  return c_call(__func__, [&] {
    require(pool, "pool");
    *pool = memarea::detail::pool_for(memarea::detail::checked_device(device, "torch get pool"));
  });
}

memarea_status memarea_torch_get_stats(memarea_torch_stats* stats, memarea_pool_t pool) {
  return c_call(__func__, [&] {
    require(stats, "stats");
    auto& t = memarea::detail::table();
    memarea_torch_stats out{0, 0, t.refused.load(std::memory_order_relaxed)};
    for (auto& sh : t.shards) {
      std::lock_guard lock(sh.m);
      sh.live.for_each([&](std::uintptr_t, const memarea::detail::torch_piece& piece) {
        if (pool && piece.pool != pool) return;
        ++out.live_pieces;
        out.live_bytes += piece.size;
      });
    }
    *stats = out;
  });
}

}  // extern "C"
