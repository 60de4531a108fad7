// memarea's one background thread ("memarea-keeper"). It does what must happen on a timer but
// never inside a user's call: it sweeps /dev/shm of the objects dead processes left (see
// base/lease.hpp), once as it starts and then every kSweepEvery, and it runs the tasks that
// other layers register (IPC's liveness checks) every kTick. A call may also post it a job to
// run beside the call (post: a first IPC import maps the exporter's segment there while the
// call opens the driver handle); the call never depends on the job's being run by the keeper.
//
// It starts when something first needs it (start()): a process's first device allocation (IPC
// then has it make the lease and segment in the background, off the first export), its first
// import of another process's memory, its first deferred free, or its first sim allocation.
// A process that shares nothing has no thread. A child of fork() starts its own when it needs
// one. It blocks every signal, so the program's handlers run on the program's threads, and it
// is stopped (joined) at exit.
//
// Time comes from a clock that tests may replace (testing/memarea_testing.hpp's
// set_housekeeper_clock): every decision of the schedule reads it, so a test moves time forward
// and calls run_due() instead of sleeping.
#pragma once

#include <chrono>
#include <cstdint>

namespace memarea::detail::housekeeper {

using clock_type = std::chrono::steady_clock;
using clock_fn = clock_type::time_point (*)() noexcept;
/// A task: runs on the keeper's thread (or in run_due's caller) with no lock of memarea held
/// but the keeper's own round lock (so a task must not call run_due).
using task = void (*)() noexcept;

/// How often the tasks run.
constexpr auto kTick = std::chrono::milliseconds(50);
/// How often /dev/shm is swept after the first sweep.
constexpr auto kSweepEvery = std::chrono::seconds(60);

/// Starts the thread in this process if it does not run yet (idempotent, thread-safe).
void start() noexcept;
/// Runs t every kTick once the thread runs, in this process (a fork child registers its own).
/// Does not start the thread. Adding a task twice adds it once.
void add(task t) noexcept;
/// Stops and joins the thread (idempotent). The tasks stay registered for run_due.
void stop() noexcept;

/// A one-off job for the keeper's thread: f(arg).
using job = void (*)(void* arg) noexcept;
/// Wakes the thread to run f(arg) ahead of its next round, and returns true; false (f never
/// runs) when the thread does not run, when `only_when_idle` and the thread is busy (in a
/// round, or running other jobs), or when the queue of posted jobs (8) is full. Posting a job
/// that is queued already queues nothing more. The thread may be busy in a round (or stopped
/// at exit) for as long as it takes: a poster that needs the result by some point must be able
/// to run the job itself then, and f must tell a job that has run (or is running) from one
/// still to run, since f(arg) runs once per queued entry, possibly after the poster did the
/// work itself: arg must outlive every entry (IPC's first import: ipc_importer.hpp). Jobs run
/// with no lock of memarea held and every signal blocked; a job must take no lock (its poster
/// may hold them).
bool post(job f, void* arg, bool only_when_idle = false) noexcept;
/// Whether the thread runs and waits for its next round (what post's only_when_idle asks).
bool idle() noexcept;

/// Now, by the clock in use.
clock_type::time_point now() noexcept;
/// Runs what is due at now(): the tasks if kTick has passed since they last ran, the sweep if
/// kSweepEvery has passed since the last one (or none ran yet). The thread's loop calls it;
/// tests call it after moving the clock.
void run_due() noexcept;

/// What the keeper did so far in this process (for tests and `memarea ipc gc`).
struct counters {
  std::uint64_t ticks = 0;    ///< rounds of tasks
  std::uint64_t sweeps = 0;   ///< sweeps of /dev/shm
  std::uint64_t removed = 0;  ///< objects those sweeps removed
  bool running = false;       ///< whether the thread runs now
};
counters stats() noexcept;

}  // namespace memarea::detail::housekeeper
