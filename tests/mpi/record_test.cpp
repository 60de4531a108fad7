// The records MPI ranks exchange (src/mpi/record.cpp): every refusal of the decoder, records of
// another protocol version, and a round trip of random valid records, byte for byte. No MPI: the
// decoder alone.
#include "mpi/record.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

namespace d = memarea::mpi::detail;
using memarea::errc;

constexpr d::record_limits kLimits{4, 2};  // a communicator of 4 ranks; the sender is rank 2

// Header offsets (src/mpi/record.cpp): kind 4, status 8, rank 12, device 16, handle length
// 20, message length 24, seq 28, size 36, requested 44.
void put32(std::vector<unsigned char>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(std::vector<unsigned char>& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

/// A successful handle step of rank 2: a handle, a size, a device and a bus id.
d::record shared_record() {
  d::record r;
  r.kind = static_cast<std::int32_t>(d::step_kind::handles);
  r.rank = 2;
  r.device = 1;
  r.seq = 7;
  r.size = 1 << 20;
  r.requested = 1 << 20;
  std::array<unsigned char, d::handle_bytes> h{};
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<unsigned char>(i * 7 + 1);
  r.set_handle(h);
  r.set_message("0000:3b:00.0");
  return r;
}

/// A fence record of rank 2: nothing but its kind and number.
d::record fence_record() {
  d::record r;
  r.kind = static_cast<std::int32_t>(d::step_kind::fence);
  r.rank = 2;
  r.seq = 3;
  return r;
}

d::refusal why(const std::vector<unsigned char>& b, d::record_limits lim = kLimits) {
  auto got = d::decode_record(b, lim);
  if (!got.ok()) {
    EXPECT_FALSE(got.error.empty());
    EXPECT_EQ(got.value, d::record{}) << "a refusal leaves the value untouched";
  }
  return got.why;
}

TEST(MpiRecord, AcceptsWhatItEncodes) {
  for (const auto& r : {shared_record(), fence_record()}) {
    const auto bytes = d::encode_record(r);
    const auto got = d::decode_record(bytes, kLimits);
    ASSERT_TRUE(got.ok()) << got.error;
    EXPECT_EQ(got.value, r);
  }
  EXPECT_EQ(d::encode_record(fence_record()).size(), d::record_header_bytes);
  EXPECT_EQ(d::encode_record(shared_record()).size(),
            d::record_header_bytes + d::handle_bytes + 12);
}

TEST(MpiRecord, RefusesTruncated) {
  const auto full = d::encode_record(shared_record());
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, d::record_header_bytes - 1,
                        d::record_header_bytes, d::record_header_bytes + d::handle_bytes,
                        full.size() - 1}) {
    std::vector<unsigned char> b(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(why(b), d::refusal::truncated) << n << " bytes";
  }
  auto longer = full;
  longer.push_back(0);
  EXPECT_EQ(why(longer), d::refusal::too_long);
}

TEST(MpiRecord, RefusesOversizedCounts) {
  auto b = d::encode_record(shared_record());
  for (std::uint32_t n : {1u, 127u, 129u, 0x7fffffffu, 0xffffffffu}) {
    auto c = b;
    put32(c, 20, n);  // handle length
    EXPECT_EQ(why(c), d::refusal::bad_handle) << n;
  }
  for (std::uint32_t n : {std::uint32_t(d::max_message + 1), 0x80000000u, 0xffffffffu}) {
    auto c = b;
    put32(c, 24, n);  // message length
    EXPECT_EQ(why(c), d::refusal::bad_message) << n;
  }
  // A message length within bounds but past the bytes received is a truncation.
  auto c = b;
  put32(c, 24, static_cast<std::uint32_t>(d::max_message));
  EXPECT_EQ(why(c), d::refusal::truncated);
}

TEST(MpiRecord, RefusesBadRank) {
  for (std::int32_t rank : {-1, 4, 1, 3, 0x7fffffff, -2147483647 - 1}) {
    auto b = d::encode_record(fence_record());
    put32(b, 12, static_cast<std::uint32_t>(rank));
    EXPECT_EQ(why(b), d::refusal::bad_rank) << rank;
  }
  // Any rank of the communicator passes when the sender is not known.
  auto b = d::encode_record(fence_record());
  put32(b, 12, 3);
  EXPECT_TRUE(d::decode_record(b, {4, -1}).ok());
  put32(b, 12, 4);
  EXPECT_EQ(why(b, {4, -1}), d::refusal::bad_rank);
  EXPECT_EQ(why(d::encode_record(fence_record()), {0, -1}), d::refusal::bad_rank);
}

TEST(MpiRecord, RefusesBadStringLength) {
  // A NUL inside the message: the length and the string disagree.
  auto r = shared_record();
  r.message = std::string("0000:3b\0:00.0", 12);
  EXPECT_EQ(why(d::encode_record(r)), d::refusal::bad_message);
  // A message length that swallows bytes or leaves some over.
  auto b = d::encode_record(shared_record());
  put32(b, 24, 11);
  EXPECT_EQ(why(b), d::refusal::too_long);
  put32(b, 24, 13);
  EXPECT_EQ(why(b), d::refusal::truncated);
  // set_message never makes such a record: it stops at a NUL and cuts to max_message.
  d::record s;
  s.set_message(std::string("ab\0cd", 5));
  EXPECT_EQ(s.message, "ab");
  s.set_message(std::string(d::max_message + 10, 'x'));
  EXPECT_EQ(s.message.size(), d::max_message);
}

TEST(MpiRecord, RefusesOtherFields) {
  auto base = d::encode_record(fence_record());
  auto b = base;
  b[0] ^= 1;
  EXPECT_EQ(why(b), d::refusal::bad_magic);
  for (std::uint32_t kind : {0u, 10u, 0xffffffffu}) {
    b = base;
    put32(b, 4, kind);
    EXPECT_EQ(why(b), d::refusal::bad_kind) << kind;
  }
  for (std::uint32_t status : {999u, 0xffffffffu, 17u}) {
    b = base;
    put32(b, 8, status);
    EXPECT_EQ(why(b), d::refusal::bad_status) << status;
  }
  b = base;
  put32(b, 8, static_cast<std::uint32_t>(errc::invalid_handle));
  EXPECT_EQ(why(b), d::refusal::bad_status) << "a fence reports no failure";
  put32(b, 4, static_cast<std::uint32_t>(d::step_kind::opens));
  EXPECT_TRUE(d::decode_record(b, kLimits).ok()) << "a failed opens record is well formed";
  for (std::int32_t dev : {-2, d::max_device}) {
    auto s = d::encode_record(shared_record());
    put32(s, 16, static_cast<std::uint32_t>(dev));
    EXPECT_EQ(why(s), d::refusal::bad_device) << dev;
  }
  b = base;
  put32(b, 16, 0);
  EXPECT_EQ(why(b), d::refusal::bad_device) << "a device in a record that shares nothing";
  b = base;
  put64(b, 36, 4096);
  EXPECT_EQ(why(b), d::refusal::bad_size) << "a size in a record that shares nothing";
  b = base;
  put64(b, 44, 4096);
  EXPECT_EQ(why(b), d::refusal::bad_size) << "a window size outside a handle step";
  auto s = d::encode_record(shared_record());
  put64(s, 36, 0);
  EXPECT_EQ(why(s), d::refusal::bad_size) << "a handle to 0 bytes";
}

TEST(MpiRecord, HandlesOnlyWhereTheyGo) {
  // A handle in a fence record.
  auto r = fence_record();
  r.set_handle(shared_record().handle);
  EXPECT_EQ(why(d::encode_record(r)), d::refusal::bad_handle);
  // A successful handle step without one.
  auto s = shared_record();
  s.has_handle = false;
  s.handle = {};
  EXPECT_EQ(why(d::encode_record(s)), d::refusal::bad_handle);
  // A failed one with one: fail() clears it, so such bytes come from elsewhere.
  auto f = shared_record();
  f.status = static_cast<std::int32_t>(errc::out_of_memory);
  f.size = 0;
  f.device = -1;
  EXPECT_EQ(why(d::encode_record(f)), d::refusal::bad_handle);
  f.fail(errc::out_of_memory, "allocating 1 MiB");
  EXPECT_FALSE(f.has_handle);
  const auto got = d::decode_record(d::encode_record(f), kLimits);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.value, f);
  EXPECT_EQ(got.value.requested, std::uint64_t{1} << 20) << "a failed handle step keeps its size";
}

