// Copies: every pair of memory kinds on every pair of devices, the path each one takes (driver,
// driver peer copy, memarea's pipelined staging: the testing interface's last_copy_path), odd
// sizes and offsets under small staging chunks, stream order and concurrent staged copies.
// Random data, checked byte for byte. What the public API alone shows is api/copy_test.cpp.
#include "whitebox/whitebox.hpp"

#include "core/copy/copy_impl.hpp"

#include <memarea/copy.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <optional>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace memarea;
using namespace memarea::test;
namespace mt = memarea::detail::testing;
using mt::copy_path;

namespace {

/// Sets fixed-size staging chunks for a scope (every copy of more than two chunks is
/// pipelined) and restores the previous settings.
struct staging_guard {
  staging_guard(std::size_t chunk, int buffers) : old(detail::staging()) {
    detail::staging_settings s;
    s.chunk = chunk;
    s.min_chunk = chunk;
    s.buffers = buffers;
    s.driver_up_to = 0;
    detail::set_staging(s);
  }
  explicit staging_guard(const detail::staging_settings& s) : old(detail::staging()) {
    detail::set_staging(s);
  }
  ~staging_guard() { detail::set_staging(old); }
  detail::staging_settings old;
};

/// One end of a copy: a memory kind on a device (or pageable host memory).
struct slot {
  std::string name;
  int device = -1;             ///< the device of device memory, -1 for host kinds
  bool device_memory = false;  ///< plain device memory (the kind peer paths are for)
  buffer owned;                ///< memarea allocation (empty for pageable memory)
  std::vector<unsigned char> pageable;
  unsigned char* data() {
    return owned ? static_cast<unsigned char*>(owned.data()) : pageable.data();
  }
};

/// Device, pinned, mapped and managed memory on each device, and pageable host memory.
std::vector<std::unique_ptr<slot>> every_kind(std::size_t n) {
  std::vector<std::unique_ptr<slot>> out;
  for (int d = 0; d < devices(); ++d) {
    struct kind {
      const char* name;
      unsigned flags;
    };
    for (kind k : {kind{"device", area_flags::device_only}, kind{"pinned", area_flags::host},
                   kind{"mapped", area_flags::host | area_flags::mapped},
                   kind{"managed", area_flags::unified}}) {
      if (k.flags == area_flags::unified && !has_managed(d)) continue;
      auto s = std::make_unique<slot>();
      s->name = std::string(k.name) + "@" + std::to_string(d);
      s->device = d;
      s->device_memory = k.flags == area_flags::device_only;
      s->owned = area(d, k.flags).allocate(n);
      out.push_back(std::move(s));
    }
  }
  auto s = std::make_unique<slot>();
  s->name = "pageable";
  s->pageable.assign(n, 0);
  out.push_back(std::move(s));
  return out;
}

/// Writes `bytes` at p (any kind) and reads them back through pageable memory.
void fill(void* p, const std::vector<unsigned char>& bytes) { copy(p, bytes.data(), bytes.size()); }
std::vector<unsigned char> read(const void* p, std::size_t n) {
  std::vector<unsigned char> out(n, 0);
  copy(out.data(), p, n);
  return out;
}

/// The path a copy between two slots must take.
copy_path expected_path(const slot& dst, const slot& src) {
  if (dst.device_memory && src.device_memory && dst.device != src.device)
    return peer::is_enabled(src.device, dst.device) || peer::is_enabled(dst.device, src.device)
               ? copy_path::driver_peer
               : copy_path::staged;
  return copy_path::driver;
}

}  // namespace

TEST(Copy, EveryKindPairOnEveryDevicePair) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t chunk = 4096;
  staging_guard g(chunk, 2);
  const std::size_t n = 3 * chunk + 17;
  const std::size_t src_off = 3, dst_off = 5;  // unaligned, inside the allocation
  auto slots = every_kind(n + 8);
  for (auto& src : slots) {
    for (auto& dst : slots) {
      if (src == dst) continue;
      SCOPED_TRACE(src->name + " -> " + dst->name);
      auto in = random_bytes(n);
      fill(src->data() + src_off, in);
      copy(dst->data() + dst_off, src->data() + src_off, n);
      EXPECT_EQ(mt::last_copy_path(), expected_path(*dst, *src))
          << mt::to_string(mt::last_copy_path());
      ASSERT_EQ(read(dst->data() + dst_off, n), in);
    }
  }
}

