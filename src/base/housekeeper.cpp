#include "base/housekeeper.hpp"

#include "base/fork_safety.hpp"
#include "base/lease.hpp"
#include "testing/memarea_testing.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace memarea::detail::housekeeper {

namespace {

/// One process's keeper. A child of fork() never touches its parent's (whose thread it does not
/// have, and whose mutex another thread may have held): it makes a new one.
struct keeper {
  /// One round at a time: a caller of run_due returns only after every round that began before
  /// it has finished, so what it reads afterwards (stats, a task's effects) is settled.
  std::mutex round;
  std::mutex m;
  std::condition_variable wake;
  std::thread thread;
  bool running = false;
  bool stopped = false;  // for good: at exit
  bool changed = false;  // tasks added while the thread slept
  bool idle = false;     // the thread waits for its next round (post's only_when_idle)
  std::vector<task> tasks;
  /// Posted one-off jobs (post), run at the next wake; a fixed array, so post never allocates.
  static constexpr int kMaxJobs = 8;
  std::pair<job, void*> jobs[kMaxJobs];
  int posted = 0;
  clock_type::time_point next_tick{};
  clock_type::time_point next_sweep{};
  bool swept = false;
  counters done;
};

std::atomic<keeper*> g_keeper{nullptr};
std::atomic<clock_fn> g_clock{nullptr};
/// Keepers a fork child inherited: never used nor destroyed there, kept reachable.
std::vector<keeper*>* g_inherited = nullptr;

keeper& get() {
  if (keeper* k = g_keeper.load(std::memory_order_acquire)) [[likely]]
    return *k;
  auto* fresh = new keeper();
  keeper* expected = nullptr;
  if (!g_keeper.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return *expected;
  }
  return *fresh;
}

struct keeper_fork final : fork_participant {
  keeper_fork() noexcept : fork_participant(lock_rank::housekeeper) {}
  void fork_child() noexcept override {
    if (keeper* k = g_keeper.exchange(nullptr)) {
      if (!g_inherited) g_inherited = new std::vector<keeper*>();
      g_inherited->push_back(k);  // may throw bad_alloc: a child that cannot allocate is done
    }
  }
};
keeper_fork g_keeper_fork;

void stop_at_exit() { stop(); }

/// Runs the jobs posted so far (k->m held on entry and on return, released while they run).
void run_posted(keeper* k, std::unique_lock<std::mutex>& lock) {
  while (k->posted > 0) {
    std::pair<job, void*> now[keeper::kMaxJobs];
    const int n = k->posted;
    std::copy(k->jobs, k->jobs + n, now);
    k->posted = 0;
    lock.unlock();
    for (int i = 0; i < n; ++i) now[i].first(now[i].second);
    lock.lock();
  }
}

void loop(keeper* k) {
  pthread_setname_np(pthread_self(), "memarea-keeper");
  std::unique_lock lock(k->m);
  while (!k->stopped) {
    // Posted jobs first: their posters are waiting (a round may take a while).
    run_posted(k, lock);
    // Cleared before the round, not after: a task added while the round runs (the first
    // allocation's IPC preparation, often just as the thread starts) wakes the next round at
    // once instead of waiting out the pause.
    k->changed = false;
    lock.unlock();
    run_due();
    lock.lock();
    run_posted(k, lock);
    // Real time between rounds; what is due is decided by the clock in run_due.
    const auto pause = k->tasks.empty() ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                              kSweepEvery)
                                        : kTick;
    k->idle = true;
    k->wake.wait_for(lock, pause, [&] { return k->stopped || k->changed || k->posted > 0; });
    k->idle = false;
  }
}

}  // namespace

void start() noexcept {
  keeper& k = get();
  std::lock_guard lock(k.m);
  if (k.running || k.stopped) return;
  // The thread blocks every signal: the program's handlers must run on its own threads. Not
  // SIGBUS: the thread reads other processes' segments, and a fault there must reach
  // fault_guard's handler (a blocked fault kills the process).
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGBUS);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    k.thread = std::thread(loop, &k);
    k.running = true;
  } catch (...) {
    // No thread (resources exhausted): nothing is swept in the background; `memarea ipc gc`
    // and run_due still work.
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  static const bool registered = std::atexit(stop_at_exit) == 0;
  (void)registered;
}

