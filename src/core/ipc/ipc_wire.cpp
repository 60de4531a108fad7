#include "core/ipc/ipc_wire.hpp"

#include "base/lease.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/system.hpp"

#include <memarea/error.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstring>

namespace memarea::detail::ipc_internal {

std::uint64_t checksum(const wire& w) noexcept {
  // A multiply-xorshift over the 15 words before the checksum: garbage passes with odds near
  // 2^-64 (and the magic must match too). It guards against accidents, not an adversary (who
  // can recompute it): what a handle claims is checked against the exporter's segment.
  static_assert(offsetof(wire, checksum) % 8 == 0);
  std::uint64_t h = 0x6d656d6172656131ull;
  const auto* p = reinterpret_cast<const unsigned char*>(&w);
  for (std::size_t i = 0; i < offsetof(wire, checksum); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h;
}

namespace {
std::uint32_t hash_name(const char* name) {
  std::uint32_t h = 2166136261u;
  for (; *name; ++name) {
    h ^= static_cast<unsigned char>(*name);
    h *= 16777619u;
  }
  return h;
}
}  // namespace

namespace {
/// The active backend's tag once computed, with bit 32 set (0: not yet). Not a function-local static: its guard,
/// pending in a thread at fork(), would hang the child. The backend never changes in a process.
std::atomic<std::uint64_t> g_backend_tag{0};
}  // namespace

std::uint32_t backend_tag() {
  if (std::uint64_t t = g_backend_tag.load(std::memory_order_relaxed)) [[likely]]
    return static_cast<std::uint32_t>(t);
  const std::uint32_t t = hash_name(system::get().gpu().name());
  g_backend_tag.store(std::uint64_t{1} << 32 | t, std::memory_order_relaxed);
  return t;
}

std::string segment_name(std::uint64_t owner, std::uint64_t segment) {
  return lease::object_name("ipc", owner, segment, 16);
}

std::uint64_t native_digest(const unsigned char (&native)[64]) noexcept {
  std::uint64_t h = 0x6e61746976656831ull;
  for (std::size_t i = 0; i < sizeof native; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, native + i, 8);
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
  }
  return h;
}

wire parse(const ipc::handle& h) {
  static_assert(sizeof h.bytes == 128);
  return parse_bytes(*reinterpret_cast<const unsigned char(*)[128]>(h.bytes.data()));
}

wire parse_bytes(const unsigned char (&bytes)[128]) {
  wire w;
  std::memcpy(&w, bytes, sizeof w);
  auto bad = [](const std::string& why) {
    return error(errc::invalid_handle, "not a valid memarea IPC handle: " + why);
  };
  if (w.magic != kHandleMagic) throw bad("bad magic");
  if (w.version != kHandleVersion)
    throw bad(fmt::format("version {} (this memarea reads version {})", w.version,
                          kHandleVersion));
  if (w.checksum != checksum(w)) throw bad("checksum mismatch (corrupted bytes)");
  // The offset is checked against the exporter's segment and the driver at the open: the
  // handle says nothing trusted about the allocation's size.
  if (w.owner == 0 || w.segment == 0 || w.buffer_id == 0 || w.slot >= kBuffers ||
      w.reserved != 0)
    throw bad("fields out of range");
  if (w.backend != backend_tag())
    throw bad(fmt::format("exported by another backend than this process's '{}'",
                          system::get().gpu().name()));
  return w;
}

ipc_native_handle native_of(const ipc::handle& h) {
  wire w = parse(h);
  ipc_native_handle n;
  std::memcpy(n.bytes, w.native, sizeof n.bytes);
  return n;
}

}  // namespace memarea::detail::ipc_internal

// --- the handle's text form ----------------------------------------------------------------------

namespace memarea::ipc {

namespace {
constexpr char kHex[] = "0123456789abcdef";
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string handle::to_hex() const {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

handle handle::from_hex(std::string_view hex) {
  if (hex.size() != 256)
    throw error(errc::invalid_value,
                fmt::format("handle::from_hex: {} characters, not 256", hex.size()));
  handle h;
  for (std::size_t i = 0; i < 128; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw error(errc::invalid_value,
                  fmt::format("handle::from_hex: character {} is not a hex digit", 2 * i));
    h.bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return h;
}

}  // namespace memarea::ipc
