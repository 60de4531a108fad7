// Shared helpers of the command-line tests (tests/cli/cli_*_test.cpp): the `memarea` tool and
// memarea-bench run as real processes, with a deadline that describes and kills a hung child,
// stdout and stderr kept apart, and a scratch directory per test.
#pragma once

#include "topo/topo_built.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace memarea::cli_test {

namespace fs = std::filesystem;

/// What one run of the tool left behind.
struct outcome {
  int exit_code = -1;  ///< the exit status, or 128 + signal
  std::string out, err;
};

/// The whole file p (empty when it cannot be read).
inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// A fresh directory for one test's files, removed with it.
class scratch_dir {
 public:
  scratch_dir() {
    std::string t = (fs::temp_directory_path() / "memarea-cli-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path_ = t;
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// How long a run of the tool may take before the test gives up on it (a hung child is
/// described and killed; CI machines run tests a few times slower than a desk).
inline constexpr auto k_deadline = std::chrono::seconds(240);

/// The environment of a run: this process's, without any MEMAREA_* variable, plus `env`.
inline std::vector<std::string> child_environment(const std::vector<std::string>& env) {
  std::vector<std::string> all;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MEMAREA_", 8) != 0) all.emplace_back(*e);
  all.insert(all.end(), env.begin(), env.end());
  return all;
}

/// Starts `program args...` (MEMAREA_CLI, the `memarea` tool, by default; MEMAREA_BENCH for
/// memarea-bench) with `env` (see child_environment) and fds 1 and 2 from out_fd and err_fd.
/// Everything the child needs is built here: between fork() and exec only dup2 runs.
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::vector<std::string>& env,
                int out_fd, int err_fd, const char* program = MEMAREA_CLI) {
  const std::vector<std::string> envs = child_environment(env);
  std::vector<char*> argv{const_cast<char*>(program)}, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& kv : envs) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(126);
    ::execve(program, argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits for pid until `until`; its exit code, 128 + signal, or -1 after killing it (then
/// `why` says where it was stuck).
inline int wait_until(pid_t pid, std::chrono::steady_clock::time_point until, std::string* why) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) {
      *why = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
    if (std::chrono::steady_clock::now() >= until) {
      std::ifstream wchan("/proc/" + std::to_string(pid) + "/wchan");
      std::string w;
      std::getline(wchan, w);
      *why = "no exit within the deadline; it sleeps in " + (w.empty() ? "?" : w);
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

/// Runs `program args...` (see spawn_cli); stdout and stderr are kept apart.
inline outcome run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env,
                const char* program = MEMAREA_CLI) {
  scratch_dir io;
  const fs::path out = io.path() / "out", err = io.path() / "err";
  const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (o < 0 || e < 0) throw std::runtime_error(std::string("open: ") + std::strerror(errno));
  const pid_t pid = spawn_cli(args, env, o, e, program);
  ::close(o);
  ::close(e);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  outcome r;
  std::string why;
  r.exit_code = wait_until(pid, std::chrono::steady_clock::now() + k_deadline, &why);
  r.out = slurp(out);
  r.err = slurp(err) + why;
  return r;
}

/// Runs `memarea-bench args...` (see run_cli).
inline outcome run_bench(const std::vector<std::string>& args,
                         const std::vector<std::string>& env) {
  return run_cli(args, env, MEMAREA_BENCH);
}

/// Four sim devices in two peer groups (0, 1 and 2, 3).
inline const std::vector<std::string> k_sim4_groups{
    "MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=4", "MEMAREA_SIM_PEER_GROUPS=0,1;2,3"};

/// How many times `what` occurs in text (not overlapping).
inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

/// Where the library was built without the topology measurement, expects r, a run of
/// `memarea topo` that got as far as measuring, to be its refusal (exit status 1, the reason on
/// stderr) and returns true: the test ends there, as what it checks next needs a measurement.
/// Where the measurement is built, returns false and expects nothing.
inline bool topo_refused_as_compiled_out(const outcome& r) {
  if (memarea::test::topo_built()) return false;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(std::string("memarea: topo: ") + memarea::test::kTopoCompiledOut +
                       " [MEMAREA_ERROR_NOT_SUPPORTED]"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  return true;
}

}  // namespace memarea::cli_test
