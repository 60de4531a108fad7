// The records the ranks of a node exchange, and their wire form. A record arrives as bytes from
// another process: nothing of it is used before decode_record has checked every field. This
// file needs no MPI, so that the decoder is fuzzed (tests/fuzz/fuzz_mpi_record.cpp) and unit
// tested (tests/mpi/record_test.cpp) without an MPI job.
#pragma once

#include <memarea/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memarea::mpi::detail {

/// The kind of one step, carried in its records so that ranks making different collective
/// calls (one fences while another destroys) are told so instead of matching each other.
enum class step_kind : std::int32_t {
  handles = 1,  ///< making a window: the handle exchange
  opens = 2,    ///< making a window or share(): the report of the opens
  undo = 3,     ///< making a window or share(): closing after a failed open
  fence = 4,    ///< shared_window::fence
  barrier = 5,  ///< shared_buffers::barrier
  close = 6,    ///< shared_window::destroy, shared_buffers::close
  /// share(): the handle exchange. A kind of its own, so that a rank calling share() against
  /// one making a window fails as a mismatch rather than as a size that differs.
  share_handles = 7,
  /// making a window or share(): whether every rank accepted every record of the opens step,
  /// so that a constructor succeeds everywhere or fails everywhere.
  confirm = 8,
  node_comm = 9,  ///< node_comm()'s first call, before its blocking MPI_Comm_create_group
};
/// The highest step_kind: kinds lie in [1, last_step_kind].
inline constexpr std::int32_t last_step_kind = static_cast<std::int32_t>(step_kind::node_comm);

/// Whether a step of this kind shares a handle on success (handles, share_handles).
bool is_handle_step(std::int32_t kind) noexcept;
/// Whether a record of this kind may report a failure (a non-zero status): the handle steps,
/// opens and confirm. The others (undo, fence, barrier, close, node_comm) carry nothing but
/// their kind; a status there would be dropped unseen, so the decoder refuses it.
bool may_fail(std::int32_t kind) noexcept;

/// text with every byte outside printable ASCII, and the backslash, escaped as \xNN (\\),
/// so that a peer's message cannot put control sequences on a terminal or into a log.
std::string printable(std::string_view text);

/// What a rank making a step of this kind is doing, in words ("fencing the window").
const char* describe(step_kind k) noexcept;

/// A peer's status as memarea::errc: values outside the enumeration become errc::unknown, 0
/// included (a failed record never carries success). decode_record refuses both already.
errc status_of(std::int32_t status) noexcept;

/// The version of memarea's MPI protocol: the records' wire form, the step kinds and what each
/// step carries. The ranks of a job must all speak the same one. Every record names its version
/// (the last byte of a step record's magic, the last 4 bytes of a join record), and a rank
/// refuses a record of another version (refusal::bad_version), so that the group fails naming
/// the sender and both versions rather than misreading its fields. The join, the first exchange
/// of every window and share(), is where ranks of different versions meet: they fail there,
/// every rank alike, before anything is allocated.
///  * 1 named two protocols: dd4b89f's (fixed records of 584 bytes, no magic, step kinds 1-6)
///    and 67edb87's (this wire form, magic "MMR1", step kinds 1-9; joins without a version).
///  * 2: step kinds 7-9 (share_handles, confirm, node_comm) part of the protocol, and the join
///    record carries the version (its last 4 bytes, zero in both protocols of version 1).
inline constexpr std::uint32_t protocol_version = 2;

/// Bytes of an IPC handle (memarea::ipc::handle::bytes).
inline constexpr std::size_t handle_bytes = 128;
/// The longest message a record carries, in bytes (longer ones are cut).
inline constexpr std::size_t max_message = 1024;
/// Device ordinals a record may name: [-1, max_device) (-1: none).
inline constexpr std::int32_t max_device = 1 << 16;

/// What each rank tells the others at one step: its status and, on success, what it shares.
struct record {
  std::int32_t status = 0;  ///< memarea::errc of this rank's step (0: it succeeded)
  std::int32_t rank = -1;   ///< the sender's rank in the user's communicator
  std::int32_t device = -1; ///< the device of the sender's memory (-1: none)
  std::int32_t kind = 0;    ///< step_kind of the step (set by group::exchange)
  std::uint64_t seq = 0;    ///< the step's sequence number in its group (set by group::exchange)
  std::uint64_t size = 0;   ///< bytes of the sender's memory, from its pointer to its end
  std::uint64_t requested = 0;  ///< a window's bytes_per_rank (0: share())
  bool has_handle = false;      ///< whether `handle` is shared (a successful handle step)
  std::array<unsigned char, handle_bytes> handle{};  ///< its IPC handle (zero without one)
  /// The failure's message; on a successful handle step, the PCI bus id of the memory's device.
  /// At most max_message bytes, no NUL.
  std::string message;