TEST(Copy, DevicePairsWithPeerAccessUseThePeerCopy) {
  MEMAREA_REQUIRE_DEVICES(2);
  staging_guard g(4096, 2);
  const std::size_t n = 5 * 4096 + 3;
  for (int a = 0; a < devices(); ++a) {
    for (int b = 0; b < devices(); ++b) {
      if (a == b || !peer::can_access(a, b)) continue;
      SCOPED_TRACE(testing::Message() << a << " -> " << b);
      buffer x = area(a).allocate(n + 1), y = area(b).allocate(n + 1);
      auto in = random_bytes(n);
      fill(static_cast<char*>(x.data()) + 1, in);
      {
        peer::scoped_access s(a, b);
        // Either direction's access gives the direct path, both ways.
        copy(y.data(), static_cast<char*>(x.data()) + 1, n);
        EXPECT_EQ(mt::last_copy_path(), copy_path::driver_peer);
        EXPECT_EQ(read(y.data(), n), in);
        auto back = random_bytes(n);
        fill(y.data(), back);
        copy_peer(x.data(), a, y.data(), b, n);
        EXPECT_EQ(mt::last_copy_path(), copy_path::driver_peer);
        EXPECT_EQ(read(x.data(), n), back);
      }
      // Access off again: staged.
      copy(y.data(), x.data(), n);
      EXPECT_EQ(mt::last_copy_path(), copy_path::staged);
      if (devices() > 4) return;  // enough pairs on large configurations
    }
  }
}

TEST(Copy, StagedSizesAndOffsets) {
  MEMAREA_REQUIRE_DEVICES(2);
  for (int buffers : {2, 3}) {
    constexpr std::size_t chunk = 1024;
    staging_guard g(chunk, buffers);
    const std::size_t max = 10 * chunk + 128;
    buffer x = area(0).allocate(max), y = area(1).allocate(max);
    for (std::size_t n : {std::size_t{1}, chunk - 1, chunk, chunk + 1, 3 * chunk + 17,
                          10 * chunk + 5}) {
      for (std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{59}}) {
        SCOPED_TRACE(testing::Message() << "n " << n << " offset " << off << " buffers "
                                        << buffers);
        auto in = random_bytes(n);
        fill(static_cast<char*>(x.data()) + off, in);
        auto before = read(y.data(), max);
        copy_peer(static_cast<char*>(y.data()) + (off + 3) % 64, 1,
                  static_cast<char*>(x.data()) + off, 0, n);
        EXPECT_EQ(mt::last_copy_path(),
                  n > 2 * chunk ? copy_path::staged : copy_path::driver_staged);
        auto after = read(y.data(), max);
        const std::size_t at = (off + 3) % 64;
        ASSERT_EQ(0, std::memcmp(after.data() + at, in.data(), n));
        // Nothing around the range was touched.
        ASSERT_EQ(0, std::memcmp(after.data(), before.data(), at));
        ASSERT_EQ(0, std::memcmp(after.data() + at + n, before.data() + at + n, max - at - n));
      }
    }
  }
}

