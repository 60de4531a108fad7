// memarea-bench run as a real process on the sim backend: a quick run measures every case side
// by side with the raw driver, listing, filters, bytes that differ fail the run, and bad input
// refused before anything is measured or written.
#include "cli/cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace memarea::cli_test;

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

// On 4 devices (groups {0,1}, {2,3}) the peer case adds every other ordered pair at one size:
// one direction for each, both at once for a < b, access on within a group and off across;
// the 0->1 rows keep their names and sizes.
TEST(CliBench, PeerMeasuresEveryOrderedPairOnFourDevices) {
  scratch_dir dir;
  const fs::path json = dir.path() / "bench.json";
  const auto r = run_bench({"--quick", "--reps", "2", "--filter", "peer", "--json", json.string()},
                           k_sim4_groups);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(slurp(json));
  std::vector<std::string> on, off;
  for (const auto& row : j.at("rows"))
    (row.at("group") == "peer copy access on" ? on : off).push_back(row.at("variant"));
  auto has = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  for (const char* n : {"0->1 4 KiB", "0<->1 4 KiB", "0->1 16 MiB", "0<->1 16 MiB"}) {
    EXPECT_TRUE(has(on, n)) << n;
    EXPECT_TRUE(has(off, n)) << n;
  }
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      if (a == b || (a == 0 && b == 1)) continue;
      const bool group = a / 2 == b / 2;
      const std::string one = std::to_string(a) + "->" + std::to_string(b) + " 16 MiB";
      const std::string both = std::to_string(a) + "<->" + std::to_string(b) + " 16 MiB";
      EXPECT_TRUE(has(group ? on : off, one)) << one;
      EXPECT_FALSE(has(group ? off : on, one)) << one;
      EXPECT_EQ(has(group ? on : off, both), a < b) << both;
      EXPECT_FALSE(has(on, std::to_string(a) + "->" + std::to_string(b) + " 4 KiB"));
    }
  // 0->1 at 4 sizes both ways and both access states (16 rows); 11 more pairs one way, 5 both.
  EXPECT_EQ(on.size() + off.size(), 16u + 11u + 5u);
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
