// The IPC handle's wire format (core/ipc_wire): what parse refuses before anything is opened,
// and the checksum. What the exporter's segment and the driver check is in
// tests/whitebox/ipc_forged_test.cpp.
#include "core/ipc/ipc_segment.hpp"
#include "core/ipc/ipc_wire.hpp"

#include <memarea/error.hpp>
#include <memarea/ipc.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

namespace wf = memarea::detail::ipc_internal;
using memarea::ipc::handle;

namespace {

wf::wire valid_wire() {
  wf::wire w{};
  w.magic = wf::kHandleMagic;
  w.version = wf::kHandleVersion;
  for (unsigned i = 0; i < sizeof w.native; ++i) w.native[i] = static_cast<unsigned char>(i * 7);
  w.offset = 4096;
  w.owner = 0x1122334455667788ull;
  w.device = 0;
  w.pid = 1234;
  w.buffer_id = 99;
  w.segment = 0x99aabbccddeeff00ull;
  w.slot = 5;
  w.backend = wf::backend_tag();
  w.checksum = wf::checksum(w);
  return w;
}

handle as_handle(const wf::wire& w) {
  handle h;
  std::memcpy(h.bytes.data(), &w, sizeof w);
  return h;
}

/// parse's status and message for w with change applied (checksum recomputed unless asked).
std::string refusal(const std::function<void(wf::wire&)>& change, bool fix_checksum = true) {
  wf::wire w = valid_wire();
  change(w);
  if (fix_checksum) w.checksum = wf::checksum(w);
  try {
    (void)wf::parse(as_handle(w));
  } catch (const memarea::error& e) {
    EXPECT_EQ(e.status(), memarea::errc::invalid_handle) << e.what();
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST(IpcWire, AValidWireParsesToItself) {
  const wf::wire w = valid_wire();
  const wf::wire back = wf::parse(as_handle(w));
  EXPECT_EQ(std::memcmp(&w, &back, sizeof w), 0);
}

TEST(IpcWire, EveryByteChangesTheChecksum) {
  const wf::wire w = valid_wire();
  for (std::size_t i = 0; i < offsetof(wf::wire, checksum); ++i) {
    wf::wire x = w;
    reinterpret_cast<unsigned char*>(&x)[i] ^= 0x10;
    EXPECT_NE(wf::checksum(x), w.checksum) << "byte " << i;
    EXPECT_NE(refusal([&](wf::wire& y) { y = x; }, false), "accepted") << "byte " << i;
  }
}

TEST(IpcWire, FieldsOutOfRangeAreRefused) {
  EXPECT_NE(refusal([](wf::wire& w) { w.magic = 0; }).find("magic"), std::string::npos);
  EXPECT_NE(refusal([](wf::wire& w) { w.version = 2; }).find("version 2"), std::string::npos);
  EXPECT_NE(refusal([](wf::wire& w) { w.version = 1; }).find("version 1"), std::string::npos);
  EXPECT_NE(refusal([](wf::wire& w) { w.checksum ^= 1; }, false).find("checksum"),
            std::string::npos);
  EXPECT_NE(refusal([](wf::wire& w) { w.owner = 0; }), "accepted");
  EXPECT_NE(refusal([](wf::wire& w) { w.segment = 0; }), "accepted");
  EXPECT_NE(refusal([](wf::wire& w) { w.buffer_id = 0; }), "accepted");
  EXPECT_NE(refusal([](wf::wire& w) { w.slot = wf::kBuffers; }), "accepted");
  EXPECT_NE(refusal([](wf::wire& w) { w.reserved = 1; }), "accepted");
  EXPECT_NE(refusal([](wf::wire& w) { w.backend ^= 1; }).find("another backend"),
            std::string::npos);
  // The pid is for messages only: any value parses (liveness never reads it).
  EXPECT_EQ(refusal([](wf::wire& w) { w.pid = -5; }), "accepted");
}

TEST(IpcWire, SegmentNamesCarryOwnerAndRandomPart) {
  EXPECT_EQ(wf::segment_name(0x1122334455667788ull, 0xffull),
            "/memarea-ipc-1122334455667788-00000000000000ff");
}

TEST(IpcWire, TextFormRoundTripsAndRefusesOtherText) {
  const handle h = as_handle(valid_wire());
  EXPECT_EQ(handle::from_hex(h.to_hex()), h);
  std::string upper = h.to_hex();
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(handle::from_hex(upper), h);
  EXPECT_THROW((void)handle::from_hex(h.to_hex().substr(1)), memarea::error);
  std::string bad = h.to_hex();
  bad[17] = 'g';
  EXPECT_THROW((void)handle::from_hex(bad), memarea::error);
}