TEST(Copy, AsyncCopiesAreOrderedOnTheirStream) {
  MEMAREA_REQUIRE_DEVICES(2);
  for (bool with_access : {false, true}) {
    staging_guard g(64 * 1024, 2);
    const std::size_t n = (1 << 20) + 333;
    if (with_access && !peer::can_access(0, 1)) continue;
    SCOPED_TRACE(with_access ? "peer access on" : "peer access off");
    std::optional<peer::scoped_access> access;
    if (with_access) access.emplace(0, 1);
    for (int stream_device : {0, 1}) {
      stream s(stream_device);
      buffer a0 = area(0).allocate(n), b0 = area(0).allocate(n), a1 = area(1).allocate(n);
      buffer out = area(0, area_flags::host).allocate(n);
      auto in = random_bytes(n), other = random_bytes(n);
      // A chain where each copy reads what the one before wrote.
      copy_async(a0.data(), in.data(), n, s);                      // host -> 0
      copy_peer_async(a1.data(), 1, a0.data(), 0, n, s);           // 0 -> 1
      copy_async(a0.data(), other.data(), n, s);                   // overwrite the source
      copy_peer_async(b0.data(), 0, a1.data(), 1, n, s);           // 1 -> 0
      copy_async(a1.data(), a0.data(), n, s);                      // 0 -> 1 (copy_async)
      copy_async(out.data(), b0.data(), n, s);                     // 0 -> pinned
      s.synchronize();
      EXPECT_EQ(0, std::memcmp(out.data(), in.data(), n)) << "stream on " << stream_device;
      EXPECT_EQ(read(a1.data(), n), other) << "stream on " << stream_device;
    }
  }
}

TEST(Copy, PeerCopyOnTheDefaultStream) {
  MEMAREA_REQUIRE_DEVICES(2);
  const std::size_t n = 3 * 4096 + 17;
  staging_guard g(4096, 2);
  buffer x = area(0).allocate(n), y = area(1).allocate(n);
  auto in = random_bytes(n);
  fill(x.data(), in);
  device_guard dg(1);
  EXPECT_STATUS(memarea_memcpy_peer_async(y.data(), 1, x.data(), 0, n, nullptr),
                MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_synchronize(nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(read(y.data(), n), in);
  auto back = random_bytes(n);
  fill(y.data(), back);
  EXPECT_STATUS(memarea_memcpy_peer(x.data(), 0, y.data(), 1, n), MEMAREA_SUCCESS);
  EXPECT_EQ(read(x.data(), n), back);
  EXPECT_EQ(get_device(), 1);
}

// copy_peer_async on a named stream goes to the driver inline: with the thread's lookups warm
// (each pointer found at the first try), it must still refuse what the checks always refused,
// write nothing, and say so with the same status and words. Peer access on and off.
TEST(Copy, PeerCopyOnANamedStreamRefusesWhatItAlwaysRefused) {
  MEMAREA_REQUIRE_DEVICES(2);
  constexpr std::size_t n = 4096;
  for (bool with_access : {false, true}) {
    if (with_access && !peer::can_access(0, 1)) continue;
    SCOPED_TRACE(with_access ? "peer access on" : "peer access off");
    std::optional<peer::scoped_access> access;
    if (with_access) access.emplace(0, 1);
    const copy_path across = with_access ? copy_path::driver_peer : copy_path::driver_staged;
    stream s(0);
    buffer x = area(0).allocate(n), x2 = area(0).allocate(n), y = area(1).allocate(n);
    auto in = random_bytes(n);
    fill(x.data(), in);
    copy_peer_async(y.data(), 1, x.data(), 0, n, s);  // warms the lookups of x and y
    s.synchronize();
    EXPECT_EQ(mt::last_copy_path(), across);
    EXPECT_EQ(read(y.data(), n), in);
    // Within one device, named as such: the driver's copy.
    copy_peer_async(x2.data(), 0, x.data(), 0, n, s);
    s.synchronize();
    EXPECT_EQ(mt::last_copy_path(), copy_path::driver);
    EXPECT_EQ(read(x2.data(), n), in);

    auto* xc = static_cast<char*>(x.data());
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, x.data(), 0, n + 1, s), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, xc + 100, 0, n - 50, s),
                         errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 0, x.data(), 0, 16, s), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, x.data(), 1, 16, s), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), devices(), x.data(), 0, 16, s),
                         errc::invalid_device);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, x.data(), -1, 16, s), errc::invalid_device);
    EXPECT_MEMAREA_ERROR(copy_peer_async(nullptr, 1, x.data(), 0, 16, s), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, nullptr, 0, 16, s), errc::invalid_value);
    EXPECT_EQ(mt::last_copy_path(), copy_path::none);
    // The C API: the same status, and why, from the refusal's own words.
    EXPECT_STATUS(memarea_memcpy_peer_async(y.data(), 0, x.data(), 0, 16, to_c(s)),
                  MEMAREA_ERROR_INVALID_VALUE);
    const std::string why = memarea_last_error_message();
    EXPECT_NE(why.find("memarea_memcpy_peer_async: copy_peer: destination"), std::string::npos)
        << why;
    EXPECT_NE(why.find("lives on device 1, not on device 0 as named"), std::string::npos) << why;
    EXPECT_STATUS(memarea_memcpy_peer_async(y.data(), 1, x.data(), devices(), 16, to_c(s)),
                  MEMAREA_ERROR_INVALID_DEVICE);
    // A source freed since the last copy, at the address the lookups remember: refused as
    // memory that is no longer device memory.
    buffer z = area(0).allocate(n);
    fill(z.data(), in);
    void* const freed = z.data();
    copy_peer_async(y.data(), 1, freed, 0, n, s);
    s.synchronize();
    z.reset();
    EXPECT_MEMAREA_ERROR(copy_peer_async(y.data(), 1, freed, 0, n, s), errc::invalid_value);
    // A destination freed likewise.
    buffer w = area(1).allocate(n);
    void* const freed_dst = w.data();
    copy_peer_async(freed_dst, 1, x.data(), 0, n, s);
    s.synchronize();
    w.reset();
    EXPECT_MEMAREA_ERROR(copy_peer_async(freed_dst, 1, x.data(), 0, n, s), errc::invalid_value);
    s.synchronize();
    // Nothing was written by the refusals.
    EXPECT_EQ(read(y.data(), n), in);
    EXPECT_EQ(read(x.data(), n), in);
  }
}

