// The sim backend's streams and events: a worker thread per stream runs its tasks in order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace memarea::detail::sim {

/// An in-order queue of work with its own worker thread, like a CUDA stream. Every task gets a
/// ticket (1, 2, ...); waiting for a ticket waits for that task and everything before it.
class stream {
 public:
  /// Starts the worker; throws std::system_error when the thread cannot be created.
  explicit stream(int device);
  /// Drains and joins (see shutdown()).
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  int device() const noexcept { return device_; }

  /// Queues fn; returns its ticket, or 0 when the stream has been shut down (the task is dropped,
  /// since nothing would ever run it).
  std::uint64_t enqueue(std::function<void()> fn);
  /// The ticket of the last queued task (0 when none was queued).
  std::uint64_t last_ticket() const;
  /// Blocks until every task up to `ticket` has run. Returns at once for ticket 0.
  void wait(std::uint64_t ticket) const;
  /// Waits for everything queued so far.
  void synchronize() const { wait(last_ticket()); }
  /// Whether every task queued so far has run.
  bool idle() const;
  /// Runs what is queued, then stops and joins the worker. Idempotent; later enqueues fail.
  void shutdown();

  /// For fork(): takes the queue lock and keeps it (the worker cannot start a task while it is
  /// held); returns whether the worker is busy: inside a task, or stopping and not yet joined,
  /// where it may hold locks of the C library or a sanitizer that a child of fork() could never
  /// take.
  bool lock_for_fork();
  /// Gives back the lock lock_for_fork() took (in the parent, and in the child for tidiness).
  void unlock_after_fork();

 private:
  void run();

  int device_;
  mutable std::mutex m_;
  std::condition_variable work_cv_;
  mutable std::condition_variable done_cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t submitted_ = 0;
  std::uint64_t completed_ = 0;
  bool stop_ = false;
  bool joined_ = false;              ///< shutdown() has joined the worker
  bool started_ = false;             ///< the worker has entered run()
  std::atomic<bool> in_task_{false};  ///< the worker is running a task (or freeing it)
  std::mutex join_m_;  ///< serialises shutdown() so two destroyers do not join twice
  std::thread worker_;
};

/// A marker in a stream, like a CUDA event. Each record() bumps a generation; the event is
/// complete when the task of its latest record has run.
struct event {
  std::mutex m;
  std::shared_ptr<stream> where;  ///< the stream of the latest record (null: never recorded)
  std::uint64_t ticket = 0;       ///< that record's ticket in `where`
  std::uint64_t generation = 0;   ///< number of records so far
  std::uint64_t done_generation = 0;
  std::chrono::steady_clock::time_point when{};  ///< stamped when the latest record ran
  bool timing = true;  ///< made with event_timing::on (event_elapsed_ms refuses others)
};

}  // namespace memarea::detail::sim
