#include "core/system.hpp"

#include "driver/unavailable.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>

namespace memarea::detail {
namespace {

/// A function, not a namespace-scope object: programs call memarea during static
/// initialisation (the bench's exporter hook does), possibly before this file's objects exist.
ranked_mutex& config_mutex() {
  return made_once([] { return new ranked_mutex(lock_rank::sim_config); });
}
std::optional<sim_config> g_sim_config;  // set by configure_sim before first use
bool g_started = false;                  // system::get() has run

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

backend_report report_of(driver& d, bool active) {
  return backend_report{d.name(), active, d.device_count(), d.unavailable_reason(), d.version()};
}

}  // namespace

// The system is made under its own lock, not under fork_init_guard: choosing the backend may
// initialise CUDA or HIP, which call pthread_atfork, and that would deadlock with a fork() in
// another thread. So a fork() may copy a process whose system is half-made; the child then sets
// it aside and makes its own (system_fork below).
namespace {
pthread_mutex_t g_system_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<system*>& g_system = system_instance::made;
alignas(system) unsigned char g_system_storage[sizeof(system)];

/// At exit, as a function-local static would be: after everything made later, so the sim
/// backend unlinks its shared memory and no memarea object outlives main's return.
void destroy_system() noexcept {
  if (system* s = g_system.exchange(nullptr)) s->~system();
}

}  // namespace

struct system_fork final : fork_participant {
  system_fork() noexcept : fork_participant(lock_rank::system_init) {}
  void fork_child() noexcept override {
    // A thread that was choosing the backend is not in the child: its half-made system (still
    // unpublished, and holding no ranked lock or fork participant) is left as it is, and the
    // child's first call makes one in the same storage.
    g_system_lock = PTHREAD_MUTEX_INITIALIZER;
    if (system* s = g_system.load()) s->reports_mutex_ = PTHREAD_MUTEX_INITIALIZER;
  }
};
namespace {
system_fork g_system_fork;
}  // namespace

system& system::make() {
  pthread_mutex_lock(&g_system_lock);
  struct unlock_at_end {
    ~unlock_at_end() { pthread_mutex_unlock(&g_system_lock); }
  } unlock;
  if (system* s = g_system.load(std::memory_order_relaxed)) return *s;
  auto* s = new (g_system_storage) system;  // throws for malformed settings: tried again later
  std::atexit(destroy_system);
  g_system.store(s, std::memory_order_release);
  return *s;
}

system::system() : creator_pid_(static_cast<int>(getpid())) {
  std::optional<sim_config> sim;
  {
    std::lock_guard lock(config_mutex());
    g_started = true;
    sim = g_sim_config;
  }
  const char* forced = env("MEMAREA_BACKEND");
  std::unique_ptr<driver> chosen;
  auto make_sim = [&]() -> std::unique_ptr<driver> {
    sim_config cfg = sim ? *sim : sim_config_from_env();
    return make_sim_driver(cfg);
  };
  if (sim) {
    chosen = make_sim();
  } else if (forced) {
    std::string b = forced;
    if (b == "cuda") {
      chosen = make_cuda_driver();
    } else if (b == "hip") {
      chosen = make_hip_driver();
    } else if (b == "sim") {
      chosen = make_sim();
    } else if (b == "none") {
      chosen = make_unavailable_driver("none", "MEMAREA_BACKEND=none");
    } else {
      throw error(errc::invalid_value,
                  fmt::format("MEMAREA_BACKEND='{}' is not one of cuda, hip, sim, none", b));
    }
  } else {
    std::vector<std::string> why;
    auto cuda = make_cuda_driver();
    if (cuda->device_count() > 0) {
      chosen = std::move(cuda);
    } else {
      why.push_back("cuda: " + cuda->unavailable_reason());
      reports_.push_back(report_of(*cuda, false));
      auto hip = make_hip_driver();
      if (hip->device_count() > 0) {
        chosen = std::move(hip);
      } else {
        why.push_back("hip: " + hip->unavailable_reason());
        reports_.push_back(report_of(*hip, false));
        if (env("MEMAREA_SIM_DEVICES")) {
          chosen = make_sim();
        } else {
          why.push_back("sim: MEMAREA_SIM_DEVICES is not set");
          std::string reason;
          for (auto& w : why) reason += (reason.empty() ? "" : "; ") + w;
          chosen = make_unavailable_driver("none", "no GPU backend has devices (" + reason + ")");
        }
      }
    }
  }
  gpu_.emplace(std::move(chosen));
  count_ = gpu_->device_count();
  reports_.insert(reports_.begin(), report_of(gpu_->backend(), true));
}

system::~system() = default;

void system::check_device(int device, const char* what) const {
  // An id below -1 is never a device, with or without a backend: invalid, not "no device".
  if (device < -1) {
    throw error(errc::invalid_device,
                fmt::format("{}: device {} is neither -1 (the current device) nor an ordinal "
                            "(the {} backend has {} device{})",
                            what, device, gpu_->name(), count_, count_ == 1 ? "" : "s"));
  }
  if (count_ == 0) {
    throw error(errc::no_device,
                fmt::format("{}: no devices ({})", what, gpu_->unavailable_reason()));
  }
  if (device < 0 || device >= count_) {
    throw error(errc::invalid_device,
                fmt::format("{}: device {} is not a valid ordinal (the {} backend has {} device{})",
                            what, device, gpu_->name(), count_, count_ == 1 ? "" : "s"));
  }
}

std::vector<backend_report> system::reports() {
  pthread_mutex_lock(&reports_mutex_);
  struct unlock_at_end {
    pthread_mutex_t* m;
    ~unlock_at_end() { pthread_mutex_unlock(m); }
  } unlock{&reports_mutex_};
  if (!probed_all_) {
    probed_all_ = true;
    auto have = [&](const char* n) {
      for (auto& r : reports_)
        if (r.name == n) return true;
      return false;
    };
    // Probe the backends the choice did not look at, so `memarea info` can say why each is
    // or is not there. Sim is only probed when configured: it allocates nothing until used.
    if (!have("cuda")) reports_.push_back(report_of(*make_cuda_driver(), false));
    if (!have("hip")) reports_.push_back(report_of(*make_hip_driver(), false));
    if (!have("sim")) {
      backend_report r{"sim", false, 0, "MEMAREA_SIM_DEVICES is not set", "memarea sim 1"};
      if (const char* n = env("MEMAREA_SIM_DEVICES")) {
        r.reason = fmt::format("configured (MEMAREA_SIM_DEVICES={}) but not active", n);
      }
      reports_.push_back(r);
    }
  }
  return reports_;
}

void configure_sim(const sim_config& config) {
  std::lock_guard lock(config_mutex());
  if (g_started) {
    throw error(errc::busy,
                "memarea::sim::configure: memarea is already initialised; configure the sim "
                "backend before any other memarea call");
  }
  if (config.devices < 0 || config.devices > 64)
    throw error(errc::invalid_value,
                fmt::format("sim devices must be 0..64, not {}", config.devices));
  if (config.device_memory == 0)
    throw error(errc::invalid_value, "sim device memory must be larger than 0");
  if (config.max_peers < 0)
    throw error(errc::invalid_value,
                fmt::format("sim max peers must be >= 0, not {}", config.max_peers));
  std::vector<bool> seen(static_cast<size_t>(config.devices), false);
  for (const auto& group : config.peer_groups) {
    for (int d : group) {
      if (d < 0 || d >= config.devices)
        throw error(errc::invalid_value,
                    fmt::format("sim peer group names device {}, not one of 0..{}", d,
                                config.devices - 1));
      if (seen[static_cast<size_t>(d)])
        throw error(errc::invalid_value,
                    fmt::format("sim peer groups name device {} twice", d));
      seen[static_cast<size_t>(d)] = true;
    }
  }
  std::vector<bool> pageable(static_cast<size_t>(config.devices), false);
  for (int d : config.pageable_devices) {
    if (d < 0 || d >= config.devices)
      throw error(errc::invalid_value,
                  fmt::format("sim pageable memory access names device {}, not one of 0..{}", d,
                              config.devices - 1));
    if (pageable[static_cast<size_t>(d)])
      throw error(errc::invalid_value,
                  fmt::format("sim pageable memory access names device {} twice", d));
    pageable[static_cast<size_t>(d)] = true;
  }
  g_sim_config = config;
}

int current_device() {
  auto& sys = system::get();
  if (sys.device_count() == 0) sys.check_device(0, "current device");
  int d = 0;
  check(sys.gpu().get_current_device(&d), "get current device");
  return d;
}

}  // namespace memarea::detail
