// Streams made outside memarea (stream_view::wrap, memarea_stream_wrap): validation, identity,
// every stream-ordered call queued on one, the default streams, forgetting one, stale handles.
#include "common.hpp"
#include "foreign_stream.hpp"

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using namespace memarea;
using memarea::test::devices;
using memarea::test::foreign_stream;
using memarea::test::on_sim;
using memarea::test::random_bytes;

namespace {

/// Host -> device -> host through copies queued on s, checked byte for byte.
void round_trip(stream_view s, int device, std::size_t n) {
  const auto bytes = random_bytes(n);
  std::vector<unsigned char> back(n, 0);
  buffer d = area(device).allocate(n);
  copy_async(d.data(), bytes.data(), n, s);
  copy_async(back.data(), d.data(), n, s);
  s.synchronize();
  EXPECT_EQ(std::memcmp(back.data(), bytes.data(), n), 0);
}

}  // namespace

TEST(StreamWrap, NeedsADevice) {
  if (devices() > 0) GTEST_SKIP() << "the backend has devices";
  memarea_stream_t s = nullptr;
  EXPECT_STATUS(memarea_stream_wrap(&s, nullptr, 0), MEMAREA_ERROR_NO_DEVICE);
  EXPECT_MEMAREA_ERROR(stream_view::wrap(nullptr, 0), errc::no_device);
  EXPECT_MEMAREA_ERROR(stream_view::per_thread(0), errc::no_device);
  memarea_event_t e = nullptr;
  EXPECT_STATUS(memarea_event_create(&e, MEMAREA_EVENT_DEFAULT), MEMAREA_ERROR_NO_DEVICE);
  EXPECT_MEMAREA_ERROR(event ev(0), errc::no_device);
}

