// `memarea ps` run as a process: its JSON document's shape, the table it prints, a bad device
// refused, and leases whose usage table is malformed (written here, at the layout of
// src/base/lease_table.hpp, and held as a live owner holds its lease) listed under "skipped"
// with the reason, never followed; files of other names than memarea's beside a lease never
// reach the output; a lease's pid is shown as a process here only if that process holds the
// lease, and its uid and segments are its file's user's. tests/api/usage_process_test.cpp checks
// the figures and the sharing of real processes exactly.
#include "cli/cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace memarea::cli_test;

namespace {

/// The usage table's layout (src/base/lease_table.hpp): a 64-byte header, then 65 rows of 88.
constexpr std::size_t kHeader = 64, kRow = 88, kRows = 65;
constexpr std::size_t kLayout = kHeader + kRows * kRow;
constexpr std::uint64_t kMagic = 0x4547535541454d4dull;

template <class T>
void put(std::vector<unsigned char>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

/// A lease file named for owner, holding `table` with the stamp of its name in its last 4 KiB
/// (src/base/lease.cpp), locked as its owner locks it (byte 0) for as long as the returned
/// descriptor is open.
int live_lease(const std::string& owner, std::vector<unsigned char> table) {
  const std::string name = "memarea-lease-" + owner;
  const std::string path = "/dev/shm/" + name;
  constexpr char kStampMagic[16] = "memarea object\n";
  std::memcpy(table.data() + table.size() - 4096, kStampMagic, sizeof kStampMagic);
  std::memcpy(table.data() + table.size() - 4096 + 16, name.data(), name.size());
  // Made whole and locked under a name no sweep looks at, then renamed into place: a sweep of
  // another memarea process (ctest runs suites side by side) that found the lease stamped but
  // not yet locked would take its owner byte for a moment, and the lock below would fail.
  const std::string making = "/dev/shm/making-" + owner;
  const int fd = ::open(making.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  const bool made =
      pwrite(fd, table.data(), table.size(), 0) == static_cast<ssize_t>(table.size()) &&
      fcntl(fd, F_OFD_SETLK, &fl) == 0 && ::link(making.c_str(), path.c_str()) == 0;
  ::unlink(making.c_str());
  if (!made) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::vector<unsigned char> valid_table() {
  std::vector<unsigned char> b(12288, 0);
  put<std::uint64_t>(b, 0, kMagic);
  put<std::uint32_t>(b, 8, 1);                                  // version
  put<std::uint32_t>(b, 12, static_cast<std::uint32_t>(kLayout));  // its size
  put<std::int32_t>(b, 20, 4242);                               // pid
  put<std::uint32_t>(b, 32, static_cast<std::uint32_t>(geteuid()));  // uid, the file's
  put<std::uint32_t>(b, 36, 1);                                 // rows
  put<std::int32_t>(b, kHeader, 0);                             // row 0: device 0
  put<std::uint64_t>(b, kHeader + 8, 12345);                    // live
  std::memcpy(b.data() + 48, "planted", 7);
  return b;
}

/// "0bad" + this process's pid (8 hex digits) + tag (4): an owner no other test plants.
std::string planted_owner(const char* tag) {
  char prefix[9];
  std::snprintf(prefix, sizeof prefix, "%08x", static_cast<unsigned>(getpid()));
  return std::string("0bad") + prefix + tag;
}

/// Makes the file /dev/shm/<name> (mode 0600) of `bytes` zero bytes; false if it cannot.
bool plant_file(const std::string& name, std::size_t bytes) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST(CliPs, JsonListsProcessesAndTheTableHasItsColumns) {
  const auto j = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_TRUE(doc.at("processes").is_array());
  ASSERT_TRUE(doc.at("skipped").is_array());
  for (const auto& p : doc.at("processes")) {
    for (const char* key : {"owner", "pid", "pid_here", "uid", "command", "start_time_ns",
                            "devices", "exports", "imports"})
      EXPECT_TRUE(p.contains(key)) << key << " in " << p.dump();
  }
  const auto t = run_cli({"ps"}, {"MEMAREA_BACKEND=sim"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  for (const char* column : {"PID", "PID HERE", "COMMAND", "DEVICE", "LIVE", "CACHED",
                             "RESERVED", "EXPORTED", "IMPORTED"})
    EXPECT_NE(t.out.find(column), std::string::npos) << column << " in\n" << t.out;
  EXPECT_NE(run_cli({"ps", "--device", "-2"}, {"MEMAREA_BACKEND=sim"}).exit_code, 0);
}

TEST(CliPs, MalformedUsageTablesOfLiveLeasesAreSkippedWithTheReason) {
  struct planted {
    std::string owner, why;
    std::vector<unsigned char> table;
  };
  std::vector<planted> cases;
  auto add = [&](const char* tag, const char* why, auto edit) {
    auto t = valid_table();
    edit(t);
    cases.push_back({planted_owner(tag), why, t});
  };
  add("0001", "usage table of another version", [](auto& t) { put<std::uint32_t>(t, 8, 7); });
  add("0002", "usage table with too many rows", [](auto& t) { put<std::uint32_t>(t, 36, 1000); });
  add("0003", "usage table row of no device", [](auto& t) { put<std::int32_t>(t, kHeader, 999); });
  add("0004", "usage table of another size", [](auto& t) { put<std::uint32_t>(t, 12, 1 << 30); });
  add("0007", "usage table with two rows of one device", [](auto& t) {
    put<std::uint32_t>(t, 36, 2);
    put<std::int32_t>(t, kHeader + kRow, 0);  // row 1: device 0 again
  });
  add("0005", "", [](auto&) {});  // valid: listed as a process
  // Naming another user: listed as the file's user's.
  add("0006", "", [](auto& t) {
    put<std::uint32_t>(t, 32, static_cast<std::uint32_t>(geteuid()) + 1);
  });
  std::vector<int> fds;
  for (const auto& c : cases) {
    const int fd = live_lease(c.owner, c.table);
    ASSERT_GE(fd, 0) << c.owner << ": " << std::strerror(errno);
    fds.push_back(fd);
  }
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  for (int fd : fds) ::close(fd);
  for (const auto& c : cases) ::unlink(("/dev/shm/memarea-lease-" + c.owner).c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& c : cases) {
    bool skipped = false, listed = false;
    for (const auto& s : doc.at("skipped"))
      if (s.value("owner", "") == c.owner) {
        skipped = true;
        EXPECT_EQ(s.at("why"), c.why) << c.owner;
      }
    for (const auto& p : doc.at("processes"))
      if (p.at("owner") == c.owner) {
        listed = true;
        EXPECT_EQ(p.at("pid"), 4242);
        EXPECT_EQ(p.at("uid"), geteuid());
        EXPECT_EQ(p.at("command"), "planted");
        ASSERT_EQ(p.at("devices").size(), 1u);
        EXPECT_EQ(p.at("devices")[0].at("live"), 12345);
      }
    EXPECT_EQ(skipped, !c.why.empty()) << c.owner;
    EXPECT_EQ(listed, c.why.empty()) << c.owner;
  }
}

TEST(CliPs, FileNamesOfOtherBytesThanMemareasNeverReachTheOutput) {
  // A live owner, and files beside its lease named like its IPC segments: one as memarea names
  // them (a segment too short: skipped with the reason), and one whose tail is invalid UTF-8
  // and a terminal control sequence (not memarea's: neither read nor printed).
  const std::string owner = planted_owner("0010");
  const std::string named = "memarea-ipc-" + owner + "-00000000000000a1";
  const std::string foreign = "memarea-ipc-" + owner + "-\xff\x1b]0;owned\x07\x1b[2J";
  const int fd = live_lease(owner, valid_table());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const bool planted = plant_file(named, 16) && plant_file(foreign, 16);
  const auto j = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  const auto t = run_cli({"ps"}, {"MEMAREA_BACKEND=sim"});
  ::close(fd);
  for (const std::string& n : {"memarea-lease-" + owner, named, foreign})
    ::unlink(("/dev/shm/" + n).c_str());
  ASSERT_TRUE(planted) << std::strerror(errno);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  bool listed = false, named_skipped = false;
  for (const auto& p : doc.at("processes")) listed |= p.at("owner") == owner;
  for (const auto& s : doc.at("skipped")) {
    if (!s.contains("segment")) continue;
    const std::string seg = s.at("segment");
    EXPECT_EQ(seg.find('\x1b'), std::string::npos) << s.dump();
    if (seg == named) {
      named_skipped = true;
      EXPECT_EQ(s.at("why"), "segment shorter than its layout");
    }
  }
  EXPECT_TRUE(listed) << j.out;
  EXPECT_TRUE(named_skipped) << j.out;
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out.find('\x1b'), std::string::npos) << "a control character printed";
  EXPECT_EQ(t.out.find('\xff'), std::string::npos) << "a byte of no character printed";
}

TEST(CliPs, APidIsShownAsTheLeasesProcessOnlyIfThatProcessHoldsTheLease) {
  // Two live leases in this PID namespace: one naming this process, which holds it open, and
  // one naming pid 1, which does not (a lie, or a pid reused after its owner died).
  struct stat ns {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  const std::string honest = planted_owner("0020"), liar = planted_owner("0021");
  auto table = [&](std::int32_t pid) {
    auto t = valid_table();
    put<std::int32_t>(t, 20, pid);
    put<std::uint64_t>(t, 24, static_cast<std::uint64_t>(ns.st_ino));
    return t;
  };
  const int a = live_lease(honest, table(static_cast<std::int32_t>(getpid())));
  const int b = live_lease(liar, table(1));
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  for (int fd : {a, b})
    if (fd >= 0) ::close(fd);
  for (const std::string& o : {honest, liar}) ::unlink(("/dev/shm/memarea-lease-" + o).c_str());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int seen = 0;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& p : doc.at("processes")) {
    if (p.at("owner") == honest) {
      ++seen;
      EXPECT_EQ(p.at("pid"), getpid());
      EXPECT_EQ(p.at("pid_here"), getpid());
    } else if (p.at("owner") == liar) {
      ++seen;
      EXPECT_EQ(p.at("pid"), 1);  // what the lease says, shown as such
      EXPECT_TRUE(p.at("pid_here").is_null()) << p.dump();
    }
  }
  EXPECT_EQ(seen, 2) << r.out;
}

TEST(CliPs, ASegmentOfAnotherUserThanItsLeasesIsNotItsOwners) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to give a file to another user)";
  // root reads every user's leases: a segment named for an owner but of another user is that
  // other user's making, never counted as the owner's exports.
  const std::string owner = planted_owner("0030");
  const std::string seg = "memarea-ipc-" + owner + "-00000000000000b1";
  const int fd = live_lease(owner, valid_table());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const bool planted = plant_file(seg, 16) && chown(("/dev/shm/" + seg).c_str(), 4321, 4321) == 0;
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  ::close(fd);
  for (const std::string& n : {"memarea-lease-" + owner, seg}) ::unlink(("/dev/shm/" + n).c_str());
  ASSERT_TRUE(planted) << std::strerror(errno);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  bool skipped = false;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& s : doc.at("skipped"))
    if (s.value("segment", "") == seg) {
      skipped = true;
      EXPECT_EQ(s.at("why"), "not a file of its lease's user");
    }
  EXPECT_TRUE(skipped) << r.out;
}

TEST(CliPs, LeasesWhoseSweepByteStaysHeldAreWaitedForBoundedlyInAll) {
  // 40 live leases whose sweep byte is held too (as a sweep holds it, or anyone of the user
  // could): each is skipped with its liveness unknown, and ps waits for them as long as one
  // sweep waits for one lease (50 waits of 2 ms), not that long for each (4 s at least).
  std::vector<std::string> owners;
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    char tag[5];
    std::snprintf(tag, sizeof tag, "%04x", 0x40 + i);
    owners.push_back(planted_owner(tag));
    const int fd = live_lease(owners.back(), valid_table());
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 1;
    fl.l_len = 1;
    fds.push_back(fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) == 0 ? fd : -1);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  const auto took = std::chrono::steady_clock::now() - start;
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  for (const auto& o : owners) ::unlink(("/dev/shm/memarea-lease-" + o).c_str());
  for (int fd : fds) ASSERT_GE(fd, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, std::chrono::seconds(2));
  std::size_t unknown = 0;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& s : doc.at("skipped"))
    for (const auto& o : owners)
      if (s.value("owner", "") == o) {
        ++unknown;
        EXPECT_EQ(s.at("why"), "liveness unknown");
      }
  EXPECT_EQ(unknown, owners.size()) << r.out;
}

