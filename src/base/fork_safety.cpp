#include "base/fork_safety.hpp"
#include "testing/memarea_testing.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace memarea::detail {

const char* to_string(lock_rank r) noexcept {
  switch (r) {
    case lock_rank::system_init: return "system_init";
    case lock_rank::sim_config: return "sim_config";
    case lock_rank::lease: return "lease";
    case lock_rank::housekeeper: return "housekeeper";
    case lock_rank::peer: return "peer";
    case lock_rank::ipc_import: return "ipc_import";
    case lock_rank::pool_list: return "pool_list";
    case lock_rank::pool_caches: return "pool_caches";
    case lock_rank::pool_thread_caches: return "pool_thread_caches";
    case lock_rank::pool_arena: return "pool_arena";
    case lock_rank::shareables: return "shareables";
    case lock_rank::registry: return "registry";
    case lock_rank::ipc_export: return "ipc_export";
    case lock_rank::host_table: return "host_table";
    case lock_rank::staging: return "staging";
    case lock_rank::device_caps: return "device_caps";
    case lock_rank::wrapped_streams: return "wrapped_streams";
    case lock_rank::torch_pieces: return "torch_pieces";
    case lock_rank::tracking: return "tracking";
    case lock_rank::release_failures: return "release_failures";
    case lock_rank::ipc_fork_state: return "ipc_fork_state";
    case lock_rank::driver: return "driver";
  }
  return "?";
}

// --- lock-order check (debug builds) ------------------------------------------------------------

namespace {

#ifdef MEMAREA_LOCK_ORDER_CHECK
constexpr bool kChecked = true;
#else
constexpr bool kChecked = false;
#endif

/// The ranked locks the calling thread holds, in the order taken. Trivial: no guard, no
/// destructor. A thread holds a handful at most.
struct held_locks {
  static constexpr int kMax = 16;
  const void* lock[kMax];
  lock_rank rank[kMax];
  int n;
};
constinit thread_local held_locks t_held{};

[[noreturn]] void order_violation(const char* what, lock_rank taking, lock_rank held) {
  char msg[256];
  const int len = std::snprintf(msg, sizeof msg,
                                "memarea: lock order violated: %s a lock of rank %s (%d) while "
                                "holding one of rank %s (%d); see docs/design.md, \"Locks\"\n",
                                what, to_string(taking), static_cast<int>(taking),
                                to_string(held), static_cast<int>(held));
  if (len > 0) (void)!::write(2, msg, static_cast<std::size_t>(len));
  std::abort();
}

/// What fork()'s prepare takes before every ranked lock must never be taken under one.
[[noreturn]] void held_violation(const char* what, lock_rank held) {
  char msg[256];
  const int len = std::snprintf(msg, sizeof msg,
                                "memarea: lock order violated: %s while holding a lock of rank "
                                "%s (%d); see docs/design.md, \"Locks\"\n",
                                what, to_string(held), static_cast<int>(held));
  if (len > 0) (void)!::write(2, msg, static_cast<std::size_t>(len));
  std::abort();
}

/// Before blocking on `lock`: every lock held must rank below it.
void check_acquire(const void* lock, lock_rank r) noexcept {
  if constexpr (kChecked) {
    for (int i = 0; i < t_held.n; ++i) {
      if (t_held.lock[i] == lock) order_violation("re-taking", r, t_held.rank[i]);
      if (t_held.rank[i] >= r) order_violation("taking", r, t_held.rank[i]);
    }
  } else {
    (void)lock;
    (void)r;
  }
}

void note_acquired(const void* lock, lock_rank r) noexcept {
  if constexpr (kChecked) {
    if (t_held.n == held_locks::kMax) order_violation("too many nested locks at", r, r);
    t_held.lock[t_held.n] = lock;
    t_held.rank[t_held.n] = r;
    ++t_held.n;
  } else {
    (void)lock;
    (void)r;
  }
}

void note_released(const void* lock) noexcept {
  if constexpr (kChecked) {
    for (int i = t_held.n - 1; i >= 0; --i) {
      if (t_held.lock[i] != lock) continue;
      for (int j = i; j + 1 < t_held.n; ++j) {
        t_held.lock[j] = t_held.lock[j + 1];
        t_held.rank[j] = t_held.rank[j + 1];
      }
      --t_held.n;
      return;
    }
  } else {
    (void)lock;
  }
}

std::atomic<std::uint64_t> g_forks_prepared{0};

}  // namespace

namespace testing {
bool lock_order_checked() noexcept { return kChecked; }
std::uint64_t forks_prepared() noexcept { return g_forks_prepared.load(); }
}  // namespace testing

// --- the participants and the fork handlers ------------------------------------------------------

