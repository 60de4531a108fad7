// libmemarea-aml's locks, which fork() never leaves held in a child.
//
// A child of fork() has one thread, the one that forked: a lock another thread held at that
// moment would stay held in the child for ever. So every lock of libmemarea-aml is a
// fork_safe_mutex: one pthread_atfork handler of this library takes all of them before fork(),
// lowest rank first, releases them in the parent afterwards and renews them in the child.
//
// They are libmemarea-aml's own, not memarea's ranked locks (memarea keeps those internal):
// memarea's handler takes memarea's locks and this one takes these. That needs no order between
// the two handlers because every lock here is a leaf on both sides: none is held across a call
// into memarea (an area's or a pool's call may do anything) and memarea never calls back into
// this library, so a thread holding one of these needs no lock of memarea's to let go of it,
// and a thread holding one of memarea's never waits for one of these. Loaded as a shared
// library, this handler is installed after memarea's and so runs first, taking these before
// memarea's, as their place above memarea would order them anyway.
#pragma once

#include <pthread.h>

namespace memarea::aml {

/// The order fork() takes libmemarea-aml's locks in (a thread holding one takes only a higher
/// one; today none is held across another).
enum class lock_rank : int {
  allocator = 1,       ///< one AML allocator's state (never held across its area's calls)
  linux_mappings = 2,  ///< the linux area's list of mappings made with mmap options
};

/// A mutex that every fork() takes first (see above). Lockable: std::lock_guard and
/// std::unique_lock take it. Never constructed or destroyed while one of them is held.
class fork_safe_mutex {
 public:
  explicit fork_safe_mutex(lock_rank rank) noexcept;
  ~fork_safe_mutex();
  fork_safe_mutex(const fork_safe_mutex&) = delete;
  fork_safe_mutex& operator=(const fork_safe_mutex&) = delete;

  void lock() noexcept { pthread_mutex_lock(&m_); }
  bool try_lock() noexcept { return pthread_mutex_trylock(&m_) == 0; }
  void unlock() noexcept { pthread_mutex_unlock(&m_); }

 private:
  friend struct fork_list;
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
  lock_rank rank_;
  fork_safe_mutex* prev_ = nullptr;
  fork_safe_mutex* next_ = nullptr;
};

}  // namespace memarea::aml
