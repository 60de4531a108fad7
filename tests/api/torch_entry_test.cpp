// The allocator pair for PyTorch (memarea/torch.h), called as torch.cuda.memory.
// CUDAPluggableAllocator calls it: both functions looked up by name in the loaded libmemarea
// (dlopen of its path, dlsym) and called through pointers of exactly the pluggable types
// (ssize_t sizes, an opaque cudaStream_t). Sizes 0 to 12 MiB with their bytes checked, frees
// on other threads and other streams, refused frees, the pool per device, many threads.
#include "common.hpp"
#include "foreign_stream.hpp"

#include <memarea/torch.h>

#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

using namespace memarea;
using memarea::test::devices;
using memarea::test::foreign_stream;
using memarea::test::random_bytes;

namespace {

struct CUstream_st;
using cudaStream_t = CUstream_st*;  // as cuda_runtime_api.h declares it
/// torch/csrc/cuda/CUDAPluggableAllocator.h's MallocFuncType and FreeFuncType.
using malloc_fn = void* (*)(ssize_t size, int device, cudaStream_t stream);
using free_fn = void (*)(void* ptr, ssize_t size, int device, cudaStream_t stream);

/// The pair as a framework finds it: the loaded libmemarea opened by its path, by name.
struct pluggable {
  malloc_fn alloc = nullptr;
  free_fn free = nullptr;
  void* lib = nullptr;
  pluggable() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&memarea_pool_create), &info) || !info.dli_fname) return;
    lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    alloc = reinterpret_cast<malloc_fn>(dlsym(lib, "memarea_torch_malloc"));
    free = reinterpret_cast<free_fn>(dlsym(lib, "memarea_torch_free"));
  }
  ~pluggable() {
    if (lib) dlclose(lib);
  }
};

cudaStream_t as_cuda(void* native) { return static_cast<cudaStream_t>(native); }

memarea_torch_stats torch_stats(memarea_pool_t pool = nullptr) {
  memarea_torch_stats s{};
  EXPECT_EQ(memarea_torch_get_stats(&s, pool), MEMAREA_SUCCESS) << memarea_last_error_message();
  return s;
}

/// Random bytes written to [p, p+n) and read back on stream s, compared byte for byte.
bool round_trips_on(void* p, std::size_t n, stream_view s) {
  const auto bytes = random_bytes(n);
  std::vector<unsigned char> back(n, 0);
  copy_async(p, bytes.data(), n, s);
  copy_async(back.data(), p, n, s);
  s.synchronize();
  return std::memcmp(back.data(), bytes.data(), n) == 0;
}

}  // namespace

TEST(TorchAllocator, FoundByNameWithThePluggableSignatures) {
  pluggable t;
  ASSERT_NE(t.lib, nullptr) << dlerror();
  EXPECT_NE(t.alloc, nullptr);
  EXPECT_NE(t.free, nullptr);
}

TEST(TorchAllocator, NeedsADevice) {
  if (devices() > 0) GTEST_SKIP() << "the backend has devices";
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  EXPECT_EQ(t.alloc(256, 0, nullptr), nullptr);
  EXPECT_NE(std::string(memarea_last_error_message()).find("memarea_torch_malloc"),
            std::string::npos)
      << memarea_last_error_message();
  memarea_pool_t p = nullptr;
  EXPECT_STATUS(memarea_torch_get_pool(&p, 0), MEMAREA_ERROR_NO_DEVICE);
}

// Every size, on a stream made outside memarea and on the default stream: each piece is memarea
// memory (lookup answers it), holds what is written, and goes back; size 0 is NULL, no error.
TEST(TorchAllocator, ManySizesHoldTheirBytes) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  const std::size_t sizes[] = {1,      3,         255,       256,     257,      4095,    4096,
                               65537,  1u << 20,  (4u << 20) - 1, 4u << 20, 12u << 20};
  const auto before = torch_stats();
  for (void* native : {fs.native(), static_cast<void*>(nullptr)}) {
    const stream_view s = stream_view::wrap(native, 0);
    EXPECT_EQ(t.alloc(0, 0, as_cuda(native)), nullptr);
    std::vector<void*> live;
    for (std::size_t n : sizes) {
      void* p = t.alloc(static_cast<ssize_t>(n), 0, as_cuda(native));
      ASSERT_NE(p, nullptr) << n << ": " << memarea_last_error_message();
      const allocation_info info = lookup(p);
      EXPECT_EQ(info.base, p);
      EXPECT_EQ(info.size, n);
      EXPECT_EQ(info.device, 0);
      EXPECT_TRUE(round_trips_on(p, n, s)) << n;
      live.push_back(p);
    }
    EXPECT_EQ(torch_stats().live_pieces, before.live_pieces + std::size(sizes));
    for (std::size_t i = 0; i < live.size(); ++i)
      t.free(live[i], static_cast<ssize_t>(sizes[i]), 0, as_cuda(native));
    t.free(nullptr, 0, 0, as_cuda(native));  // what alloc(0) gave
  }
  const auto after = torch_stats();
  EXPECT_EQ(after.live_pieces, before.live_pieces);
  EXPECT_EQ(after.refused_frees, before.refused_frees);
}

