// What the memory and pool rooms tell a room above them about the memory they free, and what
// lookup() asks of it: one observer, held by the registry (registry::observer). The rooms below
// call the observer, never the room behind it. IPC, which shares memory with other processes
// and may have to hold a free back until they close it, sets itself as the observer when it
// makes its state or a record of its own; until then a free pays one load of a null pointer.
#pragma once

#include "core/memory/registry.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace memarea::detail {

/// A pool's sub-allocation that the observer shares (pool_mark_exported): which piece of which
/// pool, in which incarnation (a piece freed and handed out again is another one), under which
/// id.
struct pool_piece {
  const void* pool = nullptr;     ///< the pool_state (null: none, or the pool was destroyed)
  std::uint64_t serial = 0;       ///< the pool's serial (a new pool may reuse the address)
  std::uint32_t span = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t export_id = 0;    ///< the observer's id of this sub-allocation
  void* base = nullptr;
  std::size_t size = 0;
  /// The bytes its allocation asked for (what is shared; size is the piece's capacity).
  std::size_t requested = 0;
};

/// What a free means once the observer had its say.
enum class free_outcome {
  released,  ///< free it now
  deferred,  ///< the observer holds it (another process has it open) and gives it back later
};

/// What lookup() reports of memory the observer mapped: the buffer another process shared.
struct observed_range {
  void* base = nullptr;
  std::size_t size = 0;
  int device = 0;  ///< where the memory lives (another process's device)
};

/// The observer of frees and lookups (registry::set_observer). Its calls come from under the
/// locks named at each; it takes only locks ranked below them (docs/design.md's lock order).
class memory_observer {
 public:
  /// Record r, accepted by its free's own checks, is about to leave the registry
  /// (free_record, under the registry's lock). Throws to refuse, nothing changed (busy while
  /// other processes have it open under the refuse policy; invalid_value for memory that only
  /// the observer's own calls free). deferred: the observer gives it back to the driver later,
  /// the caller must not.
  virtual free_outcome before_free(const record& r) = 0;
  /// A pool piece marked shared (pool_mark_exported) is being freed, under its pool's arena
  /// lock. deferred: the pool holds it back until the observer gives it back
  /// (pool_release_held). Throws busy under the refuse policy unless force_defer (a forced
  /// destroy), nothing changed.
  virtual free_outcome before_piece_free(const pool_piece& piece, bool force_defer) = 0;
  /// A destroyed pool's block r, out of the registry already, whose pieces export_ids are held
  /// for other processes: the observer gives it back to the driver once they closed them.
  /// false: none is held any more; the caller frees the block now.
  virtual bool adopt_block(const record& r, const std::vector<std::uint64_t>& export_ids) = 0;
  /// Pool block `id` goes back to the driver: the observer forgets what it kept of it.
  virtual void forget_block(std::uint64_t id) = 0;
  /// lookup() of p inside record r, one whose owner is this observer (the records it makes
  /// of memory it mapped say so): what it mapped there (nullopt: lookup reports r itself).
  virtual std::optional<observed_range> describe(const record& r, const void* p) = 0;

 protected:
  memory_observer() = default;
  ~memory_observer() = default;
};

/// Hooks of the memory room that a room above it arms (constinit: armed from a static
/// initializer, read with no lock).
namespace memory_events {
/// Called once by the next device allocation of an area, which disarms it first: IPC arms it
/// when memarea is loaded and in a child of fork(), so that its lease and segment are made in
/// the background before a first export needs them.
inline constinit std::atomic<void (*)() noexcept> first_device_allocation{nullptr};
}  // namespace memory_events

}  // namespace memarea::detail
