// libFuzzer harness: the usage table at the start of a lease (src/base/lease_table.cpp), bytes
// any process of the same user can write and `memarea ps` reads. Input: a control byte, then
// either (control even) the table's bytes, raw, or (control odd) a valid table built from the
// input (identity, rows), published, then edited (a few byte writes at offsets the input picks,
// and a length), so that near-valid tables reach every check. Whatever the bytes, decode must
// not crash nor read past the length; a table it accepts has at most kMaxRows rows, each of a
// device from the host to 63 and no two of one device, and a printable command name of at most
// 16 characters; a valid table decodes to what was published.
// No libmemarea: the decoder is all this links.
#include "base/lease_table.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

namespace lt = memarea::detail::lease_table;

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
  std::fprintf(stderr, "fuzz_lease_table: %s\n", what);
  std::abort();
}

void check_accepted(const lt::decoded& d) {
  if (d.rows.size() > lt::kMaxRows) fail("too many rows accepted");
  bool seen[lt::kMaxRows] = {};
  for (const lt::row& r : d.rows) {
    if (r.device < lt::kHost || r.device >= static_cast<std::int32_t>(lt::kMaxRows) - 1)
      fail("a row of no device accepted");
    if (seen[r.device - lt::kHost]) fail("two rows of one device accepted");
    seen[r.device - lt::kHost] = true;
  }
  if (d.comm.size() > 16) fail("command name longer than its field");
  for (char c : d.comm)
    if (c < 0x20 || c > 0x7e) fail("unprintable command name");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in{data, size};
  const std::uint8_t control = in.u8();
  if ((control & 1) == 0) {
    // Raw bytes, copied into a buffer of exactly their length (ASan sees any read past it).
    std::vector<std::uint8_t> bytes(in.p, in.p + in.n);
    if (auto d = lt::decode(bytes.data(), bytes.size())) check_accepted(*d);
    return 0;
  }
  auto t = std::make_unique<lt::layout>();
  std::memset(t.get(), 0, sizeof *t);
  char comm[17] = {};
  for (int i = 0; i < 16; ++i) comm[i] = static_cast<char>(in.u8());
  lt::init(*t, static_cast<std::int32_t>(in.u32()), in.u64(), in.u32(), in.u64(), comm);
  std::vector<lt::row> rows(in.u8() % (lt::kMaxRows + 1));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    lt::row& r = rows[i];
    r.device = static_cast<std::int32_t>(i) - 1;
    r.live = in.u64();
    r.cached = in.u64();
    r.peak_live = in.u64();
  }
  lt::publish(*t, rows.data(), static_cast<std::uint32_t>(rows.size()));
  const int edits = (control >> 1) & 7;
  auto* raw = reinterpret_cast<std::uint8_t*>(t.get());
  if (edits == 0) {
    auto d = lt::decode(t.get(), sizeof *t);
    if (!d) fail("a valid table refused");
    check_accepted(*d);
    if (d->rows.size() != rows.size()) fail("rows lost");
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (d->rows[i].live != rows[i].live || d->rows[i].cached != rows[i].cached ||
          d->rows[i].peak_live != rows[i].peak_live || d->rows[i].device != rows[i].device)
        fail("a row changed on the way");
    return 0;
  }
  for (int e = 0; e < edits; ++e) raw[in.u32() % sizeof *t] = in.u8();
  const std::size_t length = (control & 0x80) ? in.u32() % (sizeof *t + 1) : sizeof *t;
  std::vector<std::uint8_t> bytes(raw, raw + length);
  if (auto d = lt::decode(bytes.data(), bytes.size())) check_accepted(*d);
  return 0;
}
