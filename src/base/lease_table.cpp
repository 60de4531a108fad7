#include "base/lease_table.hpp"

#include <algorithm>
#include <cstring>

namespace memarea::detail::lease_table {

namespace {
template <class T>
std::atomic_ref<T> at(T& x) noexcept {
  return std::atomic_ref<T>(x);
}
// The table is a sequence lock without fences (which TSan cannot model): the writer's stores
// of the figures are release stores after the odd sequence number, and the reader's loads are
// acquire loads before it reads the sequence number again. A reader that sees any figure of a
// write in progress therefore sees that write's odd number (or a later one) on its second read.
// On x86 and ARMv8 both are plain accesses or their cheapest ordered forms.
template <class T>
T load(const T& x) noexcept {
  return std::atomic_ref<T>(const_cast<T&>(x)).load(std::memory_order_acquire);
}
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "shared tables need lock-free");
}  // namespace

void init(layout& t, std::int32_t pid, std::uint64_t pid_ns, std::uint32_t uid,
          std::uint64_t start_ns, const char* comm) noexcept {
  at(t.version).store(kVersion, std::memory_order_relaxed);
  at(t.bytes).store(sizeof(layout), std::memory_order_relaxed);
  at(t.pid).store(pid, std::memory_order_relaxed);
  at(t.pid_ns).store(pid_ns, std::memory_order_relaxed);
  at(t.uid).store(uid, std::memory_order_relaxed);
  at(t.start_ns).store(start_ns, std::memory_order_relaxed);
  for (std::size_t i = 0; i < sizeof t.comm; ++i) {
    const char c = comm && std::strlen(comm) > i ? comm[i] : '\0';
    at(t.comm[i]).store(c, std::memory_order_relaxed);
  }
  // The magic last: a reader that sees it sees the identity.
  at(t.magic).store(kMagic, std::memory_order_release);
}

void publish(layout& t, const row* rows, std::uint32_t n) noexcept {
  n = std::min(n, kMaxRows);
  const std::uint32_t s = at(t.seq).load(std::memory_order_relaxed);
  at(t.seq).store(s + 1, std::memory_order_relaxed);
  at(t.rows).store(n, std::memory_order_release);
  for (std::uint32_t i = 0; i < n; ++i) {
    row& d = t.r[i];
    const row& x = rows[i];
    at(d.device).store(x.device, std::memory_order_release);
    for (auto [dst, src] : {std::pair{&d.live, x.live}, {&d.cached, x.cached},
                            {&d.reserved, x.reserved}, {&d.exported, x.exported},
                            {&d.imported, x.imported}, {&d.peak_live, x.peak_live},
                            {&d.peak_cached, x.peak_cached}, {&d.peak_reserved, x.peak_reserved},
                            {&d.peak_exported, x.peak_exported},
                            {&d.peak_imported, x.peak_imported}})
      at(*dst).store(src, std::memory_order_release);
  }
  at(t.seq).store(s + 2, std::memory_order_release);
}

std::optional<decoded> decode(const void* bytes, std::size_t size, std::string* why) {
  auto fail = [&](const char* w) -> std::optional<decoded> {
    if (why) *why = w;
    return std::nullopt;
  };
  // A lease of a memarea without usage tables holds its stamp alone.
  if (!bytes || size < sizeof(layout)) return fail("no usage table (shorter than one)");
  const layout& t = *static_cast<const layout*>(bytes);
  if (load(t.magic) != kMagic) return fail("no usage table (another version of memarea?)");
  if (load(t.version) != kVersion) return fail("usage table of another version");
  if (load(t.bytes) != sizeof(layout)) return fail("usage table of another size");
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint32_t s1 = at(const_cast<std::uint32_t&>(t.seq)).load(std::memory_order_acquire);
    if (s1 & 1) continue;
    decoded d;
    d.pid = load(t.pid);
    d.pid_ns = load(t.pid_ns);
    d.uid = load(t.uid);
    d.start_ns = load(t.start_ns);
    char comm[sizeof t.comm + 1] = {};
    for (std::size_t i = 0; i < sizeof t.comm; ++i) comm[i] = load(t.comm[i]);
    for (char& c : comm)
      if (c != '\0' && (c < 0x20 || c > 0x7e)) c = '?';  // printed as it is: printable only
    d.comm = comm;
    const std::uint32_t n = load(t.rows);
    if (n > kMaxRows) return fail("usage table with too many rows");
    d.rows.resize(n);
    bool seen[kMaxRows] = {};  // by device + 1
    for (std::uint32_t i = 0; i < n; ++i) {
      const row& x = t.r[i];
      row& o = d.rows[i];
      o.device = load(x.device);
      if (o.device < kHost || o.device >= static_cast<std::int32_t>(kMaxRows) - 1)
        return fail("usage table row of no device");
      // A writer gives each device one row: a second would list the device twice.
      bool& twice = seen[static_cast<std::size_t>(o.device - kHost)];
      if (twice) return fail("usage table with two rows of one device");
      twice = true;
      o.reserved_ = 0;
      o.live = load(x.live);
      o.cached = load(x.cached);
      o.reserved = load(x.reserved);
      o.exported = load(x.exported);
      o.imported = load(x.imported);
      o.peak_live = load(x.peak_live);
      o.peak_cached = load(x.peak_cached);
      o.peak_reserved = load(x.peak_reserved);
      o.peak_exported = load(x.peak_exported);
      o.peak_imported = load(x.peak_imported);
    }
    if (at(const_cast<std::uint32_t&>(t.seq)).load(std::memory_order_relaxed) != s1) continue;
    return d;
  }
  return fail("usage table being written (try again)");
}

}  // namespace memarea::detail::lease_table