TEST(MpiRecord, RoundTripsRandomRecordsByteForByte) {
  std::mt19937_64 rng(16);
  static constexpr std::int32_t statuses[] = {0, 1, 2, 3, 4, 7, 12, 16};
  for (int i = 0; i < 20000; ++i) {
    const int comm = 1 + static_cast<int>(rng() % 64);
    const d::record_limits lim{comm, rng() % 2 ? -1 : static_cast<int>(rng() % comm)};
    d::record r;
    r.kind = 1 + static_cast<std::int32_t>(rng() % d::last_step_kind);
    r.rank = lim.sender >= 0 ? lim.sender : static_cast<std::int32_t>(rng() % comm);
    r.seq = rng();
    std::string text(rng() % (d::max_message + 40), '\0');
    for (auto& c : text) c = static_cast<char>(1 + rng() % 255);
    r.set_message(text);
    if (r.kind == static_cast<std::int32_t>(d::step_kind::handles)) r.requested = rng() % 3 ? rng() : 0;
    if (d::may_fail(r.kind)) r.status = statuses[rng() % std::size(statuses)];
    if (d::is_handle_step(r.kind) && r.status == 0) {
      std::array<unsigned char, d::handle_bytes> h{};
      for (auto& b : h) b = static_cast<unsigned char>(rng());
      r.set_handle(h);
      r.size = 1 + rng() % (std::uint64_t{1} << 40);
      r.device = static_cast<std::int32_t>(rng() % 9) - 1;
    }
    const auto bytes = d::encode_record(r);
    const auto got = d::decode_record(bytes, lim);
    ASSERT_TRUE(got.ok()) << "record " << i << ": " << got.error;
    ASSERT_EQ(got.value, r) << "record " << i;
    ASSERT_EQ(d::encode_record(got.value), bytes) << "record " << i;
  }
}