/// Every live participant in one list sorted by rank. Its lock is a plain mutex taken first by
/// the prepare handler, so no participant comes or goes while a fork() is prepared.
struct fork_registry {
  // Recursive: a construction under fork_init_guard may register participants.
  static inline pthread_mutex_t list_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
  static inline fork_participant* head = nullptr;
  static inline fork_participant* tail = nullptr;

  static void install_once() noexcept {
    static const int installed = pthread_atfork(prepare, parent, child);
    (void)installed;
  }

  static void add(fork_participant* p) noexcept {
    install_once();
    pthread_mutex_lock(&list_lock);
    // After the last participant of a rank not above p's: equal ranks keep their order of birth.
    fork_participant* after = tail;
    while (after && after->rank_ > p->rank_) after = after->prev_;
    p->prev_ = after;
    p->next_ = after ? after->next_ : head;
    if (p->next_)
      p->next_->prev_ = p;
    else
      tail = p;
    if (after)
      after->next_ = p;
    else
      head = p;
    pthread_mutex_unlock(&list_lock);
  }

  static void remove(fork_participant* p) noexcept {
    pthread_mutex_lock(&list_lock);
    if (p->prev_) p->prev_->next_ = p->next_; else head = p->next_;
    if (p->next_) p->next_->prev_ = p->prev_; else tail = p->prev_;
    p->prev_ = p->next_ = nullptr;
    pthread_mutex_unlock(&list_lock);
  }

  static void prepare() noexcept {
    pthread_mutex_lock(&list_lock);
    g_forks_prepared.fetch_add(1);
    for (fork_participant* p = head; p; p = p->next_) p->fork_prepare();
  }
  static void parent() noexcept {
    for (fork_participant* p = tail; p; p = p->prev_) p->fork_parent();
    pthread_mutex_unlock(&list_lock);
  }
  static void child() noexcept {
    for (fork_participant* p = tail; p; p = p->prev_) p->fork_child();
    list_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
  }
};

namespace {
/// Installed at load too, so that handlers exist even in a process that has made no
/// participant yet (they are installed once either way).
[[maybe_unused]] const bool g_installed = (fork_registry::install_once(), true);
}  // namespace

fork_participant::fork_participant(lock_rank rank) noexcept : rank_(rank) {
  if constexpr (kChecked) {
    // Registering takes the list lock, which fork()'s prepare takes before every ranked lock.
    if (t_held.n > 0) held_violation("making a lock or fork participant", t_held.rank[t_held.n - 1]);
  } else {
    (void)rank;
  }
  fork_registry::add(this);
}

fork_participant::~fork_participant() { fork_registry::remove(this); }

fork_init_guard::fork_init_guard() noexcept {
  if constexpr (kChecked) {
    // A thread holding ranked lock X would wait here for a fork()'s prepare, which waits for X.
    if (t_held.n > 0) held_violation("building a lazily made object", t_held.rank[t_held.n - 1]);
  }
  pthread_mutex_lock(&fork_registry::list_lock);
}

fork_init_guard::~fork_init_guard() { pthread_mutex_unlock(&fork_registry::list_lock); }

// --- ranked_mutex --------------------------------------------------------------------------------

#ifdef MEMAREA_LOCK_ORDER_CHECK
void ranked_mutex::lock() noexcept {
  check_acquire(this, rank());
  pthread_mutex_lock(&m_);
  note_acquired(this, rank());
}
bool ranked_mutex::try_lock() noexcept {
  if (pthread_mutex_trylock(&m_) != 0) return false;
  note_acquired(this, rank());
  return true;
}
void ranked_mutex::unlock() noexcept {
  note_released(this);
  pthread_mutex_unlock(&m_);
}
#endif
void ranked_mutex::fork_prepare() noexcept { pthread_mutex_lock(&m_); }
void ranked_mutex::fork_parent() noexcept { pthread_mutex_unlock(&m_); }
void ranked_mutex::fork_child() noexcept { pthread_mutex_init(&m_, nullptr); }

// --- ranked_shared_mutex -------------------------------------------------------------------------

void ranked_shared_mutex::lock() noexcept {
  check_acquire(this, rank());
  pthread_rwlock_wrlock(&m_);
  note_acquired(this, rank());
}
void ranked_shared_mutex::unlock() noexcept {
  note_released(this);
  pthread_rwlock_unlock(&m_);
}
void ranked_shared_mutex::lock_shared() noexcept {
  check_acquire(this, rank());
  pthread_rwlock_rdlock(&m_);
  note_acquired(this, rank());
}
void ranked_shared_mutex::unlock_shared() noexcept {
  note_released(this);
  pthread_rwlock_unlock(&m_);
}
void ranked_shared_mutex::fork_prepare() noexcept { pthread_rwlock_wrlock(&m_); }
void ranked_shared_mutex::fork_parent() noexcept { pthread_rwlock_unlock(&m_); }
void ranked_shared_mutex::fork_child() noexcept {
  m_ = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
}

}  // namespace memarea::detail