TEST(StreamWrap, RefusesBadArguments) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_stream_t s = nullptr;
  EXPECT_STATUS(memarea_stream_wrap(nullptr, nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_stream_wrap(&s, nullptr, devices()), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_STATUS(memarea_stream_wrap(&s, nullptr, -5), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(s, nullptr);
  EXPECT_MEMAREA_ERROR(stream_view::wrap(nullptr, devices()), errc::invalid_device);
  void* out = &s;
  EXPECT_STATUS(memarea_stream_get_native(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_stream_get_native(&out, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(out, nullptr);
  // Garbage: the sim and HIP know their live streams; CUDA's cuStreamGetCtx may crash on one.
  if (on_sim() || backend_name() == "hip") {
    int not_a_stream = 0;
    EXPECT_STATUS(memarea_stream_wrap(&s, &not_a_stream, 0), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_MEMAREA_ERROR(stream_view::wrap(&not_a_stream, 0), errc::invalid_value);
  }
}

// A stream of device 1 wrapped as device 0's: the driver says whose it is.
TEST(StreamWrap, RefusesAStreamOfAnotherDevice) {
  MEMAREA_REQUIRE_DEVICES(2);
  foreign_stream fs(1);
  REQUIRE_FOREIGN(fs);
  memarea_stream_t s = nullptr;
  const memarea_status st = memarea_stream_wrap(&s, fs.native(), 0);
  if (backend_name() == "hip" && st == MEMAREA_SUCCESS)
    GTEST_SKIP() << "this HIP runtime cannot say a stream's device (no hipStreamGetDevice)";
  EXPECT_EQ(st, MEMAREA_ERROR_INVALID_VALUE) << memarea_last_error_message();
  EXPECT_NE(std::string(memarea_last_error_message()).find("device 1"), std::string::npos)
      << memarea_last_error_message();
  EXPECT_EQ(fs.view().device(), 1);
}

// One native stream, one handle: wrapping again gives the same handle, and views compare equal
// by the native stream, a memarea stream's own included.
TEST(StreamWrap, OneNativeStreamIsOneStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  memarea_stream_t a = nullptr, b = nullptr;
  EXPECT_STATUS(memarea_stream_wrap(&a, fs.native(), 0), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_wrap(&b, fs.native(), -1), MEMAREA_SUCCESS);  // current: 0
  EXPECT_EQ(a, b);
  void* native = nullptr;
  EXPECT_STATUS(memarea_stream_get_native(&native, a), MEMAREA_SUCCESS);
  EXPECT_EQ(native, fs.native());
  const stream_view v = fs.view();
  EXPECT_TRUE(v.is_wrapped());
  EXPECT_FALSE(v.is_default());
  EXPECT_EQ(v.device(), 0);
  EXPECT_EQ(v.native_handle(), fs.native());
  EXPECT_EQ(v, from_c(a));
  EXPECT_EQ(to_c(v), a);

  stream own(0);
  EXPECT_FALSE(stream_view(own).is_wrapped());
  EXPECT_EQ(stream_view::wrap(own.native_handle(), 0), stream_view(own));
  EXPECT_NE(stream_view(own), v);
  EXPECT_NE(stream_view(own), stream_view());
  // The legacy default stream: NULL and CU_STREAM_LEGACY name it; the view names its device.
  const stream_view legacy = stream_view::wrap(nullptr, 0);
  EXPECT_EQ(stream_view::wrap(MEMAREA_STREAM_LEGACY, 0), legacy);
  EXPECT_FALSE(legacy.is_default());
  EXPECT_EQ(legacy.native_handle(), nullptr);
  EXPECT_EQ(legacy.device(), 0);
  EXPECT_NE(legacy, stream_view());
  EXPECT_EQ(stream_view::per_thread(0).native_handle(), MEMAREA_STREAM_PER_THREAD);
  EXPECT_EQ(stream_view::wrap(MEMAREA_STREAM_PER_THREAD, 0), stream_view::per_thread(0));
  EXPECT_NE(stream_view::per_thread(0), legacy);
}

// memarea never destroys a native stream it did not make.
TEST(StreamWrap, DestroyingAWrappedStreamIsRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  memarea_stream_t s = nullptr;
  ASSERT_EQ(memarea_stream_wrap(&s, fs.native(), 0), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_destroy(s), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("wrapped"), std::string::npos);
  memarea_stream_t legacy = nullptr, per_thread = nullptr;
  ASSERT_EQ(memarea_stream_wrap(&legacy, nullptr, 0), MEMAREA_SUCCESS);
  ASSERT_EQ(memarea_stream_wrap(&per_thread, MEMAREA_STREAM_PER_THREAD, 0), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_destroy(legacy), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_stream_destroy(per_thread), MEMAREA_ERROR_INVALID_VALUE);
  round_trip(from_c(s), 0, 4096);  // still works
}

// Every stream-ordered call queues on the native stream: copies (C and C++), memset, 2D copies,
// peer copies, on a foreign stream and on the three default streams.
TEST(StreamWrap, EveryCopyQueuesOnTheNativeStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fs(devices() - 1);
  REQUIRE_FOREIGN(fs);
  const int d = fs.device();
  for (stream_view s : {fs.view(), stream_view::wrap(nullptr, d), stream_view::per_thread(d),
                        stream_view::wrap(MEMAREA_STREAM_LEGACY, d)}) {
    SCOPED_TRACE(s.native_handle());
    round_trip(s, d, (1 << 20) + 13);

    const std::size_t n = 1 << 16;
    const auto bytes = random_bytes(n);
    std::vector<unsigned char> back(n, 0);
    buffer dev = area(d).allocate(n);
    memarea_stream_t c = to_c(s);
    EXPECT_STATUS(memarea_memcpy_async(dev.data(), bytes.data(), n, c), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_memset_async(static_cast<char*>(dev.data()) + 100, 0xab, 50, 1, c),
                  MEMAREA_SUCCESS);
    // 2D: rows 0-3 of 64 bytes, pitch 256, into the tail of the buffer.
    EXPECT_STATUS(memarea_memcpy_2d_async(static_cast<char*>(dev.data()) + n / 2, 256,
                                          bytes.data(), 256, 64, 4, c),
                  MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_memcpy_async(back.data(), dev.data(), n, c), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_stream_synchronize(c), MEMAREA_SUCCESS);
    std::vector<unsigned char> want = bytes;
    std::memset(want.data() + 100, 0xab, 50);
    for (std::size_t row = 0; row < 4; ++row)
      std::memcpy(want.data() + n / 2 + row * 256, bytes.data() + row * 256, 64);
    EXPECT_EQ(std::memcmp(back.data(), want.data(), n), 0);
  }
  if (devices() >= 2) {
    // A peer copy (device 0 -> device 1) queued on a wrapped stream of device 0.
    foreign_stream on0(0);
    const std::size_t n = (1 << 20) + 7;
    const auto bytes = random_bytes(n);
    std::vector<unsigned char> back(n, 0);
    buffer a = area(0).allocate(n), b = area(1).allocate(n);
    copy_async(a.data(), bytes.data(), n, on0.view());
    copy_async(b.data(), a.data(), n, on0.view());
    copy_async(back.data(), b.data(), n, on0.view());
    on0.view().synchronize();
    EXPECT_EQ(std::memcmp(back.data(), bytes.data(), n), 0);
  }
}

// Managed memory's stream-ordered calls take a wrapped stream too.
TEST(StreamWrap, PrefetchAndAttachOnAWrappedStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (!memarea::test::has_managed(0)) GTEST_SKIP() << "no managed memory";
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  const std::size_t n = 1 << 16;
  managed::managed_buffer m(n);
  managed::attach(fs.view(), m.data(), 0, managed::attach_flags::single);
  managed::prefetch(m.data(), n, managed::location::device(0), fs.view());
  managed::prefetch(m.data(), n, managed::location::device(0), stream_view::per_thread(0));
  EXPECT_STATUS(memarea_mem_prefetch_async(m.data(), n, 0, to_c(fs.view())), MEMAREA_SUCCESS);
  fs.view().synchronize();
  managed::attach(fs.view(), m.data(), 0, managed::attach_flags::global);
}

// A pool takes two wraps of one native stream for one stream: what is freed on one is reused
// by the other at once, as on one stream.
TEST(StreamWrap, PoolsTakeTwoWrapsForOneStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  memarea_stream_t a = nullptr, b = nullptr;
  ASSERT_EQ(memarea_stream_wrap(&a, fs.native(), 0), MEMAREA_SUCCESS);
  ASSERT_EQ(memarea_stream_wrap(&b, fs.native(), 0), MEMAREA_SUCCESS);
  pool p{area(0)};
  void* x = p.allocate(1000, from_c(a));
  p.deallocate(x, from_c(a));
  void* y = p.allocate(1000, from_c(b));
  EXPECT_EQ(x, y);
  p.deallocate(y, fs.view());
  fs.view().synchronize();
  if (on_sim()) {
    // A pool of one block, all of it freed on the foreign stream while the stream is held
    // back: the other wrap gets it at once, another stream not until the stream passed the
    // free.
    const std::size_t block = std::size_t{2} << 20;
    pool_options o;
    o.maximum_size = block;
    pool one{area(0), o};
    void* z = one.allocate(block, from_c(a));
    sim::stream_gate gate(fs.view());
    one.deallocate(z, from_c(a));
    void* again = one.allocate(block, from_c(b));
    EXPECT_EQ(again, z);
    one.deallocate(again, from_c(b));
    stream other(0);
    EXPECT_MEMAREA_ERROR((void)one.allocate(block, other), errc::out_of_memory);
    gate.open();
    fs.view().synchronize();
    void* w = one.allocate(block, other);
    EXPECT_EQ(w, z);
    one.deallocate(w, other);
  }
}

// Before its owner destroys it, forget_stream makes the pools forget a foreign stream; a stale
// handle is refused where the driver can tell (the sim always can).
TEST(StreamWrap, ForgetThenDestroy) {
  MEMAREA_REQUIRE_DEVICES(1);
  auto fs = std::make_unique<foreign_stream>(0);
  REQUIRE_FOREIGN(*fs);
  const stream_view v = fs->view();
  pool p{area(0)};
  void* x = p.allocate(4096, v);
  memset_async(x, 7, 4096, 1, v);
  p.deallocate(x, v);
  EXPECT_STATUS(memarea_stream_forget(to_c(v)), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_forget(nullptr), MEMAREA_SUCCESS);
  forget_stream(stream_view::wrap(nullptr, 0));  // a default stream: nothing
  // Forgotten, what was freed on it is every stream's: another stream may take it.
  stream other(0);
  void* y = p.allocate(4096, other);
  p.deallocate(y, other);
  void* native = fs->native();
  fs.reset();  // forgets, then destroys the native stream
  if (on_sim()) {
    char buf[16] = {};
    buffer live = area(0).allocate(sizeof buf);
    EXPECT_MEMAREA_ERROR(copy_async(live.data(), buf, sizeof buf, v), errc::invalid_value);
    memarea_stream_t s = nullptr;
    EXPECT_STATUS(memarea_stream_wrap(&s, native, 0), MEMAREA_ERROR_INVALID_VALUE);
  }
}

// The per-thread default stream is a stream per thread: pieces freed on it wait for the
// freeing thread's stream, not any other's, before another thread's allocation gets them.
TEST(StreamWrap, PerThreadStreamInPools) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p{area(0)};
  const stream_view pts = stream_view::per_thread(0);
  const std::size_t n = 1 << 16;
  const auto bytes = random_bytes(n);
  std::vector<unsigned char> back(n, 0);
  void* x = p.allocate(n, pts);
  copy_async(x, bytes.data(), n, pts);
  copy_async(back.data(), x, n, pts);
  p.deallocate(x, pts);
  pts.synchronize();
  EXPECT_EQ(std::memcmp(back.data(), bytes.data(), n), 0);
  if (on_sim()) {
    // This thread's stream held back: the piece freed on it stays out of reach, for another
    // thread's per-thread stream and for this thread's own stream alike.
    sim::stream_gate gate(pts);
    void* y = p.allocate(n, pts);
    p.deallocate(y, pts);
    void* from_other = nullptr;
    std::thread([&] { from_other = p.allocate(n, stream_view::per_thread(0)); }).join();
    EXPECT_NE(from_other, y);
    void* again = p.allocate(n, pts);
    EXPECT_NE(again, y);
    EXPECT_EQ(p.stats().live_allocations, 2u);
    gate.open();
    pts.synchronize();
    p.deallocate(again, pts);
    p.deallocate(from_other, stream_view::per_thread(0));
  }
  pts.synchronize();
  p.trim();
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
}

// Whether a stream's work is done, asked without waiting (cudaStreamQuery).
TEST(StreamWrap, Query) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fs(0);
  REQUIRE_FOREIGN(fs);
  const stream_view v = fs.view();
  v.synchronize();
  EXPECT_TRUE(v.query());
  EXPECT_STATUS(memarea_stream_query(to_c(v)), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_query(nullptr), MEMAREA_SUCCESS);
  if (on_sim()) {
    sim::stream_gate gate(v);
    EXPECT_FALSE(v.query());
    EXPECT_STATUS(memarea_stream_query(to_c(v)), MEMAREA_ERROR_BUSY);
    gate.open();
    v.synchronize();
    EXPECT_TRUE(v.query());
  }
}

// A device reset drops the device's streams and a pool's events: the default streams (the
// per-thread ones included) and a pool whose pieces waited for an event work afterwards.
TEST(StreamWrap, DefaultStreamsAndPoolsAfterADeviceReset) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  const stream_view pts = stream_view::per_thread(d);
  pool p{area(d)};
  void* x = p.allocate(1 << 16, pts);
  p.deallocate(x, pts);  // pending until the per-thread stream's event completes
  round_trip(pts, d, 4096);
  device_reset(d);
  for (stream_view s : {pts, stream_view::wrap(nullptr, d)}) round_trip(s, d, (1 << 16) + 5);
  void* y = p.allocate(1 << 16, pts);
  p.deallocate(y, pts);  // a new event, not one the reset destroyed
  pts.synchronize();
  p.trim();
  EXPECT_EQ(p.stats().live_allocations, 0u);
}