// record::fail stores only statuses the decoder accepts: success and codes outside the
// enumeration become unknown, so the encoder never emits a record every peer refuses.
TEST(MpiRecord, FailStoresOnlyStatusesTheDecoderAccepts) {
  for (int code : {0, 12345, -7, 0x7fffffff, static_cast<int>(errc::busy)}) {
    d::record r;
    r.kind = static_cast<std::int32_t>(d::step_kind::opens);
    r.rank = 2;
    r.fail(static_cast<errc>(code), "it failed");
    const errc expect = code == static_cast<int>(errc::busy) ? errc::busy : errc::unknown;
    EXPECT_EQ(r.status, static_cast<std::int32_t>(expect)) << code;
    const auto got = d::decode_record(d::encode_record(r), kLimits);
    ASSERT_TRUE(got.ok()) << code << ": " << got.error;
    EXPECT_EQ(got.value, r);
  }
}

// A status in a step that reports no failure would be dropped unseen by the group: refused.
TEST(MpiRecord, RefusesAStatusWhereNoFailureGoes) {
  for (auto kind : {d::step_kind::undo, d::step_kind::fence, d::step_kind::barrier,
                    d::step_kind::close, d::step_kind::node_comm}) {
    d::record r = fence_record();
    r.kind = static_cast<std::int32_t>(kind);
    EXPECT_TRUE(d::decode_record(d::encode_record(r), kLimits).ok());
    r.fail(errc::out_of_memory, "no room");
    const auto got = d::decode_record(d::encode_record(r), kLimits);
    EXPECT_EQ(got.why, d::refusal::bad_status) << static_cast<int>(kind);
    EXPECT_NE(got.error.find("reports no failure"), std::string::npos) << got.error;
  }
  for (auto kind : {d::step_kind::handles, d::step_kind::share_handles, d::step_kind::opens,
                    d::step_kind::confirm}) {
    d::record r = fence_record();
    r.kind = static_cast<std::int32_t>(kind);
    r.fail(errc::out_of_memory, "no room");
    const auto got = d::decode_record(d::encode_record(r), kLimits);
    EXPECT_TRUE(got.ok()) << static_cast<int>(kind) << ": " << got.error;
  }
}

