// The fork() handler of libmemarea-aml's locks (fork_lock.hpp).
#include "fork_lock.hpp"

#include <initializer_list>

namespace memarea::aml {

/// Every live fork_safe_mutex, in a list guarded by one plain mutex that fork() takes first.
/// Both are constant-initialised: nothing here is made lazily, so no fork() can find it half
/// made.
struct fork_list {
  static constinit inline pthread_mutex_t guard = PTHREAD_MUTEX_INITIALIZER;
  static constinit inline fork_safe_mutex* head = nullptr;

  static void add(fork_safe_mutex* m) noexcept {
    pthread_mutex_lock(&guard);
    m->next_ = head;
    if (head) head->prev_ = m;
    head = m;
    pthread_mutex_unlock(&guard);
  }

  static void remove(fork_safe_mutex* m) noexcept {
    pthread_mutex_lock(&guard);
    if (m->prev_) m->prev_->next_ = m->next_;
    else head = m->next_;
    if (m->next_) m->next_->prev_ = m->prev_;
    pthread_mutex_unlock(&guard);
  }

  // Before fork(): the list, then every lock, lowest rank first.
  static void prepare() noexcept {
    pthread_mutex_lock(&guard);
    for (const lock_rank r : {lock_rank::allocator, lock_rank::linux_mappings})
      for (fork_safe_mutex* m = head; m; m = m->next_)
        if (m->rank_ == r) pthread_mutex_lock(&m->m_);
  }
  static void parent() noexcept {
    for (fork_safe_mutex* m = head; m; m = m->next_) pthread_mutex_unlock(&m->m_);
    pthread_mutex_unlock(&guard);
  }
  // The child's one thread, the forking one, holds them all: renewed, as memarea renews its own.
  static void child() noexcept {
    for (fork_safe_mutex* m = head; m; m = m->next_) pthread_mutex_init(&m->m_, nullptr);
    pthread_mutex_init(&guard, nullptr);
  }

  static void install() noexcept {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, [] { (void)pthread_atfork(prepare, parent, child); });
  }
};

namespace {
// Installed when the library loads, after libmemarea's handler (a shared library's dependencies
// are initialised first), so that it runs before memarea's; and on the first lock, should a
// static constructor make one first.
[[maybe_unused]] const bool g_installed = (fork_list::install(), true);
}  // namespace

fork_safe_mutex::fork_safe_mutex(lock_rank rank) noexcept : rank_(rank) {
  fork_list::install();
  fork_list::add(this);
}

fork_safe_mutex::~fork_safe_mutex() { fork_list::remove(this); }

}  // namespace memarea::aml