TEST(Copy, StagingSettingsAreValidated) {
  const auto old = detail::staging();
  EXPECT_MEMAREA_ERROR(detail::set_staging({0, 2}), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(detail::set_staging({4096, 1}), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(detail::set_staging({4096, 17}), errc::invalid_value);
  detail::staging_settings s;
  s.min_chunk = 0;
  EXPECT_MEMAREA_ERROR(detail::set_staging(s), errc::invalid_value);
  s = {};
  s.chunk_cost = 0;
  EXPECT_MEMAREA_ERROR(detail::set_staging(s), errc::invalid_value);

  EXPECT_EQ(detail::staging().chunk, old.chunk);
  EXPECT_EQ(detail::staging().buffers, old.buffers);
  EXPECT_EQ(detail::staging().min_chunk, old.min_chunk);
  EXPECT_EQ(detail::staging().chunk_cost, old.chunk_cost);
}

TEST(Copy, StagingBuffersThatCannotExistAreRefused) {
  // Buffers are made at the largest chunk size: settings whose buffers overflow the address
  // space make the staged copy fail cleanly, copying nothing, and the next settings work.
  MEMAREA_REQUIRE_DEVICES(2);
  if (peer::is_enabled(0, 1) || peer::is_enabled(1, 0)) GTEST_SKIP() << "peer access is on";
  const std::size_t n = 16 << 20;
  buffer a = area(0).allocate(n), b = area(1).allocate(n);
  const auto data = random_bytes(n);
  copy(a.data(), data.data(), n);
  std::vector<unsigned char> zero(n, 0);
  copy(b.data(), zero.data(), n);
  {
    detail::staging_settings s;
    s.chunk = SIZE_MAX / 2;
    staging_guard g(s);
    EXPECT_MEMAREA_ERROR(copy(b.data(), a.data(), n), errc::invalid_value);
  }
  EXPECT_EQ(read(b.data(), n), zero);
  copy(b.data(), a.data(), n);
  EXPECT_EQ(read(b.data(), n), data);
}

// The chunk rule's properties (copy_impl.hpp), for the defaults and other settings, never
// its tuned constants: a power-of-two multiple of the smallest chunk, within [smallest,
// largest]; growing with the copy size; at or below sqrt(n * chunk_cost) unless that is below
// the smallest chunk; and a copy of at most two chunks (or of at most driver_up_to bytes) goes
// to the driver's staging, anything longer to the pipeline.
TEST(Copy, StagingChunkFollowsTheCopySize) {
  constexpr std::size_t KiB = 1024;
  std::vector<detail::staging_settings> settings(4);
  settings[1].chunk = 64 * KiB, settings[1].min_chunk = 4 * KiB, settings[1].chunk_cost = KiB;
  settings[2].driver_up_to = 0;
  settings[3].min_chunk = 16 * settings[3].chunk;  // above the largest: the largest wins
  for (const auto& s : settings) {
    const std::size_t lo = std::min(s.min_chunk, s.chunk);
    SCOPED_TRACE(testing::Message() << "chunks " << lo << ".." << s.chunk << ", cost "
                                    << s.chunk_cost << ", driver up to " << s.driver_up_to);
    std::size_t last = 0;
    for (std::size_t n = 1; n < (std::size_t{1} << 40); n = n * 3 / 2 + 1) {
      const std::size_t c = s.chunk_for(n);
      ASSERT_GE(c, lo) << n;
      ASSERT_LE(c, s.chunk) << n;
      ASSERT_EQ(c % lo, 0u) << n;
      ASSERT_EQ((c / lo) & (c / lo - 1), 0u) << n << ": " << c << " is not lo times a power of 2";
      ASSERT_GE(c, last) << n << ": the chunk shrank as the copy grew";
      last = c;
      // At or below the square root (c * c <= n * cost), unless the smallest chunk is.
      if (c > lo) {
        ASSERT_LE(static_cast<double>(c) * c, static_cast<double>(n) * s.chunk_cost) << n;
      }
      // The next power of two up would pass the square root or the largest chunk.
      if (c < s.chunk) {
        ASSERT_GT(static_cast<double>(2 * c) * (2 * c), static_cast<double>(n) * s.chunk_cost)
            << n;
      }
      ASSERT_EQ(s.use_driver(n), n <= s.driver_up_to || n <= 2 * c) << n;
    }
    EXPECT_EQ(last, s.chunk) << "the largest copies use the largest chunk";
  }
}

TEST(Copy, AdaptiveStagingCopiesEveryByte) {
  // Chunks of 4 KiB to 32 KiB by copy size, through two and three buffers.
  MEMAREA_REQUIRE_DEVICES(2);
  const std::size_t cap = 1 << 20;
  buffer a = area(0).allocate(cap), b = area(1).allocate(cap);
  for (int buffers : {2, 3}) {
    detail::staging_settings s;
    s.chunk = 64 * 1024;
    s.min_chunk = 4096;
    s.chunk_cost = 1024;
    s.buffers = buffers;
    s.driver_up_to = 0;
    staging_guard g(s);
    for (std::size_t n : {std::size_t{3 * 4096 + 1}, std::size_t{40000}, std::size_t{262147},
                          cap - 5}) {
      auto data = random_bytes(n);
      copy(a.data(), data.data(), n);
      std::vector<unsigned char> zero(n, 0);
      copy(b.data(), zero.data(), n);
      copy(b.data(), a.data(), n);
      EXPECT_EQ(mt::last_copy_path(), copy_path::staged) << n;
      std::vector<unsigned char> back(n);
      copy(back.data(), b.data(), n);
      EXPECT_EQ(back, data) << n << " bytes, chunks of " << s.chunk_for(n) << ", " << buffers
                            << " buffers";
    }
  }
}

TEST(Copy, StagedCopyInAChildOfFork) {
  // The staging pool's idle streams and events belong to the parent: a child of fork() (sim;
  // CUDA and HIP are not fork-safe) must make its own instead of using them.
  MEMAREA_REQUIRE_DEVICES(2);
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  if (backend_name() != "sim") GTEST_SKIP() << "only sim survives fork() without exec";
  if (peer::is_enabled(0, 1) || peer::is_enabled(1, 0)) GTEST_SKIP() << "peer access is on";
  staging_guard g(4096, 2);
  const std::size_t n = 5 * 4096 + 9;
  buffer a = area(0).allocate(n), b = area(1).allocate(n);
  const auto data = random_bytes(n);
  copy(a.data(), data.data(), n);
  copy(b.data(), a.data(), n);  // leaves an idle stager in the pool
  ASSERT_EQ(mt::last_copy_path(), copy_path::staged);
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(300);  // a stuck child dies instead of hanging the suite (generous: CI is shared)
    int rc = 0;
    try {
      buffer c = area(1).allocate(n);
      copy(c.data(), a.data(), n);
      if (mt::last_copy_path() != copy_path::staged) rc = 2;
      std::vector<unsigned char> back(n);
      copy(back.data(), c.data(), n);
      if (rc == 0 && back != data) rc = 3;
    } catch (...) {
      rc = 4;
    }
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: not staged, 3: wrong bytes, 4: it threw";
  // The parent's pool still works.
  std::vector<unsigned char> back(n);
  copy(b.data(), a.data(), n);
  copy(back.data(), b.data(), n);
  EXPECT_EQ(back, data);
}

TEST(Copy, UnreachablePairsStillCopy) {
  MEMAREA_REQUIRE_DEVICES(2);
  staging_guard g(2048, 2);
  bool found = false;
  for (int a = 0; a < devices(); ++a) {
    for (int b = 0; b < devices(); ++b) {
      if (a == b || peer::can_access(a, b) || peer::can_access(b, a)) continue;
      found = true;
      SCOPED_TRACE(testing::Message() << a << " -> " << b);
      EXPECT_MEMAREA_ERROR(peer::enable(a, b), errc::peer_access_unsupported);
      const std::size_t n = 7 * 2048 + 1;
      buffer x = area(a).allocate(n), y = area(b).allocate(n);
      auto in = random_bytes(n);
      fill(x.data(), in);
      EXPECT_STATUS(memarea_memcpy_peer(y.data(), b, x.data(), a, n), MEMAREA_SUCCESS);
      EXPECT_EQ(mt::last_copy_path(), copy_path::staged);
      EXPECT_EQ(read(y.data(), n), in);
    }
  }
  if (!found) GTEST_SKIP() << "every pair is reachable";
}

TEST(Copy, StagedCopiesConcurrently) {
  MEMAREA_REQUIRE_DEVICES(2);
  staging_guard g(8192, 2);
  std::atomic<int> bad{0};
  auto worker = [&](int seed) {
    const std::size_t n = 9 * 8192 + static_cast<std::size_t>(seed);
    buffer x = area(seed % 2).allocate(n), y = area((seed + 1) % 2).allocate(n);
    stream s((seed + 1) % 2);
    for (int i = 0; i < 20; ++i) {
      auto in = random_bytes(n);
      std::vector<unsigned char> out(n, 0);
      copy_async(x.data(), in.data(), n, s);
      copy_async(y.data(), x.data(), n, s);
      copy_async(out.data(), y.data(), n, s);
      s.synchronize();
      if (out != in) ++bad;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Copy, BackToBackStagedCopiesReuseTheSlotsInOrder) {
  // Copies queued one after another on one stream share the pair's pinned slots: the later
  // copy's device->host halves must wait until the earlier one's host->device halves have
  // drained each slot, and the caller's stream must see each copy whole. Chunks of 4 KiB in a
  // block of two 16 KiB buffers: 8 slots, each reused several times per copy and across copies.
  MEMAREA_REQUIRE_DEVICES(2);
  detail::staging_settings s;
  s.chunk = 16 * 1024;
  s.min_chunk = 4096;
  s.chunk_cost = 64;  // always the smallest chunk
  s.buffers = 2;
  s.driver_up_to = 0;
  staging_guard g(s);
  constexpr int copies = 6;
  const std::size_t n = 23 * 4096 + 5;
  for (int stream_device : {0, 1}) {
    SCOPED_TRACE(testing::Message() << "stream on device " << stream_device);
    stream st(stream_device);
    std::vector<buffer> src, dst;
    std::vector<std::vector<unsigned char>> in;
    for (int i = 0; i < copies; ++i) {
      src.push_back(area(0).allocate(n));
      dst.push_back(area(1).allocate(n));
      in.push_back(random_bytes(n));
      fill(src.back().data(), in.back());
    }
    std::vector<std::vector<unsigned char>> out(copies, std::vector<unsigned char>(n, 0));
    for (int i = 0; i < copies; ++i) {
      copy_peer_async(dst[i].data(), 1, src[i].data(), 0, n, st);
      ASSERT_EQ(mt::last_copy_path(), copy_path::staged);
      // Overwrite the source at once: only correct if the stream waited for the whole copy.
      copy_async(src[i].data(), in[(i + 1) % copies].data(), n, st);
      copy_async(out[i].data(), dst[i].data(), n, st);
    }
    st.synchronize();
    for (int i = 0; i < copies; ++i) {
      EXPECT_EQ(out[i], in[i]) << "copy " << i;
      EXPECT_EQ(read(src[i].data(), n), in[(i + 1) % copies]) << "copy " << i;
    }
  }
}

// Copies look their pointers up in a per-thread cache of the registry (core/registry.hpp). A
// host range registered, copied through, unregistered and registered again with other sizes
// sits at one address throughout: every copy must see the registration as it is now.
TEST(Copy, LookupsSeeAFreeAndAReRegistrationAtTheSameAddress) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t page = 4096;
  host_block h(4 * page);
  buffer dev = area(0).allocate(4 * page);
  const area registered(0, area_flags::mapped);
  auto* hp = static_cast<unsigned char*>(h.ptr);
  auto in = random_bytes(4 * page);
  std::memcpy(hp, in.data(), in.size());
  {
    buffer r = registered.allocate(2 * page, {0, h.ptr});
    ASSERT_EQ(r.data(), h.ptr);
    copy(dev.data(), hp, 2 * page);  // fills the cache with both ends
    EXPECT_EQ(mt::last_copy_path(), copy_path::driver);
    EXPECT_MEMAREA_ERROR(copy(dev.data(), hp, 3 * page), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy_async(hp + page, dev.data(), 2 * page, stream_view{}),
                         errc::invalid_value);
  }
  // Unregistered: pageable memory now, which copies of any length within it may use.
  copy(dev.data(), hp, 3 * page);
  EXPECT_EQ(mt::last_copy_path(), copy_path::driver);
  EXPECT_EQ(read(dev.data(), 3 * page),
            std::vector<unsigned char>(in.begin(), in.begin() + 3 * page));
  {
    buffer r = registered.allocate(4 * page, {0, h.ptr});
    ASSERT_EQ(r.data(), h.ptr);
    copy(dev.data(), hp, 4 * page);
    EXPECT_EQ(read(dev.data(), 4 * page), in);
  }
  {
    buffer r = registered.allocate(page, {0, h.ptr});
    ASSERT_EQ(r.data(), h.ptr);
    EXPECT_MEMAREA_ERROR(copy(dev.data(), hp, 2 * page), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(copy(hp, dev.data(), 2 * page), errc::invalid_value);
    copy(hp, dev.data(), page);
    EXPECT_EQ(mt::last_copy_path(), copy_path::driver);
  }
}

// The same for device memory: a copy that fills the cache, then a free, then an allocation of
// another size on the other device (a driver may hand out the same address again, and if it
// does, the copy must follow the new allocation's device and refuse past its new end).
TEST(Copy, LookupsSeeDeviceMemoryFreedAndAllocatedAgain) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int other = devices() > 1 ? 1 : 0;
  constexpr std::size_t n = 64 * 1024;
  std::vector<unsigned char> host(2 * n, 0);
  buffer z = area(0).allocate(n);
  const bool access = other != 0 && (peer::is_enabled(0, other) || peer::is_enabled(other, 0));
  const copy_path across = other == 0 ? copy_path::driver
                           : access   ? copy_path::driver_peer
                                      : copy_path::driver_staged;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(round);
    {
      buffer x = area(0).allocate(2 * n);
      copy(x.data(), host.data(), 2 * n);
    }
    buffer y = area(other).allocate(n);
    auto in = random_bytes(n);
    copy(y.data(), in.data(), n);
    EXPECT_EQ(read(y.data(), n), in);
    EXPECT_MEMAREA_ERROR(copy(y.data(), host.data(), 2 * n), errc::invalid_value);
    EXPECT_EQ(lookup(y.data()).device, other);
    // The path follows y's device, not the device of what was at its address before.
    copy(z.data(), y.data(), n);
    EXPECT_EQ(mt::last_copy_path(), across);
    EXPECT_EQ(read(z.data(), n), in);
  }
}