// share()'s handle step shares a handle like a window's, but carries no window size.
TEST(MpiRecord, ShareHandleStep) {
  d::record r = shared_record();
  r.kind = static_cast<std::int32_t>(d::step_kind::share_handles);
  r.requested = 0;
  const auto got = d::decode_record(d::encode_record(r), kLimits);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.value, r);
  r.requested = 4096;
  EXPECT_EQ(d::decode_record(d::encode_record(r), kLimits).why, d::refusal::bad_size);
}

// A peer's message reaches an exception and stderr only through printable().
TEST(MpiRecord, PrintableEscapesControlBytes) {
  EXPECT_EQ(d::printable("plain text: 0000:3b:00.0"), "plain text: 0000:3b:00.0");
  EXPECT_EQ(d::printable("a\x1b[2Jb\nc\r\x7f"), "a\\x1b[2Jb\\x0ac\\x0d\\x7f");
  EXPECT_EQ(d::printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(d::printable("\xc3\xa9\x9b"), "\\xc3\\xa9\\x9b");
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  for (unsigned char c : d::printable(all)) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(c);
}

TEST(MpiRecord, JoinRecords) {
  const d::join_record j{0x0123456789abcdefull, 0};
  const auto bytes = d::encode_join(j);
  auto got = d::decode_join(bytes);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.value, j);
  const d::join_record bad_settings{42, static_cast<std::int32_t>(errc::invalid_value)};
  EXPECT_TRUE(d::decode_join(d::encode_join(bad_settings)).ok());

  EXPECT_EQ(d::decode_join(std::span(bytes).first(15)).why, d::refusal::truncated);
  std::vector<unsigned char> longer(bytes.begin(), bytes.end());
  longer.push_back(0);
  EXPECT_EQ(d::decode_join(longer).why, d::refusal::too_long);
  auto b = bytes;
  b[8] = 3;  // status out_of_memory: a join record carries only invalid_value
  EXPECT_EQ(d::decode_join(b).why, d::refusal::bad_status);
  b = bytes;
  b[15] = 1;  // the version's high byte: another version
  EXPECT_EQ(d::decode_join(b).why, d::refusal::bad_version);
}

// The protocol's version: step kinds 7-9 and the join's version field came after version 1.
TEST(MpiRecord, ProtocolVersionIsTwo) {
  EXPECT_EQ(d::protocol_version, 2u);
  const auto b = d::encode_record(fence_record());
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "MMR2");
  EXPECT_EQ(d::magic_version(d::record_magic), d::protocol_version);
  EXPECT_EQ(d::magic_version(0x31524d4d), 1u);  // "MMR1"
  EXPECT_EQ(d::magic_version(0x30524d4d), 0u);  // "MMR0": no version
  EXPECT_EQ(d::magic_version(0x32524d4e), 0u);  // "NMR2": not a record
  EXPECT_EQ(d::last_step_kind, 9);
}