void add(task t) noexcept {
  {
    keeper& k = get();
    std::lock_guard lock(k.m);
    if (std::find(k.tasks.begin(), k.tasks.end(), t) == k.tasks.end()) {
      try {
        k.tasks.push_back(t);
      } catch (...) {
        return;
      }
      // A new task is due in the next round (the others run a little early with it).
      k.next_tick = clock_type::time_point{};
    }
    k.changed = true;
  }
  get().wake.notify_all();
}

bool post(job f, void* arg, bool only_when_idle) noexcept {
  keeper* k = g_keeper.load(std::memory_order_acquire);
  if (!k) return false;  // no keeper made, so no thread: nothing to allocate here
  {
    std::lock_guard lock(k->m);
    if (!k->running || k->stopped || (only_when_idle && !k->idle)) return false;
    // The same job queued already runs once more anyway: a poster that ran its job itself
    // leaves its entry behind, and repeated posts of one job must not fill the queue with them.
    if (std::find(k->jobs, k->jobs + k->posted, std::pair<job, void*>{f, arg}) ==
        k->jobs + k->posted) {
      if (k->posted == keeper::kMaxJobs) return false;
      k->jobs[k->posted++] = {f, arg};
    }
  }
  k->wake.notify_all();
  return true;
}

bool idle() noexcept {
  keeper* k = g_keeper.load(std::memory_order_acquire);
  if (!k) return false;
  std::lock_guard lock(k->m);
  return k->running && !k->stopped && k->idle;
}

void stop() noexcept {
  keeper* k = g_keeper.load(std::memory_order_acquire);
  if (!k) return;
  std::thread t;
  {
    std::lock_guard lock(k->m);
    k->stopped = true;
    if (!k->running) return;
    k->running = false;
    t = std::move(k->thread);
  }
  k->wake.notify_all();
  if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  else if (t.joinable()) t.detach();
}

clock_type::time_point now() noexcept {
  if (clock_fn f = g_clock.load(std::memory_order_acquire)) return f();
  return clock_type::now();
}

void run_due() noexcept {
  keeper& k = get();
  std::lock_guard one_round(k.round);
  const auto t = now();
  std::vector<task> due;
  bool sweep = false;
  {
    std::lock_guard lock(k.m);
    // A clock that went back (a test's clock replaced by the real one) reschedules from now
    // instead of waiting for the old time to come round again.
    if (k.next_tick - t > kTick) k.next_tick = t;
    if (k.next_sweep - t > kSweepEvery) k.next_sweep = t;
    if (!k.tasks.empty() && t >= k.next_tick) {
      try {
        due = k.tasks;
      } catch (...) {
        return;
      }
      k.next_tick = t + kTick;
      ++k.done.ticks;
    }
    if (!k.swept || t >= k.next_sweep) {
      sweep = true;
      k.swept = true;
      k.next_sweep = t + kSweepEvery;
    }
  }
  for (task f : due) f();
  if (sweep) {
    std::size_t removed = 0;
    try {
      removed = lease::sweep().removed.size();
    } catch (...) {
      // Out of memory while listing /dev/shm: the next sweep tries again.
    }
    std::lock_guard lock(k.m);
    ++k.done.sweeps;
    k.done.removed += removed;
  }
}

counters stats() noexcept {
  keeper& k = get();
  std::lock_guard lock(k.m);
  counters c = k.done;
  c.running = k.running;
  return c;
}

}  // namespace memarea::detail::housekeeper

namespace memarea::detail::testing {

void set_housekeeper_clock(clock_fn f) noexcept {
  housekeeper::g_clock.store(f, std::memory_order_release);
}

}  // namespace memarea::detail::testing
