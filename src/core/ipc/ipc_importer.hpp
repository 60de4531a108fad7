// The import half of legacy IPC: other processes' buffers, reference-counted per pointer and
// kept in an LRU cache once closed, so that a re-open costs a hash lookup. A buffer (entry) is
// a range of a driver mapping; the buffers of one driver allocation (a pool block's
// sub-allocations) share one mapping, opened through the driver once. One lock (ipc_import),
// which may take the registry's inside it and never the exporter's. ipc_importer.cpp opens,
// closes and caches; ipc_first_import.cpp maps a new exporter's segment.
#pragma once

#include "base/fork_safety.hpp"
#include "core/ipc/ipc_liveness.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/ipc/ipc_wire.hpp"
#include "core/memory/device_uses.hpp"

#include "driver/driver.hpp"

#include <memarea/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memarea::detail::ipc_internal {

class importer {
 public:
  /// Reads MEMAREA_IPC_CACHE_LIMIT, MEMAREA_IPC_TIMING and MEMAREA_IPC_OVERLAP
  /// (invalid_value when malformed).
  importer();
  importer(const importer&) = delete;
  importer& operator=(const importer&) = delete;

  /// Maps (or finds cached) the buffer w names, on device, and returns its pointer. `self` is
  /// this process's lease (what its importer slots carry). *size, when asked for, receives the
  /// bytes from the pointer to the end of the buffer.
  void* open(const wire& w, int device, std::uint64_t self, std::size_t* size = nullptr);
  /// Closes what open returned; invalid_value for anything else.
  void close(void* ptr);

  void set_limit(std::size_t n);
  std::size_t limit() const { return limit_.load(); }
  std::size_t cached();
  /// Mappings opened through the driver in this process's life (a pool block's sub-allocations
  /// share one).
  std::size_t driver_opens() const { return driver_opens_.load(); }
  /// First imports from an exporter whose driver open overlapped the segment's mapping.
  std::size_t overlapped_opens() const { return overlapped_opens_.load(); }
  /// Of those, the ones whose segment the keeper's thread mapped.
  std::size_t keeper_segment_jobs() const { return keeper_segment_jobs_.load(); }
  /// Whether first imports may overlap here: MEMAREA_IPC_OVERLAP allows it, and this
  /// process's affinity lets the keeper run beside the importing thread.
  bool can_overlap() const noexcept { return several_cpus_ && overlap_; }
  /// Tests: whether a refused forgery makes first imports check first now.
  bool forgery_paused() noexcept {
    std::lock_guard lock(m_);
    return !may_overlap() && several_cpus_ && overlap_;
  }
  /// Tests: first imports may overlap again at once.
  void end_forgery_pause() {
    std::lock_guard lock(m_);
    check_first_until_ = 0;
  }
  /// How long after the post a first import whose driver open is done waits for the keeper to
  /// begin mapping the segment, before it maps the segment itself. A sleeping keeper begins
  /// tens of microseconds after the post (an idle CPU's wake-up). An idle keeper runs a
  /// posted job before any round, so only a slower wake-up or preemption (a loaded machine)
  /// lets the grace run out.
  static constexpr std::chrono::microseconds kKeeperGrace{120};
  /// How long a refused forgery makes first imports check before they open.
  static constexpr std::chrono::seconds kForgeryPause{60};
  /// Driver mappings open now (cached buffers' included).
  std::size_t mappings();
  /// (owner pid, buffer id) of the cached mappings, most recently used first.
  std::vector<std::pair<std::int32_t, std::uint64_t>> cached_keys();

  /// Tests every watched exporter's lease and drops cached mappings of gone exporters and of
  /// freed buffers. The background thread's tick and ipc::collect().
  void check_exporters();

  /// At exit: closes every mapping.
  void shutdown();