// A step record of another version is refused as such, naming both versions, before any of its
// other fields is read (its header may be laid out otherwise, even be shorter).
TEST(MpiRecord, RefusesAnotherProtocolVersion) {
  for (const auto& r : {fence_record(), shared_record()}) {
    for (unsigned char v : {'1', '3', '9'}) {
      auto b = d::encode_record(r);
      b[3] = v;
      const auto got = d::decode_record(b, kLimits);
      EXPECT_EQ(got.why, d::refusal::bad_version) << v;
      EXPECT_NE(got.error.find(std::string("protocol version ") + char(v)), std::string::npos)
          << got.error;
      EXPECT_NE(got.error.find("this rank speaks version 2"), std::string::npos) << got.error;
      EXPECT_EQ(got.value, d::record{});
    }
  }
  // A version byte that names no version.
  auto b = d::encode_record(fence_record());
  for (unsigned char v : {0x00, 0x05, 0x30}) {
    b[3] = v;
    const auto got = d::decode_record(b, kLimits);
    EXPECT_EQ(got.why, d::refusal::bad_version) << int(v);
    EXPECT_NE(got.error.find("version byte"), std::string::npos) << got.error;
  }
  // Whatever follows: fields this version would refuse, a header shorter than this version's,
  // more bytes than this version's longest record.
  auto v1 = d::encode_record(fence_record());
  v1[3] = '1';
  put32(v1, 20, 0xffffffffu);  // handle length
  put32(v1, 24, 0xffffffffu);  // message length
  put32(v1, 4, 77);            // kind
  EXPECT_EQ(why(v1), d::refusal::bad_version);
  for (std::size_t n : {std::size_t{4}, std::size_t{40}, d::max_record_bytes + 100}) {
    std::vector<unsigned char> c(n, 0xee);
    std::copy(v1.begin(), v1.begin() + 4, c.begin());
    EXPECT_EQ(why(c), d::refusal::bad_version) << n << " bytes";
  }
  // Fewer than the magic's 4 bytes; the magic of no record at all.
  EXPECT_EQ(why(std::vector<unsigned char>{'M', 'M', 'R'}), d::refusal::truncated);
  b = d::encode_record(fence_record());
  b[2] = 'X';
  EXPECT_EQ(why(b), d::refusal::bad_magic);
  // The records of dd4b89f (no magic: the status came first).
  std::vector<unsigned char> old(584, 0);
  EXPECT_EQ(why(old), d::refusal::bad_magic);
}

// The join record carries the version; a rank refuses another version's join first, naming
// both, whatever its other fields hold.
TEST(MpiRecord, JoinRecordsOfAnotherVersion) {
  const d::join_record j{42, 0};
  EXPECT_EQ(j.version, d::protocol_version);
  auto bytes = d::encode_join(j);
  EXPECT_EQ(bytes[12], d::protocol_version);
  EXPECT_EQ(bytes[13] | bytes[14] | bytes[15], 0);
  // Version 1's join: 4 zero bytes where the version goes.
  auto v1 = bytes;
  v1[12] = 0;
  auto got = d::decode_join(v1);
  EXPECT_EQ(got.why, d::refusal::bad_version);
  EXPECT_NE(got.error.find("protocol version 1 or earlier (a join without a version); this rank "
                           "speaks version 2"), std::string::npos) << got.error;
  // A newer rank's join: refused here, accepted by a rank of that version.
  d::join_record newer{42, 0, d::protocol_version + 1};
  auto nb = d::encode_join(newer);
  got = d::decode_join(nb);
  EXPECT_EQ(got.why, d::refusal::bad_version);
  EXPECT_NE(got.error.find("protocol version 3; this rank speaks version 2"), std::string::npos)
      << got.error;
  got = d::decode_join(nb, d::protocol_version + 1);
  ASSERT_TRUE(got.ok()) << got.error;
  EXPECT_EQ(got.value, newer);
  // ... and this version's join refused there.
  got = d::decode_join(bytes, d::protocol_version + 1);
  EXPECT_EQ(got.why, d::refusal::bad_version);
  EXPECT_NE(got.error.find("protocol version 2; this rank speaks version 3"), std::string::npos)
      << got.error;
  // The version before the other fields: a status this version refuses is not judged.
  nb[8] = 3;
  EXPECT_EQ(d::decode_join(nb).why, d::refusal::bad_version);
}

}  // namespace
