// The sim driver's part of fork() without exec: every live driver's lock and every stream's
// queue lock held across fork() at a moment when no worker is inside a task; in the child, the
// parent's streams and events set aside.
#include "driver/sim/sim_internal.hpp"

#include <unistd.h>

#include <chrono>
#include <thread>

namespace memarea::detail::sim {

// --- fork() without exec ------------------------------------------------------------------------

std::mutex g_live_mutex;
std::vector<sim_driver*>& live_drivers() {
  static auto* all = new std::vector<sim_driver*>();
  return *all;
}

namespace {
/// What children of fork() inherited and must never destroy (their worker threads stayed in the
/// parent: destroying a stream would join a thread of another process). Reachable, so leak
/// checkers stay quiet.
std::vector<std::shared_ptr<void>>* g_inherited = nullptr;
}  // namespace

namespace {
/// The streams whose queue locks on_fork_prepare holds across fork().
std::vector<std::shared_ptr<stream>>* g_fork_held = nullptr;
}  // namespace

/// The sim's part of fork(): after every lock of core is taken, before they are renewed in the
/// child (base/fork_safety.hpp orders them by rank). Made when memarea is loaded.
struct sim_driver::fork_hooks final : fork_participant {
  fork_hooks() noexcept : fork_participant(lock_rank::driver) {}
  void fork_prepare() noexcept override { on_fork_prepare(); }
  void fork_parent() noexcept override { on_fork_parent(); }
  void fork_child() noexcept override { on_fork_child(); }
};
namespace {
sim_driver::fork_hooks g_sim_fork_hooks;
}  // namespace

void sim_driver::on_fork_prepare() {
  g_live_mutex.lock();
  if (!g_fork_held) {
    g_fork_held = new std::vector<std::shared_ptr<stream>>();
    g_fork_held->reserve(256);  // push_back below runs with locks held: better not to allocate
  }
  // fork() copies a process whose other threads stop where they are. A stream worker stopped
  // inside a task may hold a lock of the C library or of a sanitizer (a task frees what it
  // captured), which the child would then wait on for ever. So fork at a moment when every
  // worker is between tasks: all locks held, no worker in a task. A worker in a task may be
  // waiting on another stream or on m_, so while one is busy everything is let go and tried
  // again. Queued work always finishes (a task waits only for work queued before it), but a
  // stream that stays busy does not stop fork() for ever: after 2 s it goes ahead as before.
  // In effect fork() waits for queued work to drain (it seldom lands between two tasks).
  // Streams being created or destroyed count too: made under m_, and until joined they are
  // listed in retiring_ and report busy.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    for (sim_driver* d : live_drivers()) d->m_.lock();
    bool busy = false;
    auto hold = [&](const std::shared_ptr<stream>& st) {
      if (!st) return;
      busy |= st->lock_for_fork();
      g_fork_held->push_back(st);
    };
    for (sim_driver* d : live_drivers()) {
      for (const auto& st : d->default_streams_) hold(st);
      for (const auto& [k, st] : d->streams_) hold(st);
      for (const auto& st : d->retiring_) hold(st);
    }
    if (!busy) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      // Said once, so that a child that later hangs in a lock can be traced back to here.
      static bool said = false;
      if (!said) {
        said = true;
        static const char msg[] =
            "memarea sim: fork() while a stream worker stayed busy for 2 s; the child may "
            "inherit a lock that worker held\n";
        (void)!::write(2, msg, sizeof msg - 1);
      }
      return;
    }
    for (const auto& st : *g_fork_held) st->unlock_after_fork();
    g_fork_held->clear();
    for (sim_driver* d : live_drivers()) d->m_.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void sim_driver::on_fork_parent() {
  for (const auto& st : *g_fork_held) st->unlock_after_fork();
  g_fork_held->clear();
  for (sim_driver* d : live_drivers()) d->m_.unlock();
  g_live_mutex.unlock();
}

void sim_driver::on_fork_child() {
  // Single-threaded now. Streams and events are the parent's (their threads did not come
  // along): set aside, so the child's first use starts fresh ones. Device memory stays mapped
  // (it is shared memory, so shared with the parent) but is the parent's: never unlinked or
  // exported here. The parent's IPC imports stay mapped too; a new open maps its own.
  if (!g_inherited) g_inherited = new std::vector<std::shared_ptr<void>>();
  for (sim_driver* d : live_drivers()) {
    for (auto& st : d->default_streams_)
      if (st) g_inherited->push_back(std::move(st));
    for (auto& [k, st] : d->streams_) g_inherited->push_back(std::move(st));
    for (auto& st : d->retiring_) g_inherited->push_back(std::move(st));
    d->retiring_.clear();
    for (auto& [k, ev] : d->events_) g_inherited->push_back(std::move(ev));
    d->streams_.clear();
    d->per_thread_.clear();  // the streams themselves were in streams_, set aside above
    d->events_.clear();
    d->imported_.clear();
    for (auto& [base, a] : d->allocations_)
      if (a.from == origin::device) a.inherited = true;
  }
  on_fork_parent();  // the locks taken before fork(), now owned by this thread
}

}  // namespace memarea::detail::sim
