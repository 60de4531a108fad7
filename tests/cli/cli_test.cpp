// The `memarea` command-line tool run as a real process on the sim backend: what `info` prints
// (text and JSON), how the tool refuses bad input and unknown commands, its version, and what
// `ipc gc` removes from /dev/shm and what it must leave. `topo`: cli_topo_test.cpp;
// memarea-bench: cli_bench_test.cpp.
#include "cli/cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace memarea::cli_test;

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
  // (Built without the topology measurement: the command is refused, saying why.)
  const auto tried = run_cli({"topo", "--size", "64K", "--reps", "1"},
                             {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=4"});
  if (!topo_refused_as_compiled_out(tried)) {
    EXPECT_EQ(tried.exit_code, 0) << tried.err;
  }
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
  EXPECT_NE(r.err.find("(commands: info, topo, ps, snapshot, ipc;"), std::string::npos) << r.err;
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

}  // namespace

namespace {

// `memarea snapshot --from FILE` reads anyone's text: a file that is not JSON, or JSON of
// another shape, is refused with a message that says so and names the file; nothing is drawn.
TEST(CliSnapshot, FromAFileThatIsNoSnapshotIsRefusedSayingSo) {
  const fs::path dir = fs::temp_directory_path() / ("memarea-cli-snap-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto write = [&](const char* name, const char* text) {
    const fs::path p = dir / name;
    FILE* f = std::fopen(p.c_str(), "w");
    EXPECT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
    return p.string();
  };
  const std::string not_json = write("a.json", "not json");
  const std::string wrong_type = write("b.json", R"({"devices":[{"device":"x","blocks":5}]})");
  const std::string wrong_fields = write(
      "c.json", R"({"devices":[{"device":0,"blocks":[{"address":"zz","size":-5}]}]})");
  const fs::path svg = dir / "out.svg";
  const auto a = run_cli({"snapshot", "--from", not_json}, {"MEMAREA_BACKEND=sim"});
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(a.err.find(not_json + " is not JSON"), std::string::npos) << a.err;
  for (const auto& f : {wrong_type, wrong_fields}) {
    const auto r = run_cli({"snapshot", "--from", f, "--svg", svg.string()},
                           {"MEMAREA_BACKEND=sim"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(f + " is not a memarea snapshot"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(svg));
  }
  const auto colour = run_cli({"snapshot", "--color", "blue"}, {"MEMAREA_BACKEND=sim"});
  EXPECT_NE(colour.exit_code, 0);
  EXPECT_NE(colour.err.find("--color is kind or age"), std::string::npos) << colour.err;
  // And the library's own snapshot, saved and read back, is one.
  const auto saved = run_cli({"snapshot", "--json"},
                             {"MEMAREA_BACKEND=sim", "MEMAREA_SIM_DEVICES=2"});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  const std::string good = write("d.json", saved.out.c_str());
  const auto back = run_cli({"snapshot", "--from", good}, {"MEMAREA_BACKEND=sim"});
  EXPECT_EQ(back.exit_code, 0) << back.err;
  EXPECT_NE(back.out.find("device 1:"), std::string::npos) << back.out;
  fs::remove_all(dir);
}

}  // namespace
