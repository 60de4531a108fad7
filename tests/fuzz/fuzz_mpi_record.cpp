// libFuzzer harness: the records MPI ranks exchange (src/mpi/record.cpp), bytes from another
// process. Input: two control bytes (the receiver's communicator size and the sender it
// expects), then either (first byte even) the bytes received, raw, or (first byte odd) a
// record built from the input, encoded, then edited (byte flips, a new length), so that
// near-valid records reach every check. Whatever the bytes, decoding must not crash; a record
// it accepts must satisfy every invariant the group relies on and encode back to the very
// bytes received (the wire form is canonical); a record it refuses as another protocol version
// must carry the "MMR" prefix and another version byte. The join record's decoder gets the same
// bytes, as a rank of this version and as one of the next.
// No MPI: the decoder is all this links.
#include "mpi/record.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace {

namespace d = memarea::mpi::detail;

/// Reads the input front to back; zeros once it runs out.
struct reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  std::uint32_t u32() { return u8() | (u8() << 8) | (u8() << 16) | (std::uint32_t(u8()) << 24); }
  std::uint64_t u64() { return u32() | (std::uint64_t(u32()) << 32); }
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_mpi_record: %s\n", what);
  std::abort();
}

/// What the group relies on in a record that decoded.
void check_accepted(const d::record& r, const d::record_limits& lim,
                    std::span<const unsigned char> bytes) {
  if (r.kind < 1 || r.kind > d::last_step_kind) fail("accepted an unknown kind");
  if (r.rank < 0 || r.rank >= lim.comm_size) fail("accepted a rank outside the communicator");
  if (lim.sender >= 0 && r.rank != lim.sender) fail("accepted another sender's rank");
  if (r.device < -1 || r.device >= d::max_device) fail("accepted a device out of range");
  if (r.status != 0 && d::status_of(r.status) != static_cast<memarea::errc>(r.status)) {
    fail("accepted an unknown status");
  }
  if (r.status != 0 && !d::may_fail(r.kind)) fail("accepted a status where no failure goes");
  if (r.message.size() > d::max_message) fail("accepted an oversized message");
  if (r.message.find('\0') != std::string::npos) fail("accepted a NUL in a message");
  const bool shares = d::is_handle_step(r.kind) && r.status == 0;
  if (r.has_handle != shares) fail("accepted a handle where none goes, or none where one goes");
  if (shares != (r.size != 0)) fail("accepted a size that does not match the handle");
  if (!r.has_handle && r.handle != decltype(r.handle){}) fail("a non-zero handle without one");
  // Canonical: the accepted bytes are exactly what encoding the record gives.
  const auto again = d::encode_record(r);
  if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) {
    fail("an accepted record does not encode back to the bytes received");
  }
  const auto twice = d::decode_record(again, lim);
  if (!twice.ok() || !(twice.value == r)) fail("a re-encoded record does not decode alike");
}

std::uint32_t magic_of(std::span<const unsigned char> bytes) {
  return bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (std::uint32_t(bytes[3]) << 24);
}

void decode(std::span<const unsigned char> bytes, const d::record_limits& lim) {
  const auto got = d::decode_record(bytes, lim);
  if (got.ok()) {
    check_accepted(got.value, lim, bytes);
  } else {
    if (got.error.empty()) fail("a refusal without a message");
    if (!(got.value == d::record{})) fail("a refusal that filled the value");
    if (got.why == d::refusal::bad_version &&
        (bytes.size() < 4 || (magic_of(bytes) & 0x00ffffffu) != d::record_magic_prefix ||
         magic_of(bytes) == d::record_magic)) {
      fail("another version told from bytes that are no record, or of this version");
    }
  }
  if (bytes.size() >= 4 && magic_of(bytes) != d::record_magic && got.ok()) {
    fail("accepted a record of another version");
  }
  for (std::uint32_t version : {d::protocol_version, d::protocol_version + 1}) {
    const auto join = d::decode_join(bytes, version);
    if (join.ok()) {
      if (join.value.version != version) fail("accepted a join record of another version");
      const auto again = d::encode_join(join.value);
      if (bytes.size() != again.size() || !std::equal(again.begin(), again.end(), bytes.begin())) {
        fail("an accepted join record does not encode back to the bytes received");
      }
    } else if (join.error.empty()) {
      fail("a join refusal without a message");
    }
  }
}

/// A record built from the input: valid by default (so that accepted records are common), with
/// shape bits that each break one rule.
std::vector<unsigned char> built(reader& in, const d::record_limits& lim) {
  static constexpr std::int32_t statuses[] = {0, 1, 2, 3, 12, 16, 999, -1};
  d::record r;
  const std::uint8_t shape = in.u8();
  r.kind = 1 + in.u8() % (d::last_step_kind + 1);  // last_step_kind + 1: no step kind
  r.status = statuses[in.u8() % std::size(statuses)];
  const bool handle_step = d::is_handle_step(r.kind);
  const bool shares = handle_step && r.status == 0;
  r.rank = shape & 1 ? static_cast<std::int32_t>(in.u32()) : std::max(lim.sender, 0);
  r.seq = in.u64();
  // Each bit breaks one rule: any device, a size where none goes (or none where one does), a
  // window size outside a handle step, a handle where none goes (or none where one does), a
  // message with NULs.
  r.device = shape & 2 ? static_cast<std::int32_t>(in.u32()) : shares ? in.u8() % 9 - 1 : -1;
  const std::uint64_t size = in.u64();
  r.size = (shares != bool(shape & 4)) ? (shape & 4 ? size : 1 + size % (1ull << 48)) : 0;
  r.requested = (handle_step || (shape & 8)) ? in.u64() : 0;
  if (shares != bool(shape & 16)) {
    std::array<unsigned char, d::handle_bytes> h{};
    for (auto& b : h) b = in.u8();
    r.set_handle(h);
  }
  std::string text(in.u8() % 48, '\0');
  for (auto& c : text) c = static_cast<char>(in.u8());
  r.set_message(text);
  if (shape & 32) r.message = text;  // may hold a NUL: the encoder does not judge
  return d::encode_record(r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in{data, size};
  const std::uint8_t mode = in.u8();
  d::record_limits lim;
  lim.comm_size = 1 + in.u8() % 16;
  lim.sender = mode & 2 ? -1 : (mode >> 2) % lim.comm_size;
  if (!(mode & 1)) {
    decode({in.p, in.n}, lim);
    return 0;
  }
  auto bytes = built(in, lim);
  // Another protocol version where the input asks for one: refused as such, whatever else.
  if (const std::uint8_t v = in.u8(); v & 1) {
    bytes[3] = static_cast<unsigned char>(v >> 1);
    if (bytes[3] != (d::record_magic >> 24) &&
        d::decode_record(bytes, lim).why != d::refusal::bad_version) {
      fail("a record of another version not refused as such");
    }
  }
  // Edits: (offset, xor) pairs, then a new length where the input asks for one.
  const std::uint8_t edits = in.u8() % 8;
  for (std::uint8_t i = 0; i < edits && !bytes.empty(); ++i) {
    const std::size_t at = (in.u8() | (in.u8() << 8)) % bytes.size();
    bytes[at] ^= in.u8();
  }
  if (const std::uint8_t cut = in.u8(); cut & 1) bytes.resize((cut >> 1) * 5u, 0xa5);
  decode(bytes, lim);
  return 0;
}
