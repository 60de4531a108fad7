// The process-wide state: the active GPU backend, chosen once at first use. Everything in
// src/core reaches the driver through here.
#pragma once

#include "base/fork_safety.hpp"
#include "driver/backends.hpp"
#include "driver/front.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace memarea::detail {

/// What one backend said when probed (for `memarea info`).
struct backend_report {
  std::string name;
  bool active = false;
  int devices = 0;
  std::string reason;   ///< why it has no devices ("" when it has)
  std::string version;
};

class system;

namespace system_instance {
/// The process's system once made: read inline by system::get() (every copy and synchronize
/// asks, and a call costs more than the load).
inline constinit std::atomic<system*> made{nullptr};
}  // namespace system_instance

/// The active backend and the probes behind the choice.
class system {
 public:
  /// The one instance; chooses the backend on first call (MEMAREA_BACKEND, else CUDA with
  /// devices, else HIP with devices, else sim when configured, else none). Throws
  /// memarea::error when MEMAREA_BACKEND or the sim settings are malformed.
  [[gnu::always_inline]] static system& get() {
    if (system* s = system_instance::made.load(std::memory_order_acquire)) [[likely]]
      return *s;
    return make();
  }

  /// The active backend behind its front: every core call is validated there once, whichever
  /// backend answers.
  driver_front& gpu() noexcept { return *gpu_; }
  int device_count() const noexcept { return count_; }
  /// Throws invalid_device (or no_device when there are none) unless 0 <= device < count.
  void check_device(int device, const char* what) const;
  /// True when device is a valid ordinal.
  bool valid_device(int device) const noexcept { return device >= 0 && device < count_; }
  /// Reports of every backend (probes the inactive ones on first call).
  std::vector<backend_report> reports();
  /// The process that chose the backend: another one than getpid() in a child created by
  /// fork() without exec, where only backends whose driver survives_fork() may be used.
  int creator_pid() const noexcept { return creator_pid_; }

  system(const system&) = delete;
  system& operator=(const system&) = delete;
  ~system();

 private:
  /// get() before the system exists: makes it under its own lock (out of line).
  static system& make();
  system();
  std::optional<driver_front> gpu_;  ///< set by the constructor; in place: one indirection
  int count_ = 0;
  int creator_pid_ = 0;
  /// Not a ranked lock: probing CUDA or HIP under it calls pthread_atfork, which would deadlock
  /// with a fork() whose prepare waited for it. Renewed in a child (system.cpp).
  pthread_mutex_t reports_mutex_ = PTHREAD_MUTEX_INITIALIZER;
  friend struct system_fork;
  std::vector<backend_report> reports_;
  bool probed_all_ = false;
};

/// Sets the sim backend's settings and selects it; only before memarea's first use
/// (afterwards: errc::busy).
void configure_sim(const sim_config& config);

/// The calling thread's current device of the active backend (throws no_device with none).
int current_device();

}  // namespace memarea::detail
