// `memarea topo` run as a real process on the sim backend: its JSON, text and SVG follow the
// peer groups, progress goes to a terminal only, the raw baseline, one device, and bad input or
// a failed measurement refused before any output file is touched. In a memarea built without the
// measurement (MEMAREA_WITH_TOPO=OFF), each run that would measure is its refusal instead
// (cli_util.hpp's topo_refused_as_compiled_out), and no output file is written.
#include "cli/cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace memarea::cli_test;

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
  if (topo_refused_as_compiled_out(r)) return;
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
  // One window for every pair: each pair's bytes over it; each device's egress and ingress are
  // its row's and column's sums, with a verdict (sim: no nominal capacity to judge against).
  const auto& ap = j.at("all_pairs");
  const double window_ms = ap.at("window_ms").get<double>();
  EXPECT_GT(window_ms, 0.0);
  EXPECT_TRUE(ap.at("gate").at("held").get<bool>()) << ap.at("gate").dump();
  EXPECT_GE(ap.at("gate").at("bytes").get<std::size_t>(), std::size_t{8} << 20);
  const double pair_gbps = 256.0 * 1024 * 2 / (window_ms / 1e3) / 1e9;
  double lane_max = 0;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      EXPECT_NEAR(j["all_pairs_at_once_gbps"][a][b].get<double>(), pair_gbps, pair_gbps * 1e-6);
      const double lane = ap.at("lane_ms")[a][b].get<double>();
      EXPECT_GT(lane, 0.0);
      EXPECT_LE(lane, window_ms);
      lane_max = std::max(lane_max, lane);
    }
  EXPECT_DOUBLE_EQ(lane_max, window_ms);
  ASSERT_EQ(ap.at("devices").size(), 4u);
  for (int d = 0; d < 4; ++d) {
    const auto& dev = ap["devices"][d];
    EXPECT_EQ(dev.at("device"), d);
    EXPECT_NEAR(dev.at("egress_gbps").get<double>(), 3 * pair_gbps, 3 * pair_gbps * 1e-6);
    EXPECT_NEAR(dev.at("ingress_gbps").get<double>(), 3 * pair_gbps, 3 * pair_gbps * 1e-6);
    EXPECT_TRUE(dev.at("capacity_gbps").is_null());
    EXPECT_EQ(dev.at("egress_verdict").get<std::string>().rfind("no nominal capacity", 0), 0u);
  }
  EXPECT_TRUE(j.at("peer_capacity_gbps")[0].is_null());
}

TEST(CliTopo, TextPrintsEveryMatrix) {
  const auto r = run_cli({"topo", "--size", "64K", "--reps", "1"}, k_sim4_groups);
  if (topo_refused_as_compiled_out(r)) return;
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
  if (topo_refused_as_compiled_out(outcome{status, slurp(out), tty})) return;
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
  if (topo_refused_as_compiled_out(r)) {
    EXPECT_FALSE(fs::exists(svg));
    return;
  }
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
  if (topo_refused_as_compiled_out(r)) return;
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
  EXPECT_NE(r.err.find("fewer than 2 devices"), std::string::npos) << r.err;
  if (topo_refused_as_compiled_out(r)) {
    EXPECT_FALSE(fs::exists(svg));
    return;
  }
  EXPECT_EQ(r.exit_code, 0) << r.err;
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
    if (topo_refused_as_compiled_out(r)) continue;  // it fails before any copy
    EXPECT_NE(r.exit_code, 0);
    // The driver's error is named once, with memarea's status once.
    EXPECT_EQ(count_of(r.err, "SIM_ERROR_OUT_OF_MEMORY"), 1u) << r.err;
    EXPECT_EQ(count_of(r.err, "MEMAREA_ERROR_OUT_OF_MEMORY"), 1u) << r.err;
    EXPECT_NE(r.err.find("[MEMAREA_ERROR_OUT_OF_MEMORY]"), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(keep), "previous contents");
  EXPECT_FALSE(fs::exists(fresh));
}

}  // namespace