  /// Records a failure: status (success and codes outside memarea::errc become unknown, so
  /// that decode_record accepts what is encoded), message (cut to fit); a failed record shares
  /// nothing, so the handle, size and device are cleared.
  void fail(errc code, std::string_view text);
  /// Sets the message: text up to its first NUL, cut to max_message bytes.
  void set_message(std::string_view text);
  /// Shares `h`.
  void set_handle(std::span<const unsigned char, handle_bytes> h) noexcept;

  bool operator==(const record&) const = default;
};

/// A record's wire form: a header of record_header_bytes (magic, version, the fixed fields and
/// the lengths of what follows, little-endian), the handle (0 or handle_bytes bytes), then the
/// message (no NUL). Exactly that long: the receiver passes the count MPI received.
inline constexpr std::size_t record_header_bytes = 52;
/// The longest wire form: what a receive buffer holds.
inline constexpr std::size_t max_record_bytes = record_header_bytes + handle_bytes + max_message;
/// The first 3 bytes of a record's wire form, "MMR" (little-endian, in the low 3 bytes).
inline constexpr std::uint32_t record_magic_prefix = 0x00524d4d;
/// The first 4 bytes of a record's wire form: "MMR", then '0' + protocol_version ("MMR2").
inline constexpr std::uint32_t record_magic =
    record_magic_prefix | ((std::uint32_t{'0'} + protocol_version) << 24);
/// The protocol version a magic names ("MMR" and '0' + version): 0 for a 4th byte at or below
/// '0', and for a magic without the "MMR" prefix (not a record of any version).
std::uint32_t magic_version(std::uint32_t magic) noexcept;

/// The wire form of r. Every record that decode_record accepts comes back byte for byte;
/// records made through fail/set_message/set_handle and the defaults are such records.
std::vector<unsigned char> encode_record(const record& r);

/// Why decode_record refused some bytes.
enum class refusal {
  none = 0,        ///< accepted
  truncated,       ///< fewer bytes than the header, or than the lengths it gives
  too_long,        ///< more bytes than the header's lengths account for
  bad_magic,       ///< not a record of this protocol (another version of memarea?)
  bad_kind,        ///< kind is no step_kind
  bad_status,      ///< status is neither 0 nor a memarea status, or non-zero where none goes
  bad_rank,        ///< rank outside the communicator, or not the sender's
  bad_device,      ///< device outside [-1, max_device)
  bad_handle,      ///< handle length other than 0 or handle_bytes, or a handle where none goes
  bad_message,     ///< message longer than max_message, or holding a NUL
  bad_size,        ///< size or requested where none goes, or a handle of 0 bytes
  bad_version,     ///< a record of another version of the protocol (protocol_version)
};

/// "truncated", "too_long", ...
const char* to_string(refusal r) noexcept;

/// What the receiver knows of a record before reading it.
struct record_limits {
  int comm_size = 0;  ///< ranks of the user's communicator: a record's rank lies in [0, comm_size)
  int sender = -1;    ///< the rank it came from (-1: any rank of the communicator)
};

/// The outcome of decoding: the value when `why` is refusal::none, else `error` says which
/// field is wrong and how.
template <class T>
struct decoded {
  T value{};
  refusal why = refusal::none;
  std::string error;
  bool ok() const noexcept { return why == refusal::none; }
};

/// Decodes a record received from another process. Pure: reads only `bytes` and `limits`.
/// Checks every field: the magic, then the version (a record of another protocol version is
/// refused before any other field is read: its layout may differ), the length against the
/// header's lengths, kind, status, rank (in the communicator, and the sender's), device, handle
/// length, message length and bytes, and what each kind of step may carry (only a successful handle step shares a handle, a
/// size and a device; only a window's handle step carries a window size; only the handle,
/// opens and confirm steps carry a failure).
decoded<record> decode_record(std::span<const unsigned char> bytes, const record_limits& limits);

/// What every rank sends in the join allgather: its node key, whether its test settings are
/// malformed, and the protocol version it speaks.
struct join_record {
  std::uint64_t key = 0;
  std::int32_t status = 0;  ///< 0, or errc::invalid_value: this rank's test settings are malformed
  std::uint32_t version = protocol_version;  ///< the sender's protocol version
  bool operator==(const join_record&) const = default;
};

/// The join record's wire form: the key, the status, the version (little-endian). Version 1's
/// join had 4 zero bytes where the version goes.
inline constexpr std::size_t join_record_bytes = 16;

/// The wire form of j.
std::array<unsigned char, join_record_bytes> encode_join(const join_record& j) noexcept;
/// Decodes a join record: exactly join_record_bytes, of protocol version `version` (this rank's;
/// another one is refused first, as bad_version, naming both), status 0 or invalid_value.
decoded<join_record> decode_join(std::span<const unsigned char> bytes,
                                 std::uint32_t version = protocol_version);

}  // namespace memarea::mpi::detail
