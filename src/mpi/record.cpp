// Records' wire form. Decoding reads only its arguments: bytes from another process are judged
// whole before anything of them reaches the group's state.
#include "record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace memarea::mpi::detail {
namespace {

// The header's layout (little-endian): magic, kind, status, rank, device, handle length,
// message length (4 bytes each), then seq, size, requested (8 bytes each).
constexpr std::size_t kMagic = 0, kKind = 4, kStatus = 8, kRank = 12, kDevice = 16,
                      kHandleLen = 20, kMessageLen = 24, kSeq = 28, kSize = 36, kRequested = 44;
static_assert(kRequested + 8 == record_header_bytes);

void put32(unsigned char* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get32(const unsigned char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t get64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::int32_t get_i32(const unsigned char* p) noexcept { return static_cast<std::int32_t>(get32(p)); }

/// "version 3", or what a version field of 0 means in a join record.
std::string version_text(std::uint32_t v) {
  return v == 0 ? std::string("version 1 or earlier (a join without a version)")
                : fmt::format("version {}", v);
}

bool known_status(std::int32_t s) noexcept { return s == 0 || status_of(s) == static_cast<errc>(s); }

template <class T>
decoded<T> refuse(refusal why, std::string text) {
  decoded<T> d;
  d.why = why;
  d.error = std::move(text);
  return d;
}

}  // namespace

const char* describe(step_kind k) noexcept {
  switch (k) {
    case step_kind::handles: return "making a window (exchanging handles)";
    case step_kind::share_handles: return "calling share() (exchanging handles)";
    case step_kind::confirm: return "making a window or share() (confirming the opens)";
    case step_kind::node_comm: return "making node_comm()";
    case step_kind::opens: return "making a window or share() (reporting the opens)";
    case step_kind::undo: return "making a window or share() (closing after a failed open)";
    case step_kind::fence: return "fencing the window";
    case step_kind::barrier: return "waiting in shared_buffers::barrier";
    case step_kind::close: return "destroying the window or closing the shared buffers";
  }
  return "an unknown step";
}

errc status_of(std::int32_t s) noexcept {
  switch (static_cast<errc>(s)) {
    case errc::invalid_value:
    case errc::invalid_device:
    case errc::out_of_memory:
    case errc::not_supported:
    case errc::no_device:
    case errc::not_found:
    case errc::busy:
    case errc::peer_access_unsupported:
    case errc::peer_access_already_enabled:
    case errc::peer_access_not_enabled:
    case errc::too_many_peers:
    case errc::invalid_handle:
    case errc::invalid_context:
    case errc::not_permitted:
    case errc::initialization:
    case errc::unknown:
      return static_cast<errc>(s);
    case errc::success:
      break;
  }
  return errc::unknown;
}

bool is_handle_step(std::int32_t kind) noexcept {
  return kind == static_cast<std::int32_t>(step_kind::handles) ||
         kind == static_cast<std::int32_t>(step_kind::share_handles);
}

bool may_fail(std::int32_t kind) noexcept {
  return is_handle_step(kind) || kind == static_cast<std::int32_t>(step_kind::opens) ||
         kind == static_cast<std::int32_t>(step_kind::confirm);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::uint32_t magic_version(std::uint32_t magic) noexcept {
  if ((magic & 0x00ffffffu) != record_magic_prefix) return 0;
  const std::uint32_t byte = magic >> 24;
  return byte > '0' ? byte - '0' : 0;
}

const char* to_string(refusal r) noexcept {
  switch (r) {
    case refusal::none: return "none";
    case refusal::truncated: return "truncated";
    case refusal::too_long: return "too_long";
    case refusal::bad_magic: return "bad_magic";
    case refusal::bad_kind: return "bad_kind";
    case refusal::bad_status: return "bad_status";
    case refusal::bad_rank: return "bad_rank";
    case refusal::bad_device: return "bad_device";
    case refusal::bad_handle: return "bad_handle";
    case refusal::bad_message: return "bad_message";
    case refusal::bad_size: return "bad_size";
    case refusal::bad_version: return "bad_version";
  }
  return "unknown";
}

void record::fail(errc code, std::string_view text) {
  // status_of maps success and any code outside the enumeration to unknown: the encoder must
  // never emit a status that every receiver refuses as malformed.
  status = static_cast<std::int32_t>(status_of(static_cast<std::int32_t>(code)));
  has_handle = false;
  handle.fill(0);
  size = 0;
  device = -1;
  set_message(text);
}

void record::set_message(std::string_view text) {
  // A NUL would end the text for C readers; a decoder refuses it rather than guess.
  text = text.substr(0, std::min(text.find('\0'), max_message));
  message.assign(text);
}

void record::set_handle(std::span<const unsigned char, handle_bytes> h) noexcept {
  std::copy(h.begin(), h.end(), handle.begin());
  has_handle = true;
}

std::vector<unsigned char> encode_record(const record& r) {
  const std::size_t hl = r.has_handle ? handle_bytes : 0;
  const std::size_t ml = std::min(r.message.size(), max_message);
  std::vector<unsigned char> out(record_header_bytes + hl + ml);
  unsigned char* p = out.data();
  put32(p + kMagic, record_magic);
  put32(p + kKind, static_cast<std::uint32_t>(r.kind));
  put32(p + kStatus, static_cast<std::uint32_t>(r.status));
  put32(p + kRank, static_cast<std::uint32_t>(r.rank));
  put32(p + kDevice, static_cast<std::uint32_t>(r.device));
  put32(p + kHandleLen, static_cast<std::uint32_t>(hl));
  put32(p + kMessageLen, static_cast<std::uint32_t>(ml));
  put64(p + kSeq, r.seq);
  put64(p + kSize, r.size);
  put64(p + kRequested, r.requested);
  if (hl) std::memcpy(p + record_header_bytes, r.handle.data(), hl);
  if (ml) std::memcpy(p + record_header_bytes + hl, r.message.data(), ml);
  return out;
}

decoded<record> decode_record(std::span<const unsigned char> bytes, const record_limits& lim) {
  using R = record;
  if (bytes.size() < 4) {
    return refuse<R>(refusal::truncated,
                     fmt::format("{} bytes, fewer than a record's magic (4)", bytes.size()));
  }
  const unsigned char* p = bytes.data();
  // The magic, then the version, before anything else, the header's length included: a record
  // of another version may lay out its header otherwise, so none of its other fields is read.
  if (const auto magic = get32(p + kMagic); magic != record_magic) {
    if ((magic & 0x00ffffffu) != record_magic_prefix) {
      return refuse<R>(refusal::bad_magic,
                       fmt::format("magic {:#010x}, not {:#010x} (not a record, or one of "
                                   "memarea's first MPI protocol, whose records had no magic)",
                                   magic, record_magic));
    }
    const std::uint32_t v = magic_version(magic);
    return refuse<R>(refusal::bad_version,
                     fmt::format("protocol {} (magic {:#010x}); this rank speaks version {}",
                                 v ? fmt::format("version {}", v)
                                   : fmt::format("version byte {:#04x}", magic >> 24),
                                 magic, protocol_version));
  }
  if (bytes.size() < record_header_bytes) {
    return refuse<R>(refusal::truncated, fmt::format("{} bytes, fewer than a record's header ({})",
                                                     bytes.size(), record_header_bytes));
  }
  // The lengths first, each against its own bound, so that the sum below cannot overflow and
  // an oversized count is named as such rather than as a short message.
  const std::uint32_t hl = get32(p + kHandleLen), ml = get32(p + kMessageLen);
  if (hl != 0 && hl != handle_bytes) {
    return refuse<R>(refusal::bad_handle,
                     fmt::format("handle length {}, neither 0 nor {}", hl, handle_bytes));
  }
  if (ml > max_message) {
    return refuse<R>(refusal::bad_message,
                     fmt::format("message length {}, above the most a record carries ({})", ml,
                                 max_message));
  }
  const std::size_t total = record_header_bytes + hl + ml;
  if (bytes.size() < total) {
    return refuse<R>(refusal::truncated,
                     fmt::format("{} bytes, fewer than the {} its header announces (handle {}, "
                                 "message {})", bytes.size(), total, hl, ml));
  }
  if (bytes.size() > total) {
    return refuse<R>(refusal::too_long,
                     fmt::format("{} bytes, more than the {} its header announces (handle {}, "
                                 "message {})", bytes.size(), total, hl, ml));
  }

  decoded<R> d;
  R& r = d.value;
  r.kind = get_i32(p + kKind);
  r.status = get_i32(p + kStatus);
  r.rank = get_i32(p + kRank);
  r.device = get_i32(p + kDevice);
  r.seq = get64(p + kSeq);
  r.size = get64(p + kSize);
  r.requested = get64(p + kRequested);
  if (r.kind < static_cast<std::int32_t>(step_kind::handles) ||
      r.kind > last_step_kind) {
    return refuse<R>(refusal::bad_kind, fmt::format("step kind {}, not a step of memarea", r.kind));
  }
  if (!known_status(r.status)) {
    return refuse<R>(refusal::bad_status, fmt::format("status {}, not a memarea status", r.status));
  }
  if (r.status != 0 && !may_fail(r.kind)) {
    return refuse<R>(refusal::bad_status,
                     fmt::format("status {} in a record of step kind {}, which reports no failure",
                                 r.status, r.kind));
  }
  if (r.rank < 0 || r.rank >= lim.comm_size) {
    return refuse<R>(refusal::bad_rank, fmt::format("rank {}, outside the communicator's {} ranks",
                                                    r.rank, lim.comm_size));
  }
  if (lim.sender >= 0 && r.rank != lim.sender) {
    return refuse<R>(refusal::bad_rank,
                     fmt::format("rank {}, but it came from rank {}", r.rank, lim.sender));
  }
  if (r.device < -1 || r.device >= max_device) {
    return refuse<R>(refusal::bad_device,
                     fmt::format("device {}, outside [-1, {})", r.device, max_device));
  }
  const unsigned char* message = p + record_header_bytes + hl;
  if (std::find(message, message + ml, '\0') != message + ml) {
    return refuse<R>(refusal::bad_message, fmt::format("a NUL inside its {}-byte message", ml));
  }
  // What each step may carry: a successful handle step shares a handle (and its memory's size
  // and device); nothing else does. Only a window's handle step carries a window's size.
  const bool handle_step = is_handle_step(r.kind);
  const bool shares = handle_step && r.status == 0;
  if (shares != (hl != 0)) {
    return refuse<R>(refusal::bad_handle,
                     shares ? std::string("a successful handle step without a handle")
                            : fmt::format("a handle in a {} record of step kind {}",
                                          r.status ? "failed" : "successful", r.kind));
  }
  if (shares ? r.size == 0 : r.size != 0) {
    return refuse<R>(refusal::bad_size,
                     shares ? std::string("a handle to 0 bytes")
                            : fmt::format("size {} in a record that shares nothing", r.size));
  }
  if (!shares && r.device != -1) {
    return refuse<R>(refusal::bad_device,
                     fmt::format("device {} in a record that shares nothing", r.device));
  }
  if (r.kind != static_cast<std::int32_t>(step_kind::handles) && r.requested != 0) {
    return refuse<R>(refusal::bad_size,
                     fmt::format("a window size ({}) in a record of step kind {}", r.requested,
                                 r.kind));
  }
  r.has_handle = hl != 0;
  if (hl) std::memcpy(r.handle.data(), p + record_header_bytes, hl);
  r.message.assign(reinterpret_cast<const char*>(message), ml);
  return d;
}

std::array<unsigned char, join_record_bytes> encode_join(const join_record& j) noexcept {
  std::array<unsigned char, join_record_bytes> out{};
  put64(out.data(), j.key);
  put32(out.data() + 8, static_cast<std::uint32_t>(j.status));
  put32(out.data() + 12, j.version);
  return out;
}

decoded<join_record> decode_join(std::span<const unsigned char> bytes, std::uint32_t version) {
  using J = join_record;
  if (bytes.size() != join_record_bytes) {
    return refuse<J>(bytes.size() < join_record_bytes ? refusal::truncated : refusal::too_long,
                     fmt::format("{} bytes, not {}", bytes.size(), join_record_bytes));
  }
  // The version first: the other fields of another version's join may mean something else.
  if (const std::uint32_t v = get32(bytes.data() + 12); v != version) {
    return refuse<J>(refusal::bad_version,
                     fmt::format("protocol {}; this rank speaks version {}", version_text(v),
                                 version));
  }
  decoded<J> d;
  d.value.key = get64(bytes.data());
  d.value.status = get_i32(bytes.data() + 8);
  d.value.version = version;
  if (d.value.status != 0 && d.value.status != static_cast<std::int32_t>(errc::invalid_value)) {
    return refuse<J>(refusal::bad_status,
                     fmt::format("status {}, neither 0 nor invalid_value", d.value.status));
  }
  return d;
}

}  // namespace memarea::mpi::detail
