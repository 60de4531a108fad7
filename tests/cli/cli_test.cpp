// The `memarea` command-line tool and memarea-bench, run as real processes on the sim backend:
// what `info`, `topo` and memarea-bench print (text, JSON, SVG) and how they refuse bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// What one run of the tool left behind.
struct outcome {
  int exit_code = -1;  ///< the exit status, or 128 + signal
  std::string out, err;
};

std::string slurp(const fs::path& p) {
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
constexpr auto k_deadline = std::chrono::seconds(240);

/// The environment of a run: this process's, without any MEMAREA_* variable, plus `env`.
std::vector<std::string> child_environment(const std::vector<std::string>& env) {
  std::vector<std::string> all;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MEMAREA_", 8) != 0) all.emplace_back(*e);
  all.insert(all.end(), env.begin(), env.end());
  return all;
}

/// Starts `program args...` (MEMAREA_CLI, the `memarea` tool, by default; MEMAREA_BENCH for
/// memarea-bench) with `env` (see child_environment) and fds 1 and 2 from out_fd and err_fd.
/// Everything the child needs is built here: between fork() and exec only dup2 runs.
pid_t spawn_cli(const std::vector<std::string>& args, const std::vector<std::string>& env,
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
int wait_until(pid_t pid, std::chrono::steady_clock::time_point until, std::string* why) {
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
outcome run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env,
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
outcome run_bench(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  return run_cli(args, env, MEMAREA_BENCH);
}

const std::vector<std::string> k_sim4_groups{"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=4",
                                             "MEMAREA_SIM_PEER_GROUPS=0,1;2,3"};

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

// --- info --------------------------------------------------------------------------------------

TEST(CliInfo, JsonNamesTheActiveBackendAndItsDevices) {
  const auto r = run_cli({"info", "--json"}, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "sim");
  ASSERT_EQ(j.at("devices").size(), 3u);
  bool sim_listed = false;
  for (const auto& b : j.at("backends"))
    if (b.at("name") == "sim") {
      sim_listed = true;
      EXPECT_TRUE(b.at("active").get<bool>());
      EXPECT_EQ(b.at("devices"), 3);
    }
  EXPECT_TRUE(sim_listed) << r.out;
}

// With no device, the text ends with how to try the sim backend; with devices it does not.
TEST(CliInfo, WithoutDevicesTheLastLineShowsHowToTryTheSim) {
  const auto none = run_cli({"info"}, {"MEMAREA_BACKEND=none"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  const std::string hint = "MEMAREA_SIM_DEVICES=4 memarea topo";
  ASSERT_GE(none.out.size(), hint.size() + 1) << none.out;
  EXPECT_EQ(none.out.substr(none.out.size() - hint.size() - 1), hint + "\n") << none.out;
  const auto sim = run_cli({"info"}, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.out.find(hint), std::string::npos) << sim.out;
  // The line is one line, and its command works as written (here, with small copies).
  const auto last = none.out.substr(none.out.rfind('\n', none.out.size() - 2) + 1);
  EXPECT_NE(last.find("MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=4 memarea topo"),
            std::string::npos)
      << last;
  const auto tried = run_cli({"topo", "--size", "64K", "--reps", "1"},
                             {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=4"});
  EXPECT_EQ(tried.exit_code, 0) << tried.err;
}

TEST(CliInfo, BadBackendSettingIsRefusedWithItsName) {
  const auto r = run_cli({"info"}, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2",
                                    "MEMAREA_SIM_PEER_GROUPS=0,1;2,3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("MEMAREA_SIM_PEER_GROUPS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[MEMAREA_ERROR_INVALID_VALUE]"), std::string::npos) << r.err;
  // The status is named once, not twice.
  EXPECT_EQ(count_of(r.err, "MEMAREA_ERROR_INVALID_VALUE"), 1u) << r.err;
}

TEST(Cli, NoOrUnknownSubcommandIsAUsageError) {
  for (const auto& args : {std::vector<std::string>{}, std::vector<std::string>{"frobnicate"}}) {
    const auto r = run_cli(args, {"MEMAREA_BACKEND=sim"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_FALSE(r.err.empty());
  }
}

// A mistyped command is named as such, with the commands there are, not "A subcommand is
// required"; the same one level down (`memarea ipc`).
TEST(Cli, UnknownCommandIsNamedWithTheCommandsThereAre) {
  const auto r = run_cli({"xyz"}, {"MEMAREA_BACKEND=sim"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown command 'xyz'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(commands: info, topo, ipc;"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
  const auto nested = run_cli({"ipc", "collect"}, {"MEMAREA_BACKEND=sim"});
  EXPECT_NE(nested.exit_code, 0);
  EXPECT_NE(nested.err.find("unknown command 'ipc collect'"), std::string::npos) << nested.err;
  EXPECT_NE(nested.err.find("gc"), std::string::npos) << nested.err;
}

// `memarea bench` is a command no more: refused as an unknown command is (exit status 2), naming
// the program that took it over, which runs the same options.
TEST(Cli, BenchIsRefusedNamingMemareaBench) {
  for (const auto& args : {std::vector<std::string>{"bench"},
                           std::vector<std::string>{"bench", "--quick", "--filter", "area"},
                           std::vector<std::string>{"--version", "bench"}}) {
    const auto r = run_cli(args, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("unknown command 'bench'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("memarea-bench"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  const auto help = run_cli({"--help"}, {"MEMAREA_BACKEND=none"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("memarea-bench"), std::string::npos) << help.out;
}

// --version prints the project's version (CMake's project(VERSION)), with or without devices.
TEST(Cli, VersionPrintsTheProjectVersion) {
  for (const char* backend : {"MEMAREA_BACKEND=none", "MEMAREA_BACKEND=sim"}) {
    const auto r = run_cli({"--version"}, {backend});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, std::string("memarea ") + MEMAREA_VERSION_STRING + "\n");
  }
}

// memarea-bench and topo with nothing to measure fail, saying so and how to get simulated
// devices, rather than printing an empty table and succeeding.
TEST(Cli, BenchAndTopoWithoutDevicesSayThereIsNoDeviceToMeasure) {
  for (const auto& env : {std::vector<std::string>{"MEMAREA_BACKEND=none"},
                          std::vector<std::string>{"MEMAREA_BACKEND=sim",
                                                   "MEMAREA_SIM_DEVICES=0"}}) {
    for (const auto& args :
         {std::vector<std::string>{"bench", "--quick", "--reps", "1"},
          std::vector<std::string>{"topo", "--size", "64K", "--reps", "1"},
          std::vector<std::string>{"topo", "--json", "--size", "64K", "--reps", "1"}}) {
      // "bench": memarea-bench with the options that follow.
      const auto r = args[0] == "bench" ? run_bench({args.begin() + 1, args.end()}, env)
                                        : run_cli(args, env);
      EXPECT_NE(r.exit_code, 0) << args[0] << " " << env[0] << "\n" << r.out;
      EXPECT_NE(r.err.find("no device to measure"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("MEMAREA_SIM_DEVICES="), std::string::npos) << r.err;
      EXPECT_EQ(r.out, "") << args[0] << " " << env[0];
    }
  }
}

// --- topo --------------------------------------------------------------------------------------

/// Off the diagonal: a positive number. On it: null (a device is not its own peer).
void expect_measured(const nlohmann::json& m, int n, const char* name) {
  ASSERT_EQ(m.size(), static_cast<std::size_t>(n)) << name;
  for (int a = 0; a < n; ++a) {
    ASSERT_EQ(m[a].size(), static_cast<std::size_t>(n)) << name;
    for (int b = 0; b < n; ++b) {
      if (a == b) {
        EXPECT_TRUE(m[a][b].is_null()) << name << " [" << a << "][" << b << "]";
      } else {
        ASSERT_TRUE(m[a][b].is_number()) << name << " [" << a << "][" << b << "]";
        EXPECT_GT(m[a][b].get<double>(), 0.0) << name << " [" << a << "][" << b << "]";
      }
    }
  }
}

TEST(CliTopo, JsonFollowsThePeerGroups) {
  const auto r = run_cli({"topo", "--json", "--size", "256K", "--reps", "2"}, k_sim4_groups);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("backend"), "sim");
  EXPECT_EQ(j.at("size"), 256 * 1024);
  EXPECT_EQ(j.at("reps"), 2);
  ASSERT_EQ(j.at("devices").size(), 4u);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(j["devices"][d].at("ordinal"), d);
  // Groups {0,1} and {2,3}: access inside a group, both ways; none across; none to itself.
  const auto& access = j.at("access");
  const auto& path = j.at("path");
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      const bool same_group = a != b && (a / 2 == b / 2);
      EXPECT_EQ(access[a][b].get<int>(), same_group ? 1 : 0) << a << "->" << b;
      EXPECT_EQ(path[a][b].get<std::string>(), a == b       ? "-"
                                               : same_group ? "peer"
                                                            : "staged")
          << a << "->" << b;
      EXPECT_FALSE(j.at("link")[a][b].get<std::string>().empty());
    }
  expect_measured(j.at("unidirectional_gbps"), 4, "unidirectional");
  expect_measured(j.at("bidirectional_gbps"), 4, "bidirectional");
  expect_measured(j.at("latency_4k_us"), 4, "latency");
  expect_measured(j.at("all_pairs_at_once_gbps"), 4, "all pairs");
  EXPECT_GT(j.at("all_pairs_at_once_total_gbps").get<double>(), 0.0);
}

TEST(CliTopo, TextPrintsEveryMatrix) {
  const auto r = run_cli({"topo", "--size", "64K", "--reps", "1"}, k_sim4_groups);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* heading :
       {"peer access", "link", "copy path", "unidirectional bandwidth", "bidirectional bandwidth",
        "4 KiB copy latency", "all pairs at once", "all pairs at once, total"})
    EXPECT_NE(r.out.find(heading), std::string::npos) << heading << "\n" << r.out;
  for (int d = 0; d < 4; ++d)
    EXPECT_NE(r.out.find("GPU " + std::to_string(d) + ":"), std::string::npos) << r.out;
  // Progress is for terminals only: a file gets none of its carriage returns.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
}

TEST(CliTopo, ProgressShowsOnATerminalAndIsClearedAtTheEnd) {
  // stderr on a pseudo-terminal, stdout to a file (as `memarea topo > matrix.txt` run by a
  // person): progress goes to the terminal and none of it to the file.
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0) << std::strerror(errno);
  ::fcntl(master, F_SETFD, FD_CLOEXEC);  // the child gets the slave as fd 2 only
  ::fcntl(slave, F_SETFD, FD_CLOEXEC);
  scratch_dir dir;
  const fs::path out = dir.path() / "out";
  const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(o, 0) << std::strerror(errno);
  const pid_t pid = spawn_cli({"topo", "--size", "64K", "--reps", "1"}, k_sim4_groups, o, slave);
  ::close(o);
  ::close(slave);
  ASSERT_GE(pid, 0) << std::strerror(errno);
  const auto until = std::chrono::steady_clock::now() + k_deadline;
  std::string tty;
  char buf[4096];
  // Read while it runs (a full terminal buffer would stop it), until EIO: the child has gone
  // and with it the last open slave.
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      const ssize_t got = ::read(master, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      tty.append(buf, static_cast<std::size_t>(got));
    }
  }
  ::close(master);
  std::string why;
  const int status = wait_until(pid, until, &why);
  ASSERT_EQ(status, 0) << why << "\n" << tty;
  EXPECT_NE(tty.find("\rtopo: measuring 0 -> 1"), std::string::npos) << tty;
  EXPECT_NE(tty.find("\rtopo: measuring 3 -> 2"), std::string::npos) << tty;
  EXPECT_NE(tty.find("measuring all pairs at once"), std::string::npos) << tty;
  // The last thing on the terminal clears the progress line.
  EXPECT_TRUE(tty.ends_with("\r\x1b[K")) << tty;
  const std::string text = slurp(out);
  EXPECT_NE(text.find("unidirectional bandwidth"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

TEST(CliTopo, SvgHasAPanelPerMeasurementAndACellPerPair) {
  scratch_dir dir;
  const fs::path svg = dir.path() / "topo.svg";
  const auto r =
      run_cli({"topo", "--size", "64K", "--reps", "1", "--svg", svg.string()}, k_sim4_groups);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string s = slurp(svg);
  ASSERT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << s.substr(0, 200);
  EXPECT_TRUE(s.ends_with("</svg>\n"));
  for (const char* title : {"Unidirectional bandwidth", "Bidirectional bandwidth",
                            "4 KiB copy latency", "All pairs at once (GB/s per pair)",
                            "Host \u2194 device"})
    EXPECT_EQ(count_of(s, title), 1u) << title;
  // Four panels of 4 x 4 cells, and the host row's four figures for each device.
  EXPECT_EQ(count_of(s, "data-cell=\"peer\""), 4u * 16u);
  EXPECT_EQ(count_of(s, "data-cell=\"host\""), 4u * 4u);
  // Every element is closed: as many <text ...> as </text>.
  EXPECT_EQ(count_of(s, "<text "), count_of(s, "</text>"));
  // The diagonal says "-"; the 12 measured cells of each panel and the 16 host cells carry a
  // number.
  const std::regex number_cell(
      R"(text-anchor="middle" fill="#[0-9a-f]{6}">[0-9]+(\.[0-9]+)?</text>)");
  const auto numbers =
      std::distance(std::sregex_iterator(s.begin(), s.end(), number_cell), std::sregex_iterator());
  EXPECT_EQ(numbers, 4 * 12 + 16);
  // Link labels are explained in the legend; no bare question mark anywhere.
  EXPECT_NE(s.find(">sim: emulated devices"), std::string::npos);
  EXPECT_EQ(s.find("?<"), std::string::npos);
}

TEST(CliTopo, BaselineAddsRawFiguresAndEveryMatrixHasAMethod) {
  const auto r = run_cli({"topo", "--json", "--size", "64K", "--reps", "1", "--baseline"},
                         {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("trials"), 3);
  const auto& methods = j.at("methods");
  for (const char* key : {"unidirectional_gbps", "bidirectional_gbps", "latency_4k_us",
                          "latency_4k_sync_us", "host_to_device_gbps", "device_to_host_gbps",
                          "host_to_device_latency_4k_us", "device_to_host_latency_4k_us",
                          "all_pairs_at_once_gbps"}) {
    ASSERT_TRUE(methods.contains(key)) << key;
    EXPECT_FALSE(methods[key].at("timing").get<std::string>().empty()) << key;
    EXPECT_FALSE(methods[key].at("compare_with").get<std::string>().empty()) << key;
  }
  EXPECT_EQ(methods["latency_4k_us"].at("size_bytes"), 4096);
  EXPECT_EQ(methods["latency_4k_us"].at("copies_per_trial"), 100);
  EXPECT_EQ(methods["unidirectional_gbps"].at("size_bytes"), 64 * 1024);
  const auto& raw = j.at("raw");
  for (const char* key : {"unidirectional_gbps", "bidirectional_gbps", "latency_4k_us",
                          "latency_4k_sync_us"}) {
    expect_measured(j.at(key), 2, key);
    expect_measured(raw.at(key), 2, key);
  }
  for (const char* key : {"host_to_device_gbps", "device_to_host_gbps",
                          "host_to_device_latency_4k_us", "device_to_host_latency_4k_us"})
    for (int d = 0; d < 2; ++d) {
      EXPECT_GT(j.at(key)[d].get<double>(), 0.0) << key;
      EXPECT_GT(raw.at(key)[d].get<double>(), 0.0) << key;
    }
  EXPECT_EQ(j.at("link_legend").at("sim").get<std::string>().rfind("emulated", 0), 0u);
  EXPECT_EQ(j.at("host_link")[0], "sim");
  // Without --baseline: no raw figures.
  const auto plain = run_cli({"topo", "--json", "--size", "64K", "--reps", "1"},
                             {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("raw"));
}

TEST(CliTopo, OneDeviceMeasuresTheHostRowAndSaysThereAreNoPairs) {
  scratch_dir dir;
  const fs::path svg = dir.path() / "one.svg";
  const auto r = run_cli({"topo", "--size", "64K", "--reps", "1", "--svg", svg.string()},
                         {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fewer than 2 devices"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("host <-> device"), std::string::npos) << r.out;
  const std::string s = slurp(svg);
  EXPECT_EQ(count_of(s, "data-cell=\"host\""), 4u);
  EXPECT_EQ(count_of(s, "data-cell=\"peer\""), 0u);
  EXPECT_NE(s.find("no device pairs"), std::string::npos);
  const auto j = run_cli({"topo", "--json", "--size", "64K", "--reps", "1"},
                         {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc.at("devices").size(), 1u);
  EXPECT_GT(doc.at("host_to_device_gbps")[0].get<double>(), 0.0);
  EXPECT_GT(doc.at("device_to_host_latency_4k_us")[0].get<double>(), 0.0);
}

TEST(CliTopo, BadInputFailsAtOnceAndLeavesFilesAlone) {
  scratch_dir dir;
  const fs::path keep = dir.path() / "keep.svg";
  std::ofstream(keep) << "previous contents";
  struct bad_case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<bad_case> cases{
      {{"topo", "--size", "abc", "--svg", keep.string()}, "not a size"},
      {{"topo", "--size", "0", "--svg", keep.string()}, "--size is 0"},
      {{"topo", "--size", "-4K", "--svg", keep.string()}, "must not be negative"},
      {{"topo", "--reps", "0", "--svg", keep.string()}, "--reps"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args, k_sim4_groups);
    EXPECT_NE(r.exit_code, 0) << c.args[1];
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << " not in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(slurp(keep), "previous contents");
  }
}

// Devices of 1 MiB cannot hold 64 MiB copies: measuring fails with OUT_OF_MEMORY. An output path
// that cannot be written must be refused before that, and a measurement that fails must leave
// the output file as it was (or not create it).
const std::vector<std::string> k_sim2_tiny{"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2",
                                           "MEMAREA_SIM_DEVICE_MEMORY=1M"};

TEST(CliTopo, UnwritableSvgIsRefusedBeforeMeasuring) {
  scratch_dir dir;
  const fs::path missing = dir.path() / "no-such-dir" / "t.svg";
  auto r = run_cli({"topo", "--size", "64M", "--svg", missing.string()}, k_sim2_tiny);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot write " + missing.string() + ": No such file or directory"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("OUT_OF_MEMORY"), std::string::npos) << "measured first: " << r.err;
  EXPECT_FALSE(fs::exists(missing.parent_path()));
  r = run_cli({"topo", "--size", "64M", "--svg", dir.path().string()}, k_sim2_tiny);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(dir.path().string() + " is a directory"), std::string::npos) << r.err;
}

TEST(CliTopo, FailedMeasurementLeavesTheSvgFileAlone) {
  scratch_dir dir;
  const fs::path keep = dir.path() / "keep.svg", fresh = dir.path() / "fresh.svg";
  std::ofstream(keep) << "previous contents";
  for (const auto& path : {keep, fresh}) {
    const auto r = run_cli({"topo", "--size", "64M", "--svg", path.string()}, k_sim2_tiny);
    EXPECT_NE(r.exit_code, 0);
    // The driver's error is named once, with memarea's status once.
    EXPECT_EQ(count_of(r.err, "SIM_ERROR_OUT_OF_MEMORY"), 1u) << r.err;
    EXPECT_EQ(count_of(r.err, "MEMAREA_ERROR_OUT_OF_MEMORY"), 1u) << r.err;
    EXPECT_NE(r.err.find("[MEMAREA_ERROR_OUT_OF_MEMORY]"), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(keep), "previous contents");
  EXPECT_FALSE(fs::exists(fresh));
}

// --- bench -------------------------------------------------------------------------------------

TEST(CliBench, QuickRunMeasuresEveryCaseSideBySide) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_bench({"--quick", "--reps", "2", "--json", json.string()},
                           {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("backend"), "sim");
  EXPECT_EQ(j.at("devices"), 2);
  EXPECT_TRUE(j.at("failed").empty()) << j.at("failed").dump();
  std::vector<std::string> groups;
  std::size_t progress_at = 0;
  for (const auto& row : j.at("rows")) {
    groups.push_back(row.at("group"));
    // Each row says on stderr, in the table's order, that it is done (where a stalled run was).
    const std::string done = "bench:   " + row.at("group").get<std::string>() + ", " +
                             row.at("variant").get<std::string>() + ": done at ";
    progress_at = r.err.find(done, progress_at);
    ASSERT_NE(progress_at, std::string::npos) << done << "\n" << r.err;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(r.err[progress_at + done.size()])))
        << r.err.substr(progress_at, done.size() + 12);
    progress_at += done.size();  // rows may share a name (one per baseline): each has its line
    EXPECT_GT(row.at("memarea").get<double>(), 0.0) << row.dump();
    EXPECT_GT(row.at("raw").get<double>(), 0.0) << row.dump();  // sim has a baseline everywhere
    // Both sides' min <= median <= max, the median being the row's figure.
    for (const char* side : {"memarea", "raw"}) {
      const auto& s = row.at(std::string(side) + "_spread");
      ASSERT_TRUE(s.is_object()) << side << ": " << row.dump();
      EXPECT_LE(s.at("min").get<double>(), s.at("median").get<double>()) << row.dump();
      EXPECT_LE(s.at("median").get<double>(), s.at("max").get<double>()) << row.dump();
      EXPECT_DOUBLE_EQ(s.at("median").get<double>(), row.at(side).get<double>()) << row.dump();
    }
    // No bare ratio: a direction and a factor >= 1, read the same way for every unit.
    EXPECT_FALSE(row.contains("ratio")) << row.dump();
    const std::string dir_word = row.at("direction");
    EXPECT_TRUE(dir_word == "faster" || dir_word == "slower") << row.dump();
    const double factor = row.at("factor");
    EXPECT_GE(factor, 1.0) << row.dump();
    const double mem = row.at("memarea"), raw = row.at("raw");
    const double speedup = row.at("higher_is_better").get<bool>() ? mem / raw : raw / mem;
    EXPECT_NEAR(dir_word == "faster" ? speedup : 1 / speedup, factor, 1e-9) << row.dump();
    EXPECT_FALSE(row.at("raw_call").get<std::string>().empty()) << row.dump();
    if (row.at("group") == "copy fixed cost") {
      // Timed to the return (no entry clock on sim): the speed target, and the fixed cost and
      // the speed in the note, the speed agreeing with the medians.
      EXPECT_EQ(row.at("target"), ">= 0.98x the raw call") << row.dump();
      const std::string note = row.at("note");
      EXPECT_TRUE(note.starts_with("fixed cost ")) << row.dump();
      const auto speed_at = note.find(" ns, ");
      ASSERT_NE(speed_at, std::string::npos) << row.dump();
      EXPECT_NEAR(std::stod(note.substr(speed_at + 5)), raw / mem, 0.0006) << row.dump();
      EXPECT_EQ(row.at("met").get<bool>(), raw / mem >= 0.98) << row.dump();
    }
    if (std::string(row.at("group")).starts_with("peer copy")) {
      EXPECT_TRUE(row.at("note").get<std::string>().starts_with("path: ")) << row.dump();
    }
  }
  for (const char* g : {"area mmap+munmap", "copy fixed cost", "ipc import", "ipc export",
                        "managed prefetch", "pinned copy (reference)", "peer copy access on",
                        "peer copy access off", "pool round trip", "pool threads", "pool trace"})
    EXPECT_NE(std::find(groups.begin(), groups.end(), g), groups.end()) << g;
  // Stdout has the same rows in the same order, each printed as it finished under its group's
  // heading: both sides' median (min-max) with 3 significant figures in a fitting unit, the
  // direction in words (no bare ratio), and on sim "not judged" where a row has a target.
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line.find("ratio"), std::string::npos) << line;
  EXPECT_NE(line.find("memarea is"), std::string::npos) << line;
  EXPECT_NE(line.find("memarea (min-max)"), std::string::npos) << line;
  EXPECT_NE(line.find("raw (min-max)"), std::string::npos) << line;
  for (std::istringstream all(r.out); std::getline(all, line);) {
    std::size_t width = 0;  // characters, not bytes ("µs")
    for (unsigned char ch : line) width += (ch & 0xC0) != 0x80;
    EXPECT_LE(width, 160u) << line;
  }
  const std::string num = R"((\d{3}|\d{2}\.\d|\d\.\d{2}|0\.0*[1-9]\d{2}|\d{4,}))";
  const std::string fig = num + " (ns|µs|ms|s|GB/s|Mop/s) \\(" + num + "-" + num + "\\)";
  const std::regex figures(" " + fig + " +" + fig + " +" + num + "x (faster|slower)  (.*)$");
  std::size_t at = r.out.find('\n');
  for (const auto& row : j.at("rows")) {
    at = r.out.find("\n  " + row.at("variant").get<std::string>(), at);
    ASSERT_NE(at, std::string::npos) << row.dump() << "\n" << r.out;
    std::size_t end = r.out.find('\n', at + 1);
    line = r.out.substr(at + 1, end - at - 1);
    std::smatch m;
    if (!std::regex_search(line, m, figures)) {  // a long variant has its own line
      const std::size_t next = r.out.find('\n', end + 1);
      line = r.out.substr(end + 1, next - end - 1);
      end = next;
    }
    ASSERT_TRUE(std::regex_search(line, m, figures)) << line;
    const std::string target = row.at("target");
    EXPECT_EQ(m[m.size() - 1].str(),
              target.empty() || target == "reference" ? "-" : "not judged on sim")
        << line;
    EXPECT_FALSE(row.at("judged").get<bool>()) << row.dump();
    at = end;
  }
  EXPECT_NE(r.out.find("\ntargets: 0 met, 0 missed, "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("MISSED"), std::string::npos) << r.out;  // sim judges nothing
  // --list names every group that the run made, measuring nothing.
  const auto listed = run_bench({"--list"}, {"MEMAREA_BACKEND=none"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  for (const auto& g : groups) EXPECT_NE(listed.out.find(g), std::string::npos) << g;
}

TEST(CliBench, ListNamesCasesAndRowsWithoutADevice) {
  const auto r = run_bench({"--list", "--filter", "area"}, {"MEMAREA_BACKEND=none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "area\n  area mmap+munmap: device 256 B, 1 MiB, 64 MiB\n");
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// A copy whose bytes differ fails the run loudly. MEMAREA_BENCH_TEST_CORRUPT=1 (for this test
// only) flips one byte of what the check reads back.
TEST(CliBench, BytesThatDifferFailTheRun) {
  for (const char* c : {"peer", "copy", "managed", "ipc", "fill"}) {
    const auto r = run_bench({"--quick", "--reps", "2", "--filter", c},
                             {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2",
                              "MEMAREA_BENCH_TEST_CORRUPT=1"});
    EXPECT_EQ(r.exit_code, 1) << c << ": " << r.err << r.out;
    EXPECT_NE(r.out.find(std::string("FAILED ") + c), std::string::npos) << r.out;
    EXPECT_TRUE(r.out.find("differ") != std::string::npos ||
                r.out.find("wrong bytes") != std::string::npos)
        << r.out;
  }
}

TEST(CliBench, FilterRunsOnlyTheNamedCase) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r =
      run_bench({"--quick", "--reps", "2", "--filter", "area", "--json", json.string()},
                {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j.at("rows").size(), 3u);  // 256 B, 1 MiB, 64 MiB
  for (const auto& row : j.at("rows")) EXPECT_EQ(row.at("group"), "area mmap+munmap");
}

TEST(CliBench, FilterThatNamesNoCaseIsAnError) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_bench({"--filter", "no-such-case", "--json", json.string()},
                           {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no case matches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(cases: aml, area, "), std::string::npos) << r.err;  // the cases listed
  EXPECT_FALSE(fs::exists(json));
}

TEST(CliBench, UnwritableJsonIsRefusedBeforeMeasuring) {
  scratch_dir dir;
  const fs::path missing = dir.path() / "no-such-dir" / "bench.json";
  const auto r = run_bench({"--quick", "--reps", "1", "--json", missing.string()},
                           {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bench --json: cannot write " + missing.string()), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("bench: area"), std::string::npos) << "measured first: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliBench, RepetitionsOutOfRangeAreAUsageError) {
  for (const char* reps : {"0", "-1", "100001", "many"}) {
    const auto r = run_bench({"--reps", reps}, {"MEMAREA_BACKEND=sim"});
    EXPECT_NE(r.exit_code, 0) << reps;
    EXPECT_NE(r.err.find("--reps"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliBench, NoDevicesWritesNoResultFile) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_bench({"--quick", "--reps", "1", "--json", json.string()},
                           {"MEMAREA_BACKEND=none"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no device to measure"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(json));
}

}  // namespace

// --- ipc gc ----------------------------------------------------------------------------------------

namespace {

/// Makes /dev/shm/<name> as memarea makes its objects (docs/security.md): mode 0600, ending in a
/// 4096-byte stamp, "memarea object\n\0" then the name, NUL-padded.
void make_stamped(const std::string& name) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << name << ": " << std::strerror(errno);
  char stamp[16 + 96] = "memarea object\n";
  ASSERT_LT(name.size(), 96u);
  std::memcpy(stamp + 16, name.data(), name.size());
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  ASSERT_EQ(pwrite(fd, stamp, sizeof stamp, 0), static_cast<ssize_t>(sizeof stamp));
  ::close(fd);
}

}  // namespace

// What gc removes must be provably memarea's: a file of the user merely named like memarea's,
// and links named like its objects, stay (and no link is followed), even with no lease.
TEST(CliIpcGc, LeavesWhatMemareaDidNotMake) {
  char owner[17];
  std::snprintf(owner, sizeof owner, "%016llx",
                0x00aa000000000000ull | static_cast<unsigned long long>(getpid()));
  const std::string notes = std::string("memarea-notes-") + owner + "-user-data";
  const std::string object = std::string("memarea-sim-") + owner + "-0000000000000001";
  const std::string link = std::string("memarea-sim-") + owner + "-0000000000000002";
  {
    const int fd = ::open(("/dev/shm/" + notes).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "mine", 4), 4);
    ::close(fd);
  }
  make_stamped(object);
  ASSERT_EQ(symlink(("/dev/shm/" + notes).c_str(), ("/dev/shm/" + link).c_str()), 0);
  const auto gc = run_cli({"ipc", "gc"}, {"MEMAREA_BACKEND=sim"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_TRUE(fs::exists("/dev/shm/" + notes)) << "gc removed a user's file named like memarea's";
  EXPECT_TRUE(fs::is_symlink("/dev/shm/" + link)) << "gc removed a symlink";
  EXPECT_FALSE(fs::exists("/dev/shm/" + object)) << "gc left memarea's own object of a dead owner";
  ::unlink(("/dev/shm/" + notes).c_str());
  ::unlink(("/dev/shm/" + link).c_str());
  ::unlink(("/dev/shm/" + object).c_str());
}

TEST(CliIpcGc, RemovesWhatDeadProcessesLeftAndListsItOnADryRun) {
  // A dead owner's lease (no process holds its lock) and one of its objects.
  char owner[17];
  std::snprintf(owner, sizeof owner, "%016llx",
                0x0dead00000000000ull | static_cast<unsigned long long>(getpid()));
  const std::string lease = std::string("memarea-lease-") + owner;
  const std::string object = std::string("memarea-sim-") + owner + "-0000000000000001";
  for (const auto& name : {lease, object}) make_stamped(name);
  const auto dry = run_cli({"ipc", "gc", "--dry-run", "--json"}, {"MEMAREA_BACKEND=sim"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const auto j = nlohmann::json::parse(dry.out);
  EXPECT_EQ(j.at("dry_run"), true);
  const auto listed = j.at("would_remove").get<std::vector<std::string>>();
  // Other test processes sweep /dev/shm too. A sweep holds the lease's lock while it removes,
  // and removes the lease last: if we can take the lock and the lease is still there, no sweep
  // finished, so both must be there, and the dry run must have listed both.
  const int held = ::open(("/dev/shm/" + lease).c_str(), O_RDWR | O_CLOEXEC);
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (held >= 0 && fcntl(held, F_OFD_SETLK, &fl) == 0 && fs::exists("/dev/shm/" + lease)) {
    for (const auto& name : {lease, object}) {
      EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name;
      EXPECT_TRUE(fs::exists("/dev/shm/" + name)) << "a dry run removed " << name;
    }
  }
  if (held >= 0) ::close(held);
  const auto gc = run_cli({"ipc", "gc"}, {"MEMAREA_BACKEND=sim"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  // (Another process's background sweep may have removed them first: they are gone either way.)
  for (const auto& name : {lease, object}) EXPECT_FALSE(fs::exists("/dev/shm/" + name)) << name;
  EXPECT_NE(gc.out.find("object(s) of dead processes removed"), std::string::npos) << gc.out;
  EXPECT_NE(run_cli({"ipc"}, {"MEMAREA_BACKEND=sim"}).exit_code, 0) << "ipc needs a subcommand";
}
