// Events (memarea::event, memarea_event_*): making them with each flag, recording, querying,
// waiting, timing, one stream waiting for another's event, and every refusal.
#include "common.hpp"
#include "foreign_stream.hpp"

#include <cstring>
#include <memory>
#include <vector>

using namespace memarea;
using memarea::test::devices;
using memarea::test::foreign_stream;
using memarea::test::on_sim;
using memarea::test::random_bytes;

TEST(Event, FlagsAndRefusals) {
  MEMAREA_REQUIRE_DEVICES(1);
  for (unsigned flags : {unsigned{MEMAREA_EVENT_DEFAULT}, unsigned{MEMAREA_EVENT_BLOCKING_SYNC},
                         unsigned{MEMAREA_EVENT_DISABLE_TIMING},
                         unsigned{MEMAREA_EVENT_BLOCKING_SYNC | MEMAREA_EVENT_DISABLE_TIMING}}) {
    SCOPED_TRACE(flags);
    memarea_event_t e = nullptr;
    EXPECT_STATUS(memarea_event_create(&e, flags), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_event_record(e, nullptr), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_event_synchronize(e), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_event_query(e), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_event_destroy(e), MEMAREA_SUCCESS);
  }
  memarea_event_t e = nullptr;
  EXPECT_STATUS(memarea_event_create(&e, 0x8), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_create(&e, MEMAREA_EVENT_INTERPROCESS), MEMAREA_ERROR_NOT_SUPPORTED);
  EXPECT_STATUS(memarea_event_create(&e, MEMAREA_EVENT_INTERPROCESS | MEMAREA_EVENT_DISABLE_TIMING),
                MEMAREA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(e, nullptr);
  EXPECT_STATUS(memarea_event_create(nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_destroy(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_record(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_query(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_synchronize(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_stream_wait_event(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  float ms = -1;
  EXPECT_STATUS(memarea_event_elapsed(&ms, nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  ASSERT_EQ(memarea_event_create(&e, 0), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_event_elapsed(nullptr, e, e), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_event_destroy(e), MEMAREA_SUCCESS);

  EXPECT_MEMAREA_ERROR(event x(devices()), errc::invalid_device);
  EXPECT_MEMAREA_ERROR(event x(0, event_flags::interprocess), errc::not_supported);
  EXPECT_MEMAREA_ERROR(event x(0, static_cast<event_flags>(16)), errc::invalid_value);
  event moved(0, event_flags::blocking_sync | event_flags::disable_timing);
  EXPECT_EQ(moved.device(), 0);
  EXPECT_NE(moved.native_handle(), nullptr);
  event taker = std::move(moved);
  EXPECT_FALSE(moved);  // NOLINT: moved from on purpose
  EXPECT_EQ(moved.device(), -1);
  EXPECT_MEMAREA_ERROR(moved.record(), errc::invalid_value);
  EXPECT_TRUE(taker);
  EXPECT_EQ(to_c(moved), nullptr);
  EXPECT_NE(to_c(taker), nullptr);
}

// An event never recorded is complete (as CUDA's); a recorded one once its work has run.
TEST(Event, QueryAndSynchronize) {
  MEMAREA_REQUIRE_DEVICES(1);
  event e(0);
  EXPECT_TRUE(e.query());
  e.synchronize();
  stream s(0);
  const std::size_t n = 1 << 20;
  const auto bytes = random_bytes(n);
  buffer d = area(0).allocate(n);
  copy_async(d.data(), bytes.data(), n, s);
  e.record(s);
  e.synchronize();
  EXPECT_TRUE(e.query());
  EXPECT_STATUS(memarea_event_query(to_c(e)), MEMAREA_SUCCESS);
  if (on_sim()) {
    sim::stream_gate gate(s);
    e.record(s);
    EXPECT_FALSE(e.query());
    EXPECT_STATUS(memarea_event_query(to_c(e)), MEMAREA_ERROR_BUSY);
    gate.open();
    e.synchronize();
    EXPECT_TRUE(e.query());
  }
}

// Elapsed time: plausible and non-negative between two completed timed records; the refusals
// as CUDA's (an untimed or unrecorded event: invalid handle; work not done: busy).
TEST(Event, ElapsedTime) {
  MEMAREA_REQUIRE_DEVICES(1);
  stream s(0);
  event start(0), end(0), untimed(0, event_flags::disable_timing), never(0);
  float ms = -1;
  EXPECT_STATUS(memarea_event_elapsed(&ms, to_c(start), to_c(end)),
                MEMAREA_ERROR_INVALID_HANDLE);  // neither recorded
  const std::size_t n = 8 << 20;
  const auto bytes = random_bytes(n);
  buffer d = area(0).allocate(n);
  start.record(s);
  copy_async(d.data(), bytes.data(), n, s);
  end.record(s);
  untimed.record(s);
  end.synchronize();
  const float t = elapsed_ms(start, end);
  EXPECT_GE(t, 0.0f);
  EXPECT_LT(t, 60000.0f);
  EXPECT_STATUS(memarea_event_elapsed(&ms, to_c(start), to_c(end)), MEMAREA_SUCCESS);
  EXPECT_EQ(ms, t);
  EXPECT_MEMAREA_ERROR(elapsed_ms(start, untimed), errc::invalid_handle);
  EXPECT_MEMAREA_ERROR(elapsed_ms(untimed, end), errc::invalid_handle);
  EXPECT_MEMAREA_ERROR(elapsed_ms(start, never), errc::invalid_handle);
  if (on_sim()) {
    sim::stream_gate gate(s);
    end.record(s);
    EXPECT_STATUS(memarea_event_elapsed(&ms, to_c(start), to_c(end)), MEMAREA_ERROR_BUSY);
    gate.open();
    end.synchronize();
    EXPECT_GE(elapsed_ms(start, end), t);
  }
}

// A copy on stream B that waits for an event recorded after a slow copy on A sees A's bytes:
// on the sim A is held back until B has queued its work; elsewhere A's copy is large.
TEST(Event, StreamWaitsForAnotherStreamsEvent) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fb(0);
  REQUIRE_FOREIGN(fb);
  stream a(0);
  const stream_view b = fb.view();
  const std::size_t n = on_sim() ? (1 << 20) : (std::size_t{256} << 20);
  const auto bytes = random_bytes(n);
  std::vector<unsigned char> back(n, 0);
  buffer d = area(0).allocate(n);
  memarea::memset(d.data(), 0, n, 1);
  memarea_event_t e = nullptr;
  ASSERT_EQ(memarea_event_create(&e, MEMAREA_EVENT_DISABLE_TIMING), MEMAREA_SUCCESS);
  {
    std::unique_ptr<sim::stream_gate> gate;
    if (on_sim()) gate = std::make_unique<sim::stream_gate>(a);
    copy_async(d.data(), bytes.data(), n, a);
    EXPECT_STATUS(memarea_event_record(e, to_c(a)), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_stream_wait_event(to_c(b), e), MEMAREA_SUCCESS);
    copy_async(back.data(), d.data(), n, b);
    if (gate) {
      EXPECT_STATUS(memarea_event_query(e), MEMAREA_ERROR_BUSY);
      EXPECT_FALSE(b.is_default());
    }
  }  // the gate opens
  b.synchronize();
  EXPECT_EQ(std::memcmp(back.data(), bytes.data(), n), 0);
  EXPECT_STATUS(memarea_event_query(e), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_event_destroy(e), MEMAREA_SUCCESS);

  // The C++ spelling, on the per-thread default stream.
  const stream_view pts = stream_view::per_thread(0);
  event ev(0, event_flags::disable_timing);
  const auto more = random_bytes(n);
  copy_async(d.data(), more.data(), n, a);
  ev.record(a);
  pts.wait(ev);
  copy_async(back.data(), d.data(), n, pts);
  pts.synchronize();
  EXPECT_EQ(std::memcmp(back.data(), more.data(), n), 0);
}

// Events are of one device: recording on another device's stream is refused; waiting for one
// from another device is how devices order their work.
TEST(Event, AcrossDevices) {
  MEMAREA_REQUIRE_DEVICES(2);
  event e0(0);
  stream s1(1);
  EXPECT_MEMAREA_ERROR(e0.record(s1), errc::invalid_value);
  EXPECT_STATUS(memarea_event_record(to_c(e0), to_c(stream_view(s1))),
                MEMAREA_ERROR_INVALID_VALUE);
  {
    device_guard g(1);
    e0.record();  // the default stream of the event's device, whatever is current
  }
  s1.wait(e0);
  s1.synchronize();
  EXPECT_TRUE(e0.query());
}
