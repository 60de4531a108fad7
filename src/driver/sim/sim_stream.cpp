#include "driver/sim/sim_stream.hpp"

namespace memarea::detail::sim {

stream::stream(int device) : device_(device) {
  worker_ = std::thread([this] { run(); });
  // Return only once the worker runs: a thread still starting may hold allocator locks (ASan's
  // allocator takes them while it sets up the thread), and a fork() right after this would
  // leave them locked for good in the child.
  std::unique_lock lk(m_);
  done_cv_.wait(lk, [&] { return started_; });
}

stream::~stream() { shutdown(); }

std::uint64_t stream::enqueue(std::function<void()> fn) {
  std::lock_guard lk(m_);
  if (stop_) return 0;
  queue_.push_back(std::move(fn));
  ++submitted_;
  work_cv_.notify_one();
  return submitted_;
}

std::uint64_t stream::last_ticket() const {
  std::lock_guard lk(m_);
  return submitted_;
}

bool stream::idle() const {
  std::lock_guard lk(m_);
  return completed_ >= submitted_;
}

void stream::wait(std::uint64_t ticket) const {
  if (ticket == 0) return;
  std::unique_lock lk(m_);
  done_cv_.wait(lk, [&] { return completed_ >= ticket; });
}

void stream::shutdown() {
  std::lock_guard jl(join_m_);
  {
    std::lock_guard lk(m_);
    stop_ = true;
    work_cv_.notify_one();
  }
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // the last reference died in a task of this very stream: it ends itself
  } else {
    worker_.join();
  }
  std::lock_guard lk(m_);
  joined_ = true;
}

/// The worker: tasks run without the queue lock held so that a task may wait on another stream
/// (stream_wait_event) while other threads keep queueing here.
void stream::run() {
  std::unique_lock lk(m_);
  started_ = true;
  done_cv_.notify_all();
  while (true) {
    work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    in_task_.store(true, std::memory_order_relaxed);  // m_ is held: lock_for_fork sees it
    lk.unlock();
    try {
      fn();
    } catch (...) {
      // A task has nowhere to report to (like an asynchronous CUDA error); keep the order going.
    }
    fn = nullptr;  // drop captured references before taking the lock again
    // Out of the task: from here to the lock the worker touches nothing but its own stack.
    in_task_.store(false, std::memory_order_release);
    lk.lock();
    ++completed_;
    done_cv_.notify_all();
  }
}

bool stream::lock_for_fork() {
  m_.lock();
  return in_task_.load(std::memory_order_acquire) || (stop_ && !joined_);
}

void stream::unlock_after_fork() { m_.unlock(); }

}  // namespace memarea::detail::sim