  /// An open imported buffer, as lookup() reports it.
  struct buffer_range {
    void* base = nullptr;
    std::size_t size = 0;
    int device = 0;  ///< the exporter's device (where the memory lives)
  };
  /// The buffer open now (not only cached) that holds p, inside the driver mapping at
  /// mapping_base; the whole mapping when no open buffer holds p; nullopt when mapping_base
  /// is no mapping of this importer.
  std::optional<buffer_range> buffer_at(const void* mapping_base, const void* p);

  /// Adds the buffers open now (not only cached) in mappings made on device (device reset).
  void device_uses(int device, detail::device_uses& out);
  /// Closes the cached (closed) buffers whose mapping was made on device, and so those
  /// mappings: a device reset would unmap them under the cache.
  void drop_device(int device);

 private:
  struct key {
    std::uint64_t owner;
    std::uint64_t buffer;
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      return std::hash<std::uint64_t>()(k.buffer * 0x9e3779b97f4a7c15ull ^ k.owner);
    }
  };
  /// One exporting process this process imports from.
  struct source {
    segment* seg = nullptr;
    std::uint64_t owner = 0;
    std::uint64_t segment_id = 0;
    std::int32_t pid = 0;
    int entries = 0;
    /// fault_guard's watch of seg: a segment cut short reads as zeros, and as damaged here.
    int guard = -1;
    /// The exporter's lease, kept open. Made by the first check_exporters after the first
    /// import (the background thread's next tick), not by the import: opening and testing it
    /// cost a first import three system calls. Until then, an exporter that died is refused
    /// by the driver's open (the lease is tested then, for the message).
    std::unique_ptr<exporter_watch> watch;
    /// What the last check found (check_exporters, every tick): a re-open reads this local
    /// flag, not the segment's header page. A clean exit is seen at once all the same: the
    /// exporter marks every buffer it still shares freed (the slot a re-open reads anyway).
    bool known_gone = false;
    bool alive() const noexcept {
      return at(seg->owner_alive).load() && !(watch && watch->gone());
    }
  };
  /// One driver mapping of another process's allocation, shared by the entries of its buffers.
  struct mapping {
    void* base = nullptr;       ///< the driver's mapping
    std::size_t size = 0;       ///< bytes mapped (the driver's word; the exporter's if none)
    source* from = nullptr;
    unsigned char native[64] = {};  ///< the driver handle it was opened with
    int entries = 0;            ///< entries (open or cached) that use it
    int open_entries = 0;       ///< of those, entries open now (refs > 0)
    std::uint64_t record_id = 0;
    int device = 0;             ///< the exporter's device (the handle's): where it lives
    int opened_on = 0;          ///< this process's device it was opened on: its context's
  };
  /// One buffer of another process: [begin, end) of a mapping.
  struct entry {
    mapping* map = nullptr;
    std::uint64_t begin = 0;    ///< the exporter's range, bounded by the driver's size
    std::uint64_t end = 0;
    std::uint64_t digest = 0;   ///< the exporter's native_digest of the driver handle
    std::uint32_t slot = 0;
    std::int32_t pid = 0;       ///< the exporter's, for messages
    source* from = nullptr;
    int refs = 0;               ///< open() calls not yet closed, over all pointers into it
    bool registered = false;    ///< holds an importer slot in the exporter's segment
    bool cached = false;        ///< closed, in the LRU list
    importer_slot* who = nullptr;
    std::uint64_t self = 0;     ///< this process's lease, as written in *who
    std::list<key>::iterator lru;  ///< valid while cached
  };
  struct opened_ptr {
    key k;
    int count = 0;
  };
  using entry_map = std::unordered_map<key, entry, key_hash>;

  /// Where a first open's time went (MEMAREA_IPC_TIMING=1): steady-clock stamps at each
  /// phase's end, printed to stderr once the open succeeded. Diagnostics only: off, it costs
  /// a first open one test of a flag per phase, and a re-open nothing.
  struct phase_times {
    enum phase {
      start,
      seg_opened,  ///< a new exporter's segment: shm_open
      seg_mapped,  ///< fstat, mmap, close
      seg_read,    ///< its header's first read (a page fault)
      source,
      registered,
      driver_open,
      size_query,
      recorded,
      end,
      kCount
    };
    std::int64_t ns[kCount] = {};
    bool new_mapping = false;
    /// The segment was mapped while the driver opened the handle (segment_job): seg_* are the
    /// job's stamps, job_began when its thread started it, and source when the import had it.
    bool overlapped = false;
    bool by_keeper = false;
    std::int64_t job_began = 0;
    void stamp(phase p) noexcept;
  };

  /// A first import from an exporter maps that exporter's segment (tens of microseconds of
  /// system calls and a page fault, cold) on the keeper's thread while the importing thread
  /// opens the driver handle (which takes longer still), instead of before it; the
  /// handle is checked against the segment once both are done, and its mapping closed if the
  /// segment refuses it. One job at a time (the importer's lock is held throughout). The job
  /// is posted only to an idle keeper, which runs posted jobs before any round; it may still
  /// be slow to wake (a CPU leaving a sleep state) or be preempted on a loaded machine: after
  /// the driver open and kKeeperGrace the importing thread takes the job itself unless the
  /// keeper began it, and then waits only for that system-call sequence, which takes no lock.
  struct segment_job {
    enum state_t : int { idle, posted, running, done };
    enum class failure {
      none,
      not_found,
      open_failed,
      not_segment,
      not_private,  ///< of another user, or open to group or others
      map_failed,
      foreign,
      damaged,  ///< cut short while its header was read
      exited
    };
    std::atomic<int> state{idle};
    // Set by the poster before it posts.
    std::string name;
    std::uint64_t owner = 0;
    bool timing = false;
    // Set by whoever runs it, before state becomes done.
    segment* seg = nullptr;
    int guard = -1;  ///< fault_guard's watch of seg
    failure why = failure::none;
    unsigned file_uid = 0, file_mode = 0;  ///< for not_private's message
    int err = 0;  ///< errno of a failed system call
    bool by_keeper = false;
    std::int64_t began = 0, opened = 0, mapped = 0, read = 0;  ///< steady-clock ns, if timing

    /// The keeper's entry (housekeeper::post): runs the job unless someone has.
    static void on_keeper(void* job) noexcept;
    /// Gives back a finished job's segment, if it mapped one (the import failed otherwise).
    void discard() noexcept;
    /// Runs the job here unless the keeper began it, else waits for the keeper to finish.
    /// Until `grace_until` (steady-clock ns; 0: none) it first waits for a keeper that has not
    /// begun yet: see kKeeperGrace.
    void finish(std::int64_t grace_until = 0) noexcept;
    /// shm_open, fstat, mmap, close, the header's first read and its checks.
    void run() noexcept;
  };

  /// t's phases of the first open of w's buffer as one line (empty if it cannot be made). The
  /// caller writes it to stderr once the importer's lock is released: a stderr nobody drains
  /// must not stall every other IPC call.
  static std::string format_phases(const phase_times& t, const wire& w) noexcept;
  /// `timing_line` receives MEMAREA_IPC_TIMING's line, if on.
  void* open_new_locked(const key& k, const wire& w, int device, std::uint64_t self,
                        std::string& timing_line);
  bool register_locked(entry& e, const wire& w, std::uint64_t self);
  void unregister_locked(entry& e);
  /// Counts one more open of p (inside e), whose entry in opened_ is it (or end()).
  void* hand_out_locked(const key& k, entry& e, void* p,
                        std::unordered_map<void*, opened_ptr>::iterator it);
  /// A driver open made before the segment was checked (segment_job): closed unless
  /// map_locked adopts it.
  struct early_open {
    bool tried = false;
    dstatus status;
    void* base = nullptr;
    std::exception_ptr failure;  ///< what the open threw (bad_alloc for a message)
    early_open() = default;
    early_open(const early_open&) = delete;
    early_open& operator=(const early_open&) = delete;
    ~early_open() noexcept;
  };
  /// The driver's open of w's handle on device.
  static dstatus driver_open(const wire& w, int device, void** base);
  /// Whether a first import from a new exporter may open the driver handle before the
  /// segment's checks: the keeper can run beside this thread, and no handle the driver
  /// accepted was refused as forged in the last kForgeryPause (then every first import is
  /// checked first, so that forged handles cannot make the driver map what they name).
  bool may_overlap() const noexcept;
  /// Notes a refusal, as forged, of a handle whose bytes the driver had accepted.
  void note_forgery() noexcept;
  /// The source of a first import from w's exporter, new here: its segment mapped and
  /// checked, overlapping the driver's open of w's handle (into early) where it may
  /// (ipc_first_import.cpp). Throws what the segment refuses, or what the open threw.
  source& first_source_locked(const wire& w, int device, phase_times* t, early_open& early);
  /// The mapping of w's driver allocation: one made for another buffer of it, or a new one
  /// (the early open's, when given: a new exporter has no mapping to share).
  mapping& map_locked(source& src, const wire& w, int device, phase_times* t,
                      early_open* early = nullptr);
  /// The mapping of src's made with w's driver handle bytes, or null.
  mapping* find_mapping_locked(const source& src, const wire& w, std::uint64_t digest);
  void unmap_locked(mapping& m);
  void unlink_lru_locked(entry& e);
  void forget_opened_locked(std::unordered_map<void*, opened_ptr>::iterator it);
  /// The source of w's exporter if this process imports from it already (invalid_handle if it
  /// is known to be gone), else null.
  source* find_source_locked(const wire& w);
  /// A new source from job_'s finished mapping of w's exporter's segment, or its failure.
  source& adopt_source_locked(const wire& w);
  void release_source_locked(source& s);
  void evict_locked(entry_map::iterator it);
  void trim_locked();
  void sweep_cache_locked();

  /// This process's pid, written into importer slots for diagnostics (read once: getpid() is a
  /// system call, and a child of fork() makes a new importer).
  const std::int32_t pid_;
  ranked_mutex m_{lock_rank::ipc_import};
  std::list<source> sources_;
  entry_map entries_;
  std::unordered_map<void*, mapping> mappings_;  // by base
  std::unordered_multimap<std::uint64_t, void*> by_digest_;  // native_digest -> base
  std::atomic<std::size_t> driver_opens_{0};
  std::atomic<std::size_t> overlapped_opens_{0};
  std::atomic<std::size_t> keeper_segment_jobs_{0};
  /// The keeper's thread may run on another CPU than this one (sched_getaffinity at
  /// construction): with one CPU the overlap is only two context switches more.
  bool several_cpus_ = true;
  /// MEMAREA_IPC_OVERLAP (1 unless set to 0): first imports may overlap at all.
  bool overlap_ = true;
  /// housekeeper::now() (ns) before which a first import checks before it opens.
  std::int64_t check_first_until_ = 0;
  std::unordered_map<void*, opened_ptr> opened_;
  std::list<key> lru_;  // cached (closed) mappings, most recent first
  // Nodes of lru_ and opened_ kept for reuse: a close and a re-open move a node between the
  // live and the spare container instead of freeing and allocating it, since after a pause
  // malloc's cold state cost more than the rest of a re-open (measured on sim).
  static constexpr std::size_t kSpareNodes = 16;
  std::list<key> spare_lru_;
  std::vector<std::unordered_map<void*, opened_ptr>::node_type> spare_opened_;
  std::atomic<std::size_t> limit_{64};
  bool timing_ = false;  ///< MEMAREA_IPC_TIMING=1: print each first open's phases
  segment_job job_;
};

/// invalid_handle: the segment of w's exporter was cut short by another process.
error segment_damaged(const wire& w);
/// invalid_handle: w's exporter has exited.
error exporter_exited(const wire& w);

}  // namespace memarea::detail::ipc_internal
