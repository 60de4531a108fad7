// The export half of legacy IPC: this process's shared segment, the handles it made, and the
// frees that wait for importers. One lock (ipc_export), innermost of core's: a free's call of
// the registry's observer takes it under the registry's lock, so code holding it never takes
// the registry's.
#pragma once

#include "base/fork_safety.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/ipc/ipc_wire.hpp"
#include "core/memory/device_uses.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/memory/registry.hpp"

#include <memarea/ipc.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace memarea::detail::ipc_internal {

class exporter {
 public:
  exporter() = default;
  exporter(const exporter&) = delete;
  exporter& operator=(const exporter&) = delete;

  /// The handle of ptr, inside the memarea allocation r (device memory of this process).
  /// Creates the segment on the first export. Throws what the driver or /dev/shm refuses.
  wire export_handle(const void* ptr, const record& r);
  /// The handle of ptr inside the pool sub-allocation piece of pool block r: the block's
  /// driver handle (asked once per block), the piece's own range and export id.
  wire export_pooled(const void* ptr, const record& r, const pool_piece& piece);
  /// Forgets export id's export after a free raced with its first export (see the callers).
  void drop(std::uint64_t id);

  /// What a free of an allocation meant for its export.
  enum class free_outcome { not_exported, released, deferred };
  /// A free's observer call (under the registry's lock): deferred when the driver free must wait
  /// for the importers to close. Throws busy under the refuse policy while importers remain.
  free_outcome on_free(const record& r);

  /// A marked pool sub-allocation is being freed (memory_observer::before_piece_free).
  free_outcome on_pool_free(const pool_piece& piece, bool force_defer);
  /// A destroyed pool's block with held pieces (memory_observer::adopt_block).
  bool adopt_block(const record& r, const std::vector<std::uint64_t>& export_ids);
  /// Pool block id goes back to the driver (memory_observer::forget_block).
  void forget_block(std::uint64_t id);

  void set_policy(std::uint64_t id, ipc::free_policy p);
  void set_policy(ipc::free_policy p) { policy_.store(p); }
  ipc::free_policy policy() const { return policy_.load(); }
  /// Processes that have record id open (gone ones purged first): exact, so it reads leases.
  int importers(std::uint64_t id);
  std::size_t deferred() const { return deferred_count_.load(); }
  /// Frees deferred memory no importer holds any more, after purging gone importers (pool
  /// sub-allocations go back to their pools, with no lock of the exporter held); returns how
  /// many frees finished. The background thread's tick and ipc::collect().
  std::size_t finish_deferred();
  /// Adds the frees of device's memory that wait for other processes to close it (device
  /// reset); a live pool's pieces among them are its pool's to report (held pieces).
  void device_uses(int device, detail::device_uses& out);

  /// open() of a handle this process made: the pointer, counted for close_own. *size, when
  /// asked for, receives the bytes from the pointer to the end of the buffer.
  void* open_own(const wire& w, std::size_t* size = nullptr);
  /// close() of a pointer open_own returned: false when ptr is not one.
  bool close_own(void* ptr);
  /// Whether w names this process's segment.
  bool made_here(const wire& w) const noexcept {
    return w.owner == owner_.load(std::memory_order_acquire) && w.segment == segment_id_;
  }

  /// Makes the segment (and so this process's lease) if it does not exist yet.
  void prepare();

  /// At exit: frees what it can and removes the segment.
  void shutdown();

 private:
  struct exported {
    void* driver_base = nullptr;
    std::size_t driver_size = 0;
    std::uint64_t begin = 0;  ///< the exported range of the driver's allocation
    std::uint64_t end = 0;
    int device = 0;
    ipc_native_handle native{};
    std::uint32_t slot = 0;
  };
  /// A destroyed pool's block, freed once its held sub-allocations are closed everywhere.
  struct block_wait {
    record r;
    std::size_t pending = 0;
  };
  /// A free waiting for importers: area memory (r), or a pool's sub-allocation (piece), or a
  /// sub-allocation of a destroyed pool's block (block).
  struct deferred_free {
    record r;
    std::uint32_t slot = 0;
    pool_piece piece;
    std::shared_ptr<block_wait> block;
  };

  /// The export of buffer id ends (its memory is being freed; base for messages): released,
  /// or deferred with d (its slot filled in here) waiting until the importers are gone; busy
  /// under the refuse policy unless force_defer.
  free_outcome end_export_locked(std::uint64_t id, const void* base, bool force_defer,
                                 deferred_free d);
  /// Maps this process's segment on the first export; not_permitted once another process has
  /// cut it short.
  void ensure_segment_locked();
  /// Undoes the export at `it`, just made, and throws cut_short() if filling its slot found
  /// the segment cut short.
  void forget_if_cut_short_locked(std::unordered_map<std::uint64_t, exported>::iterator it);
  error cut_short() const;
  std::unordered_map<std::uint64_t, exported>::iterator add_export_locked(const record& r);
  wire make_wire_locked(const void* ptr, std::uint64_t id, const exported& e) const;
  std::uint32_t claim_slot_locked(std::uint64_t id, std::uint64_t begin, std::uint64_t end,
                                  std::uint64_t digest, int device);
  void release_slot_locked(std::uint32_t i);
  /// Finishes what it can; the pool sub-allocations to give back (after unlocking) go to done.
  std::size_t finish_deferred_locked(std::vector<pool_piece>& done);

  ranked_mutex m_{lock_rank::ipc_export};
  segment* seg_ = nullptr;
  /// fault_guard's watch of seg_: another process that cuts the segment short makes exports
  /// fail from then on, instead of killing this process.
  int seg_guard_ = -1;
  std::string seg_name_;
  std::atomic<std::uint64_t> owner_{0};  ///< this process's lease, once the segment exists
  std::uint64_t segment_id_ = 0;         ///< the random part of the segment's name
  std::int32_t pid_ = 0;
  std::uint32_t hint_ = 0;
  std::vector<std::uint32_t> free_slots_;  ///< released slots, most recent last
  /// Which slots this process uses (exported or waiting for importers), kept here: the
  /// segment's own fields can be written by other processes, so they never say a slot is taken.
  std::vector<std::uint8_t> slot_used_;
  /// What each used slot counts as exported (usage counters), kept here for the same reason.
  struct slot_bytes {
    std::uint64_t bytes = 0;
    int device = 0;
  };
  std::vector<slot_bytes> slot_bytes_;
  std::unordered_map<std::uint64_t, exported> exports_;
  std::unordered_map<std::uint64_t, ipc_native_handle> block_natives_;  ///< pool block id ->
  std::unordered_map<std::uint64_t, ipc::free_policy> policies_;
  std::vector<deferred_free> deferred_;
  std::atomic<std::size_t> deferred_count_{0};
  std::unordered_map<void*, int> self_opened_;
  std::atomic<bool> tracking_{false};  // anything exported or a per-buffer policy set
  std::atomic<ipc::free_policy> policy_{ipc::free_policy::defer};
};

/// invalid_handle: w does not match what its exporter shared.
error mismatch(const wire& w);
/// invalid_handle: w's buffer was freed.
error stale(const wire& w);

}  // namespace memarea::detail::ipc_internal
