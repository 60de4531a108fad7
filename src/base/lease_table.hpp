// The table a process publishes at the start of its lease (base/lease.hpp): who it is (pid in
// its own namespace, that namespace's inode, uid, start time, command name) and its memory
// usage per device, for `memarea ps` in other processes. Fixed layout, versioned, written by the
// owner only (a whole table per pwrite, its sequence count bumped each time), read with pread.
//
// A reader trusts nothing in it: decode() checks the magic, version, sizes, row count and the
// sequence, and copies out only what those bounds allow. Any process of the same user can
// write the file, so a table may lie about its owner's usage; it cannot make a reader fault.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memarea::detail::lease_table {

inline constexpr std::uint64_t kMagic = 0x4547535541454d4dull;  // "MMEAUSGE"
inline constexpr std::uint32_t kVersion = 1;
/// Rows: one per device below 64, and the host's.
inline constexpr std::uint32_t kMaxRows = 65;
/// The device number a row gives the host (MEMAREA_CPU_DEVICE_ID).
inline constexpr std::int32_t kHost = -1;

/// One device's figures (docs/usage.md), bytes.
struct row {
  std::int32_t device;  ///< an ordinal, or kHost
  std::uint32_t reserved_;
  std::uint64_t live, cached, reserved, exported, imported;
  std::uint64_t peak_live, peak_cached, peak_reserved, peak_exported, peak_imported;
};

/// The table's layout in the file (every field read and written through std::atomic_ref).
struct layout {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t bytes;      ///< sizeof(layout) as its writer was built
  std::uint32_t seq;        ///< odd while the owner writes
  std::int32_t pid;         ///< the owner's pid in its own PID namespace
  std::uint64_t pid_ns;     ///< the inode of that namespace (/proc/self/ns/pid), 0 if unknown
  std::uint32_t uid;
  std::uint32_t rows;       ///< rows filled, at most kMaxRows
  std::uint64_t start_ns;   ///< when the owner made its lease, CLOCK_REALTIME nanoseconds
  char comm[16];            ///< the owner's command name (/proc/self/comm), NUL-padded
  row r[kMaxRows];
};
/// Bytes the lease keeps for the table (a whole page; the stamp follows).
inline constexpr std::size_t kBytes = 8192;
static_assert(sizeof(layout) <= kBytes);

/// What a reader makes of a table.
struct decoded {
  std::int32_t pid = 0;
  std::uint64_t pid_ns = 0;
  std::uint32_t uid = 0;
  std::uint64_t start_ns = 0;
  std::string comm;
  std::vector<row> rows;
};

/// Writes the owner's identity into a zeroed table (once, before any publish).
void init(layout& t, std::int32_t pid, std::uint64_t pid_ns, std::uint32_t uid,
          std::uint64_t start_ns, const char* comm) noexcept;
/// Puts rows (at most kMaxRows) into the owner's copy of its table, bumping the sequence count
/// (odd while it writes: what a reader of a mapping would see).
void publish(layout& t, const row* rows, std::uint32_t n) noexcept;
/// Decodes the first `size` bytes of a lease as read (a copy, or the mapping itself: every read
/// is bounded and atomic); nullopt, with *why set, when they are not a table this reader knows
/// (rows of no device, or two of one, among them) or a write was under way for every try.
std::optional<decoded> decode(const void* bytes, std::size_t size, std::string* why = nullptr);

}  // namespace memarea::detail::lease_table
