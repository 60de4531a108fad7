// Helpers of the multi-process and fork() tests: the helper process (tests/helper), a forked
// child with a bounded wait that describes a hang, and the helper's data pattern.
#pragma once

#include "api/common.hpp"

#include <memarea/copy.hpp>
#include <memarea/ipc.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

// fork() while other threads allocate, under a sanitizer whose allocator is not fork-safe, can
// hang the child in the sanitizer's own allocator: GCC 12's ASan holds none of its allocator's
// locks across fork(); clang 19's runtime installs a fork handler that does. A child hung that
// way on 2026-11-24, once in 14 x 500 forks of the storm, with no lock of memarea held. The
// tests that fork while threads of the test allocate therefore run under clang 19's ASan
// (preset asan-fork, `scripts/test.sh --asan-fork`, in CI) and skip under GCC's (this macro);
// the default build (glibc's malloc holds its locks across fork()) runs them too.
#if defined(__SANITIZE_ADDRESS__) && (!defined(__clang__) || __clang_major__ < 19)
#define MEMAREA_SKIP_UNLESS_ASAN_IS_FORK_SAFE()                                              \
  GTEST_SKIP() << "this compiler's ASan does not hold its allocator's locks across fork(); " \
                  "the asan-fork preset (clang 19) runs this test"
#else
#define MEMAREA_SKIP_UNLESS_ASAN_IS_FORK_SAFE() (void)0
#endif

namespace memarea::test {


/// The helper binary: $MEMAREA_TEST_HELPER (a copied build tree), else the one CMake built.
inline const char* const kHelper = [] {
  if (const char* e = std::getenv("MEMAREA_TEST_HELPER"); e && *e) return e;
#ifdef MEMAREA_TEST_HELPER
  return static_cast<const char*>(MEMAREA_TEST_HELPER);
#else
  return static_cast<const char*>(nullptr);
#endif
}();

#define REQUIRE_HELPER() \
  do {                   \
    if (!kHelper) GTEST_SKIP() << "memarea_test_helper was not built"; \
  } while (0)

/// The helper's pattern (tests/helper/main.cpp): a function of (seed, n).
inline std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  if (n) v[0] |= 1;
  return v;
}

inline std::uint64_t new_seed() {
  static std::mutex m;  // tests call it from several threads
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(m);
  std::uint64_t s = 0;
  while (s == 0) s = rng();
  return s >> 1;  // fits strtoull in the helper
}

inline void fill(void* dev, std::uint64_t seed, std::size_t n) {
  auto v = pattern(seed, n);
  copy(dev, v.data(), n);
}

inline bool holds(const void* dev, std::uint64_t seed, std::size_t n, std::size_t off = 0) {
  auto v = pattern(seed, n);
  std::vector<unsigned char> got(n - off, 0);
  copy(got.data(), dev, n - off);
  return std::memcmp(got.data(), v.data() + off, n - off) == 0;
}

/// Environment changes for a child: NAME -> value, or nullopt to remove NAME.
using env_changes = std::vector<std::pair<std::string, std::optional<std::string>>>;

/// This process's environment with `changes` applied (storage for execve's envp).
inline std::vector<std::string> environment_with(const env_changes& changes) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const bool changed = std::any_of(changes.begin(), changes.end(), [&](const auto& c) {
      return entry.rfind(c.first + "=", 0) == 0;
    });
    if (!changed) env.push_back(entry);
  }
  for (const auto& [name, value] : changes)
    if (value) env.push_back(name + "=" + *value);
  return env;
}

