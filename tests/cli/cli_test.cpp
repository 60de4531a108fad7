// The `memarea` command-line tool, run as a real process on the sim backend: what `info`,
// `topo` and `bench` print (text, JSON, SVG) and how they refuse bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
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

/// Runs `memarea args...` with every MEMAREA_* variable of this process removed and `env`
/// ("NAME=value") set; stdout and stderr are kept apart.
outcome run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  scratch_dir io;
  const fs::path out = io.path() / "out", err = io.path() / "err";
  const pid_t pid = ::fork();
  if (pid < 0) return {};
  if (pid == 0) {
    for (char** e = environ; e && *e;) {
      std::string kv = *e;
      if (kv.rfind("MEMAREA_", 0) == 0) {
        ::unsetenv(kv.substr(0, kv.find('=')).c_str());  // environ shifts: look at *e again
      } else {
        ++e;
      }
    }
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int r = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || r < 0 || ::dup2(o, 1) < 0 || ::dup2(r, 2) < 0) ::_exit(126);
    std::vector<char*> argv{const_cast<char*>(MEMAREA_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(MEMAREA_CLI, argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  outcome r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
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
  // Progress is for terminals only: a pipe gets none of its carriage returns.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
}

TEST(CliTopo, ProgressShowsOnATerminalAndIsClearedAtTheEnd) {
  // stderr on a pseudo-terminal, stdout to a file (as `memarea topo > matrix.txt` run by a
  // person): progress goes to the terminal and none of it to the file.
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0) << std::strerror(errno);
  scratch_dir dir;
  const fs::path out = dir.path() / "out";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(master);
    for (const auto& kv : k_sim4_groups) ::putenv(const_cast<char*>(kv.c_str()));
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || ::dup2(o, 1) < 0 || ::dup2(slave, 2) < 0) ::_exit(126);
    ::execl(MEMAREA_CLI, MEMAREA_CLI, "topo", "--size", "64K", "--reps", "1", nullptr);
    ::_exit(127);
  }
  ::close(slave);
  std::string tty;
  char buf[4096];
  for (;;) {  // read while it runs: a full terminal buffer would stop it
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      const ssize_t got = ::read(master, buf, sizeof buf);
      if (got <= 0) break;  // EIO once the child has gone and the slave is closed
      tty.append(buf, static_cast<std::size_t>(got));
    }
  }
  ::close(master);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << tty;
  EXPECT_NE(tty.find("\rtopo: measuring 0 -> 1"), std::string::npos) << tty;
  EXPECT_NE(tty.find("\rtopo: measuring 3 -> 2"), std::string::npos) << tty;
  EXPECT_NE(tty.find("measuring all pairs at once"), std::string::npos) << tty;
  // The last thing on the terminal clears the progress line.
  EXPECT_EQ(tty.substr(tty.size() - 4), "\r\x1b[K") << tty;
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
  EXPECT_EQ(s.substr(s.size() - 7), "</svg>\n");
  for (const char* title : {"Unidirectional bandwidth", "Bidirectional bandwidth",
                            "4 KiB copy latency", "All pairs at once"})
    EXPECT_EQ(count_of(s, title), 1u) << title;
  // Four panels of 4 x 4 cells; each cell outlined in white.
  EXPECT_EQ(count_of(s, "stroke=\"#ffffff\"/>"), 4u * 16u);
  // Every element is closed: as many <text ...> as </text>.
  EXPECT_EQ(count_of(s, "<text "), count_of(s, "</text>"));
  // The diagonal says "-"; the 12 measured cells of each panel carry a number.
  const std::regex number_cell(R"(text-anchor="middle" fill="#[0-9a-f]{6}">[0-9]+\.[0-9]</text>)");
  const auto numbers =
      std::distance(std::sregex_iterator(s.begin(), s.end(), number_cell), std::sregex_iterator());
  EXPECT_EQ(numbers, 4 * 12);
}

TEST(CliTopo, OneDeviceHasNothingToMeasureButSaysSo) {
  const auto r = run_cli({"topo"}, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fewer than 2 devices"), std::string::npos) << r.err;
  const auto j = run_cli({"topo", "--json"}, {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at("devices").size(), 1u);
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
      {{"topo", "--svg", (dir.path() / "no-such-dir" / "t.svg").string()}, "cannot write"},
      {{"topo", "--svg", dir.path().string()}, "is a directory"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args, k_sim4_groups);
    EXPECT_NE(r.exit_code, 0) << c.args[1];
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << " not in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;  // refused before measuring anything
    EXPECT_EQ(slurp(keep), "previous contents");
  }
  EXPECT_FALSE(fs::exists(dir.path() / "no-such-dir"));
}

// --- bench -------------------------------------------------------------------------------------

TEST(CliBench, QuickRunMeasuresEveryCaseSideBySide) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_cli({"bench", "--quick", "--reps", "2", "--json", json.string()},
                         {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("backend"), "sim");
  EXPECT_EQ(j.at("devices"), 2);
  EXPECT_TRUE(j.at("failed").empty()) << j.at("failed").dump();
  std::vector<std::string> groups;
  for (const auto& row : j.at("rows")) {
    groups.push_back(row.at("group"));
    EXPECT_GT(row.at("memarea").get<double>(), 0.0) << row.dump();
    EXPECT_GT(row.at("raw").get<double>(), 0.0) << row.dump();
    EXPECT_NEAR(row.at("ratio").get<double>(),
                row.at("memarea").get<double>() / row.at("raw").get<double>(), 1e-9);
    EXPECT_FALSE(row.at("raw_call").get<std::string>().empty()) << row.dump();
  }
  for (const char* g : {"area mmap+munmap", "ipc import", "ipc export", "managed prefetch",
                        "peer copy access on", "peer copy access off"})
    EXPECT_NE(std::find(groups.begin(), groups.end(), g), groups.end()) << g;
  // The table on stdout has the same rows.
  EXPECT_EQ(count_of(r.out, "\n"), j.at("rows").size() + 1) << r.out;
}

TEST(CliBench, FilterRunsOnlyTheNamedCase) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r =
      run_cli({"bench", "--quick", "--reps", "2", "--filter", "area", "--json", json.string()},
              {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j.at("rows").size(), 3u);  // 256 B, 1 MiB, 64 MiB
  for (const auto& row : j.at("rows")) EXPECT_EQ(row.at("group"), "area mmap+munmap");
}

TEST(CliBench, FilterThatNamesNoCaseIsAnError) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_cli({"bench", "--filter", "no-such-case", "--json", json.string()},
                         {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no case matches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("area"), std::string::npos) << r.err;  // the cases are listed
  EXPECT_FALSE(fs::exists(json));
}

TEST(CliBench, RepetitionsOutOfRangeAreAUsageError) {
  for (const char* reps : {"0", "-1", "100001", "many"}) {
    const auto r = run_cli({"bench", "--reps", reps}, {"MEMAREA_BACKEND=sim"});
    EXPECT_NE(r.exit_code, 0) << reps;
    EXPECT_NE(r.err.find("--reps"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliBench, NoDevicesGivesNoRowsAndNoFailure) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_cli({"bench", "--quick", "--reps", "1", "--json", json.string()},
                         {"MEMAREA_BACKEND=none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("devices"), 0);
  EXPECT_TRUE(j.at("failed").empty()) << j.at("failed").dump();
}

}  // namespace