// A piece made on one stream and thread, freed on another thread and another stream (after
// the first stream's work, as a framework hands a tensor over), and made again from there.
TEST(TorchAllocator, FreesOnAnotherThreadAndStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  foreign_stream a(0), b(0);
  REQUIRE_FOREIGN(a);
  REQUIRE_FOREIGN(b);
  const auto before = torch_stats();
  std::vector<std::pair<void*, ssize_t>> made;
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = 512 + 4093 * i;
    void* p = t.alloc(n, 0, as_cuda(a.native()));
    ASSERT_NE(p, nullptr) << memarea_last_error_message();
    EXPECT_TRUE(round_trips_on(p, static_cast<std::size_t>(n), a.view()));
    made.emplace_back(p, n);
  }
  a.view().synchronize();
  std::thread other([&] {
    for (auto [p, n] : made) t.free(p, n, 0, as_cuda(b.native()));
    // The freeing thread's stream reuses at once what it freed.
    void* again = t.alloc(made[0].second, 0, as_cuda(b.native()));
    EXPECT_NE(again, nullptr) << memarea_last_error_message();
    EXPECT_TRUE(round_trips_on(again, static_cast<std::size_t>(made[0].second), b.view()));
    t.free(again, made[0].second, 0, as_cuda(b.native()));
  });
  other.join();
  const auto after = torch_stats();
  EXPECT_EQ(after.live_pieces, before.live_pieces);
  EXPECT_EQ(after.refused_frees, before.refused_frees);
}

// Frees of what the pair did not hand out are refused, change nothing, and never crash.
TEST(TorchAllocator, RefusesUnknownFrees) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  const auto before = torch_stats();
  auto expect_refused = [&](void* p, ssize_t n, std::size_t count) {
    memarea_set_last_error(MEMAREA_SUCCESS, "");
    t.free(p, n, 0, nullptr);
    EXPECT_NE(std::string(memarea_last_error_message()).find("memarea_torch_free"),
              std::string::npos)
        << memarea_last_error_message();
    EXPECT_EQ(torch_stats().refused_frees, before.refused_frees + count);
  };
  int local = 0;
  expect_refused(&local, sizeof local, 1);      // host memory
  expect_refused(nullptr, 64, 2);                // NULL with a size
  pool p(area(0));
  void* pooled = p.allocate(4096);                // memarea memory, but not the pair's
  expect_refused(pooled, 4096, 3);
  EXPECT_EQ(p.stats().live_allocations, 1u);     // still allocated
  p.deallocate(pooled);
  void* mine = t.alloc(1000, 0, nullptr);
  ASSERT_NE(mine, nullptr);
  expect_refused(mine, 999, 4);                  // another size than allocated: still live
  EXPECT_EQ(torch_stats().live_pieces, before.live_pieces + 1);
  EXPECT_TRUE(test::round_trips(mine, 1000));
  t.free(mine, 0, 0, nullptr);                   // 0: any size
  expect_refused(mine, 1000, 5);                 // twice
  EXPECT_EQ(torch_stats().live_pieces, before.live_pieces);
}

// Thousands of pieces live at once (the table of pieces grows many times over), then freed in
// a scrambled order with their sizes checked: every one is still found, a wrong size is still
// refused, and the counts come back to where they were.
TEST(TorchAllocator, ThousandsLiveAtOnceFreedInAnyOrder) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  const auto before = torch_stats();
  constexpr std::size_t kPieces = 5000;
  std::vector<std::pair<void*, ssize_t>> live;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < kPieces; ++i) {
    const ssize_t n = 256 + static_cast<ssize_t>((i * 7919) % 4096);
    void* p = t.alloc(n, 0, nullptr);
    ASSERT_NE(p, nullptr) << memarea_last_error_message();
    live.emplace_back(p, n);
    bytes += static_cast<std::size_t>(n);
  }
  auto now = torch_stats();
  EXPECT_EQ(now.live_pieces, before.live_pieces + kPieces);
  EXPECT_EQ(now.live_bytes, before.live_bytes + bytes);
  for (std::size_t i = 0; i < kPieces; ++i)
    std::swap(live[i], live[(i * 2654435761u) % kPieces]);
  for (std::size_t i = 0; i < kPieces; ++i) {
    if (i % 1000 == 0) {  // a wrong size is refused and the piece stays
      t.free(live[i].first, live[i].second + 1, 0, nullptr);
      EXPECT_EQ(torch_stats().live_pieces, before.live_pieces + kPieces - i);
    }
    t.free(live[i].first, live[i].second, 0, nullptr);
  }
  now = torch_stats();
  EXPECT_EQ(now.live_pieces, before.live_pieces);
  EXPECT_EQ(now.live_bytes, before.live_bytes);
  EXPECT_EQ(now.refused_frees, before.refused_frees + kPieces / 1000);
}

