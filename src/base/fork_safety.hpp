// Locks that are safe across fork(), in one documented order.
//
// A child of fork() has one thread: the one that forked. Any lock another thread held at that
// moment stays held in the child for ever, and the child's first call that takes it hangs. So
// every lock of memarea is a ranked_mutex or ranked_shared_mutex: one pthread_atfork handler
// (fork_safety.cpp) takes all of them before fork() in ascending rank, releases them in the
// parent afterwards and re-initialises them in the child. A fork() therefore happens only at a
// moment when no thread is inside a section that one of them guards.
//
// The ranks are the lock order: a thread that holds a lock of rank r takes only locks of a
// higher rank. Debug builds (MEMAREA_LOCK_ORDER_CHECK) check every acquisition and abort on an
// out-of-order one, naming both locks. docs/design.md lists the order.
//
// Other fork work that is not a lock (the sim driver's streams, caches to forget in the child)
// joins through fork_participant, at a rank of its own.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace memarea::detail {

/// The lock order, lowest first. A gap between ranks leaves room for new locks.
enum class lock_rank : std::uint16_t {
  system_init = 10,     ///< choosing the backend (system::get's first call)
  sim_config = 20,      ///< memarea::sim::configure's settings
  peer = 40,            ///< memarea's peer-access table and scope counts
  ipc_import = 50,      ///< the IPC importer's mappings (takes the registry inside)
  pool_list = 52,       ///< the live pools (core/pool.cpp)
  pool_caches = 54,     ///< one pool's list of per-thread caches
  pool_thread_caches = 55, ///< not a lock: every thread's cache of every pool (core/pool_alloc.cpp)
  pool_arena = 56,      ///< one pool's blocks and free lists (takes the registry inside)
  shareables = 60,      ///< shareable (VMM) allocations (takes the registry inside)
  registry = 70,        ///< the allocation registry (its free hook takes ipc_export inside)
  ipc_export = 80,      ///< the IPC exporter's table (frees deferred memory through the driver)
  host_table = 90,      ///< pageable host allocations' NUMA bookkeeping
  staging = 100,        ///< idle stagers of the pipelined peer copy
  device_caps = 110,    ///< per-device capabilities read once
  wrapped_streams = 115, ///< native streams wrapped as memarea's (core/stream.cpp; a leaf)
  torch_pieces = 117,   ///< pieces memarea_torch_malloc handed out, by address (capi/torch.cpp; a leaf)
  tracking = 118,       ///< one shard of the allocation tracking records (core/memory/tracking; a leaf)
  release_failures = 120, ///< failures of destructors and reset() kept for the user (a leaf)
  ipc_fork_state = 900, ///< not a lock: IPC's child handler (sets the parent's state aside)
  lease = 950,          ///< this process's lease on its shared-memory objects (base/lease)
  housekeeper = 960,    ///< the background thread's schedule and tasks (base/housekeeper)
  driver = 1000,        ///< the driver layer's own fork handling (the sim's streams and locks)
};

/// Name of a rank, for messages.
const char* to_string(lock_rank r) noexcept;

/// Something that must act around fork(). prepare() runs in ascending rank before fork(); parent()
/// and child() run in descending rank after it, in the parent and the (single-threaded) child.
/// Registered for its whole lifetime; never constructed or destroyed while a ranked lock is held.
class fork_participant {
 public:
  explicit fork_participant(lock_rank rank) noexcept;
  virtual ~fork_participant();
  fork_participant(const fork_participant&) = delete;
  fork_participant& operator=(const fork_participant&) = delete;

  lock_rank rank() const noexcept { return rank_; }
  virtual void fork_prepare() noexcept {}
  virtual void fork_parent() noexcept {}
  virtual void fork_child() noexcept {}

 private:
  friend struct fork_registry;
  lock_rank rank_;
  fork_participant* prev_ = nullptr;
  fork_participant* next_ = nullptr;
};

/// A mutex held by every fork() (see above). Lockable, so std::lock_guard and std::unique_lock
/// take it.
class ranked_mutex final : public fork_participant {
 public:
  explicit ranked_mutex(lock_rank rank) noexcept : fork_participant(rank) {}
#ifdef MEMAREA_LOCK_ORDER_CHECK
  void lock() noexcept;
  bool try_lock() noexcept;
  void unlock() noexcept;
#else
  // Unchecked builds: inline, straight to the mutex (pools take one on their arena's path).
  void lock() noexcept { pthread_mutex_lock(&m_); }
  bool try_lock() noexcept { return pthread_mutex_trylock(&m_) == 0; }
  void unlock() noexcept { pthread_mutex_unlock(&m_); }
#endif

  void fork_prepare() noexcept override;
  void fork_parent() noexcept override;
  void fork_child() noexcept override;

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

/// A reader-writer lock held (for writing) by every fork(). SharedLockable, so std::shared_lock
/// takes it. Re-initialised in the child: glibc's rwlock cannot be released by the child's
/// thread, whose thread id differs from the one that took it.
class ranked_shared_mutex final : public fork_participant {
 public:
  explicit ranked_shared_mutex(lock_rank rank) noexcept : fork_participant(rank) {}
  void lock() noexcept;
  void unlock() noexcept;
  void lock_shared() noexcept;
  void unlock_shared() noexcept;

  void fork_prepare() noexcept override;
  void fork_parent() noexcept override;
  void fork_child() noexcept override;

 private:
  // Writers first: fork()'s prepare and the registry's inserts must not starve behind a steady
  // stream of lookups (glibc's default prefers readers). No thread takes it twice.
  pthread_rwlock_t m_ = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
};

/// Held while a lazily made object of memarea (a function-local static, a process-wide table)
/// is constructed. fork()'s prepare takes the same lock first, so fork() never copies a process
/// in the middle of such a construction: a child never finds a half-made object, nor the
/// pending guard of a function-local static that no thread of the child would ever finish.
/// Recursive. Never taken while a ranked lock is held (checked in debug builds), and what is
/// constructed under it must not call pthread_atfork (glibc holds its own lock across the
/// handlers: that would deadlock with a fork() in another thread).
class fork_init_guard {
 public:
  fork_init_guard() noexcept;
  ~fork_init_guard();
  fork_init_guard(const fork_init_guard&) = delete;
  fork_init_guard& operator=(const fork_init_guard&) = delete;
};

/// The object `make()` returns (a T*), made on the first call under fork_init_guard and
/// returned on every later one for the cost of an atomic load. Each call site passes its own
/// lambda, and so has its own object: `return made_once([] { return new table; });`.
template <class Make>
auto& made_once(Make make) {
  using T = std::remove_pointer_t<decltype(make())>;
  static constinit std::atomic<T*> made{nullptr};
  if (T* p = made.load(std::memory_order_acquire)) [[likely]]
    return *p;
  fork_init_guard guard;
  if (T* p = made.load(std::memory_order_relaxed)) return *p;
  T* p = make();
  made.store(p, std::memory_order_release);
  return *p;
}

}  // namespace memarea::detail