TEST(CliPs, ManyLeasesOfAProcessWithManyDescriptorsAreReadInBoundedTime) {
  // 200 live leases naming this process, which holds each of them open after 15,000 other
  // descriptors: ps reads this process's descriptors once, not once per lease (3,000,000
  // looks at least).
  rlimit lim {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < 16000) GTEST_SKIP() << "too few descriptors";
  const rlimit was = lim;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? 16000 : lim.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  std::vector<int> padding, fds;
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; null >= 0 && i < 15000; ++i) padding.push_back(fcntl(null, F_DUPFD_CLOEXEC, 0));
  struct stat ns {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  auto table = valid_table();
  put<std::int32_t>(table, 20, static_cast<std::int32_t>(getpid()));
  put<std::uint64_t>(table, 24, static_cast<std::uint64_t>(ns.st_ino));
  std::vector<std::string> owners;
  for (int i = 0; i < 200; ++i) {
    char tag[5];
    std::snprintf(tag, sizeof tag, "%04x", 0x100 + i);
    owners.push_back(planted_owner(tag));
    fds.push_back(live_lease(owners.back(), table));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  const auto took = std::chrono::steady_clock::now() - start;
  for (const auto* list : {&fds, &padding})
    for (int fd : *list)
      if (fd >= 0) ::close(fd);
  if (null >= 0) ::close(null);
  for (const auto& o : owners) ::unlink(("/dev/shm/memarea-lease-" + o).c_str());
  setrlimit(RLIMIT_NOFILE, &was);
  for (const auto* list : {&fds, &padding})
    for (int fd : *list) ASSERT_GE(fd, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, std::chrono::seconds(2));
  std::size_t shown = 0;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& p : doc.at("processes"))
    if (std::find(owners.begin(), owners.end(), p.at("owner")) != owners.end()) {
      ++shown;
      EXPECT_EQ(p.at("pid_here"), getpid());
    }
  EXPECT_EQ(shown, owners.size());
}

TEST(CliPs, AnotherNameOfALeaseIsNotAnotherProcess) {
  // A hard link to a live lease under another owner's name: the stamp names the first, so ps
  // lists the process once, under its own lease.
  const std::string owner = planted_owner("0050"), alias = planted_owner("0051");
  const std::string path = "/dev/shm/memarea-lease-" + owner;
  const std::string alias_path = "/dev/shm/memarea-lease-" + alias;
  const int fd = live_lease(owner, valid_table());
  const bool linked = fd >= 0 && ::link(path.c_str(), alias_path.c_str()) == 0;
  const auto r = run_cli({"ps", "--json"}, {"MEMAREA_BACKEND=sim"});
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  ::unlink(alias_path.c_str());
  ASSERT_TRUE(linked) << std::strerror(errno);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int as_owner = 0, as_alias = 0;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& p : doc.at("processes")) {
    as_owner += p.at("owner") == owner;
    as_alias += p.at("owner") == alias;
  }
  EXPECT_EQ(as_owner, 1) << r.out;
  EXPECT_EQ(as_alias, 0) << r.out;
}