// The pool per device: a set pool serves the device until unset, its pieces go back to it
// whichever pool is set when they are freed, and only a pool of that device's memory is taken.
TEST(TorchAllocator, DrawsFromThePoolSetForTheDevice) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  memarea_pool_t fallback = nullptr;
  ASSERT_EQ(memarea_torch_get_pool(&fallback, 0), MEMAREA_SUCCESS);
  ASSERT_NE(fallback, nullptr);
  memarea_pool_t again = nullptr;
  ASSERT_EQ(memarea_torch_get_pool(&again, -1), MEMAREA_SUCCESS);  // device 0 is current
  EXPECT_EQ(again, fallback);

  pool mine(area(0));
  memarea_pool_t h = to_c(mine);
  ASSERT_EQ(memarea_torch_set_pool(0, h), MEMAREA_SUCCESS) << memarea_last_error_message();
  ASSERT_EQ(memarea_torch_get_pool(&again, 0), MEMAREA_SUCCESS);
  EXPECT_EQ(again, h);
  void* x = t.alloc(70000, 0, nullptr);
  ASSERT_NE(x, nullptr) << memarea_last_error_message();
  EXPECT_EQ(mine.stats().live_allocations, 1u);
  EXPECT_EQ(torch_stats(h).live_pieces, 1u);
  EXPECT_EQ(torch_stats(h).live_bytes, 70000u);

  ASSERT_EQ(memarea_torch_set_pool(0, nullptr), MEMAREA_SUCCESS);  // back to the default
  ASSERT_EQ(memarea_torch_get_pool(&again, 0), MEMAREA_SUCCESS);
  EXPECT_EQ(again, fallback);
  void* y = t.alloc(512, 0, nullptr);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(mine.stats().live_allocations, 1u);  // y came from the default pool
  t.free(x, 70000, 0, nullptr);                  // x goes back to its own pool
  EXPECT_EQ(mine.stats().live_allocations, 0u);
  EXPECT_EQ(torch_stats(h).live_pieces, 0u);
  t.free(y, 512, 0, nullptr);
  mine.destroy();  // nothing of it is live: not busy

  EXPECT_STATUS(memarea_torch_set_pool(devices(), nullptr), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_STATUS(memarea_torch_get_pool(nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_torch_get_stats(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  pool host = pool::host();
  EXPECT_STATUS(memarea_torch_set_pool(0, to_c(host)), MEMAREA_ERROR_INVALID_VALUE);
  pool pinned(area(0, area_flags::host));
  EXPECT_STATUS(memarea_torch_set_pool(0, to_c(pinned)), MEMAREA_ERROR_INVALID_VALUE);
  if (devices() >= 2) {
    pool other(area(1));
    EXPECT_STATUS(memarea_torch_set_pool(0, to_c(other)), MEMAREA_ERROR_INVALID_VALUE);
    ASSERT_EQ(memarea_torch_set_pool(1, to_c(other)), MEMAREA_SUCCESS);
    void* z = t.alloc(4096, 1, nullptr);
    ASSERT_NE(z, nullptr) << memarea_last_error_message();
    EXPECT_EQ(lookup(z).device, 1);
    EXPECT_EQ(other.stats().live_allocations, 1u);
    ASSERT_EQ(memarea_torch_set_pool(1, nullptr), MEMAREA_SUCCESS);
    t.free(z, 4096, 1, nullptr);
    EXPECT_EQ(other.stats().live_allocations, 0u);
  }
  EXPECT_EQ(t.alloc(-1, 0, nullptr), nullptr);
  EXPECT_EQ(t.alloc(16, devices(), nullptr), nullptr);
}

// Threads allocate, hand their pieces to others through a shared list, and free theirs.
TEST(TorchAllocator, ManyThreads) {
  MEMAREA_REQUIRE_DEVICES(1);
  pluggable t;
  ASSERT_NE(t.alloc, nullptr);
  const auto before = torch_stats();
  std::mutex m;
  std::vector<std::pair<void*, ssize_t>> shared;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i) {
        const ssize_t n = 256 + (i * 7919 + w * 104729) % 300000;
        void* p = t.alloc(n, 0, nullptr);
        if (!p) {
          ++failures;
          continue;
        }
        std::pair<void*, ssize_t> give{p, n};
        {
          std::lock_guard g(m);
          shared.push_back(give);
          if (shared.size() < 64) continue;
          give = shared.front();
          shared.erase(shared.begin());
        }
        t.free(give.first, give.second, 0, nullptr);
      }
    });
  for (auto& th : threads) th.join();
  for (auto [p, n] : shared) t.free(p, n, 0, nullptr);
  EXPECT_EQ(failures.load(), 0);
  const auto after = torch_stats();
  EXPECT_EQ(after.live_pieces, before.live_pieces);
  EXPECT_EQ(after.refused_frees, before.refused_frees);
}
