// The shared segment an exporting process publishes ("/memarea-ipc-<owner>-<random>"): which of
// its buffers are live, what each really is (importers check handles against it), and which
// processes have each open. Plain integers accessed only through std::atomic_ref, so the layout
// is the same in every process and zero bytes are a valid state. Any process of the same user
// can write it: the exporter and importers never trust it for memory safety, only for
// bookkeeping (what the driver says bounds every mapping).
#pragma once

#include <atomic>
#include <cstdint>

namespace memarea::detail::ipc_internal {

constexpr std::uint64_t kSegmentMagic = 0x4d454d4152454153ull;  // "SAERAMEM"
/// Version 4: a buffer is a range [begin, end) of its driver allocation (a pool's
/// sub-allocation; the whole allocation otherwise). Version 3 named processes by their lease
/// (base/lease.hpp) instead of pid and start time.
constexpr std::uint32_t kSegmentVersion = 4;
constexpr std::uint32_t kBuffers = 4096;        ///< live exported buffers per process
constexpr std::uint32_t kImporterSlots = 32;    ///< importer processes per buffer

/// One importing process of a buffer.
struct importer_slot {
  std::uint64_t owner;  ///< the importer's lease; 0: free slot
  std::int32_t pid;     ///< the importer's pid in its own namespace (diagnostics only)
  std::uint32_t reserved;
};

/// One exported buffer. What an importer checks a handle against: the exporter wrote it, and a
/// handle cannot change it.
struct buffer_slot {
  std::uint64_t id;  ///< the exporter's id of the buffer (never reused in its life); 0: free slot
  std::uint32_t live;       ///< 1 until the exporter frees the buffer
  /// The device the buffer lives on, plus one (0: not said; diagnostics, `memarea ps`).
  std::uint32_t device;
  /// The exported bytes: [begin, end) of the driver's allocation (a handle's offset must lie
  /// inside). A pool's sub-allocations share their block's driver handle, each its own range.
  std::uint64_t begin;
  std::uint64_t end;
  std::uint64_t digest;     ///< native_digest of the driver handle the exporter made
  /// Processes that have it open. Counted from here, never kept apart: a count could be made
  /// to disagree with the slots (and wrap).
  importer_slot who[kImporterSlots];
};

struct segment {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t buffers;
  std::int32_t owner_pid;     ///< diagnostics only
  std::uint32_t owner_alive;  ///< 0 once the owner exited cleanly
  std::uint64_t owner;        ///< the exporter's lease
  buffer_slot slot[kBuffers];
};

template <class T>
std::atomic_ref<T> at(T& x) noexcept {
  return std::atomic_ref<T>(x);
}

/// Importer slots of b in use.
inline std::uint32_t importers_of(buffer_slot& b) noexcept {
  std::uint32_t n = 0;
  for (auto& s : b.who) n += at(s.owner).load() != 0;
  return n;
}
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free &&
                  std::atomic_ref<std::int32_t>::is_always_lock_free,
              "shared-memory counters need lock-free atomics");

}  // namespace memarea::detail::ipc_internal