/// A helper process with its stdin and stdout piped to us.
class child {
 public:
  /// merge_stderr: the child's stderr goes to the same pipe as its stdout (what line() reads).
  explicit child(std::vector<std::string> args, int keep_fd = -1, const env_changes& env = {},
                 bool merge_stderr = false) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> env_storage = environment_with(env);
    std::vector<char*> envp;
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kHelper));
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // posix_spawn, not fork: glibc's runs no fork handlers in the child. memarea's (the sim's
    // among them) allocate, and under GCC's ASan, whose allocator is not fork-safe, a child
    // forked while another thread (memarea's background one) held its lock hung there.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    // A descriptor onto itself: clears its close-on-exec flag (glibc 2.29 and later).
    if (keep_fd >= 0) posix_spawn_file_actions_adddup2(&actions, keep_fd, keep_fd);
    const int spawned = posix_spawn(&pid_, kHelper, &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (spawned != 0) {
      pid_ = -1;
      ::close(in[1]);
      ::close(out[0]);
      throw std::runtime_error(std::string("posix_spawn of the test helper: ") +
                               std::strerror(spawned));
    }
    to_ = in[1];
    from_ = fdopen(out[0], "r");
  }
  ~child() {
    close_stdin();
    if (pid_ > 0 && !reaped_) wait();
    if (from_) fclose(from_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  std::string line() {
    char buf[1024];
    if (!fgets(buf, sizeof buf, from_)) return "<eof>";
    std::string s = buf;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  std::string ask(const std::string& cmd) {
    std::string s = cmd + "\n";
    if (::write(to_, s.data(), s.size()) != static_cast<ssize_t>(s.size())) return "<broken>";
    return line();
  }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  /// Exit status (or 128+signal).
  int wait() {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void kill_now() { ::kill(pid_, SIGKILL); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
  bool reaped_ = false;
};

inline std::string hex(const ipc::handle& h) { return h.to_hex(); }

inline std::string str(std::uint64_t v) { return std::to_string(v); }

/// The lease named in a memarea object's name in /dev/shm, as docs/ipc.md documents them:
/// memarea-KIND-OWNER[-RANDOM], KIND lower-case letters and OWNER 16 hex digits; 0 for any
/// other name.
inline std::uint64_t owner_in_name(std::string_view name) {
  constexpr std::string_view prefix = "memarea-";
  if (name.substr(0, prefix.size()) != prefix) return 0;
  name.remove_prefix(prefix.size());
  const std::size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return 0;
  for (char c : name.substr(0, dash))
    if (c < 'a' || c > 'z') return 0;
  name.remove_prefix(dash + 1);
  if (name.size() < 16 || (name.size() > 16 && name[16] != '-')) return 0;
  std::uint64_t v = 0;
  for (char c : name.substr(0, 16)) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  return v;
}

/// memarea's objects in /dev/shm made by the process whose lease is `owner`: those of one kind
/// ("ipc", "sim", "lease"), or all of them when kind is empty.
inline std::set<std::string> objects_of(std::uint64_t owner, std::string_view kind = {}) {
  std::set<std::string> names;
  if (owner == 0) return names;
  if (DIR* d = opendir("/dev/shm")) {
    const std::string prefix = kind.empty() ? "memarea-" : "memarea-" + std::string(kind) + "-";
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0 && owner_in_name(name) == owner) names.insert(name);
    }
    closedir(d);
  }
  return names;
}

/// A lease as the helper prints it (its "owner" command: 16 hex digits).
inline std::uint64_t owner_from_hex(const std::string& s) { return std::stoull(s, nullptr, 16); }

/// Rounds of the fork storm: MEMAREA_TEST_FORK_ROUNDS (ctest's api_sim2_fork_storm and
/// whitebox_sim2_fork_storm: 500); 0 when unset.
inline int fork_storm_rounds() {
  if (const char* v = std::getenv("MEMAREA_TEST_FORK_ROUNDS"); v && *v) return std::atoi(v);
  return 0;
}

/// Seconds either side of a fork() test waits for the other. Only a hang should reach it: a CI
/// machine that is shared and slow may stall a process for tens of seconds (the child's steps
/// take milliseconds), and a hang is then described (see forked::where) rather than raced.
inline constexpr int kForkWait = 240;

/// A child of fork(): killed and reaped if the test leaves before it exited.
struct forked {
  pid_t pid = -1;
  bool reaped = false;
  forked() = default;
  forked(const forked&) = delete;
  forked& operator=(const forked&) = delete;
  ~forked() {
    if (pid > 0 && !reaped) {
      ::kill(pid, SIGKILL);
      int st = 0;
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
  }
  /// Where the child is, for failure messages: the step it reported last (see fork_case::stage)
  /// and, while it runs, the kernel function it sleeps in and its current system call (a
  /// blocked futex, syscall 202 on x86-64, is a lock that will never be released).
  std::string where(const volatile int* stage) const {
    auto first_line = [](const std::string& path) {
      std::string line;
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[256];
        if (std::fgets(buf, sizeof buf, f)) line = buf;
        std::fclose(f);
      }
      while (!line.empty() && (line.back() == '\n' || line.back() == '\0')) line.pop_back();
      return line.empty() ? std::string("?") : line;
    };
    const std::string proc = "/proc/" + std::to_string(pid);
    std::string out = "child at step " + std::to_string(stage ? *stage : -1) + ", wchan " +
                      first_line(proc + "/wchan") + ", syscall " + first_line(proc + "/syscall");
    // Its stacks, where gdb is installed: a hang then names the lock it waits for.
    if (::access("/usr/bin/gdb", X_OK) == 0) {
      const std::string cmd = "timeout 30 /usr/bin/gdb -p " + std::to_string(pid) +
                              " -batch -nx -ex 'thread apply all bt' 2>&1";
      if (FILE* f = ::popen(cmd.c_str(), "r")) {
        out += "\n";
        char buf[512];
        while (std::fgets(buf, sizeof buf, f)) out += buf;
        ::pclose(f);
      }
    }
    return out;
  }
  /// Exit status, 128+signal, or -1 (then killed) when it did not exit within `seconds`.
  int wait(int seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int st = 0;
    while (std::chrono::steady_clock::now() < until) {
      pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid) {
        reaped = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (r < 0 && errno != EINTR) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }
};

/// Polls `done` every 10 ms for up to `seconds`: what the background thread does takes one
/// tick (50 ms) when the machine is idle; the bound only catches a thread that never does it.
template <class Done>
bool within(int seconds, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Reads exactly n bytes from fd within `seconds`; false on timeout, EOF or error.
inline bool read_within(int fd, void* buf, std::size_t n, int seconds) {
  auto* p = static_cast<unsigned char*>(buf);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

inline bool write_all(int fd, const void* buf, std::size_t n) {
  return ::write(fd, buf, n) == static_cast<ssize_t>(n);
}

}  // namespace memarea::test
