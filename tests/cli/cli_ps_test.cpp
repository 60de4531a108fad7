// `memarea ps` run as a process: its JSON document's shape, the table it prints, a bad device
// refused, and leases whose usage table is malformed (written here, at the layout of
// src/base/lease_table.hpp, and held as a live owner holds its lease) listed under "skipped"
// with the reason, never followed. tests/api/usage_process_test.cpp checks the figures and the
// sharing of real processes exactly.
#include "cli/cli_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

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

/// A lease file named for owner, holding `table`, locked as its owner locks it (byte 0) for as
/// long as the returned descriptor is open.
int live_lease(const std::string& owner, const std::vector<unsigned char>& table) {
  const std::string path = "/dev/shm/memarea-lease-" + owner;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (pwrite(fd, table.data(), table.size(), 0) != static_cast<ssize_t>(table.size())) return -1;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) return -1;
  return fd;
}

std::vector<unsigned char> valid_table() {
  std::vector<unsigned char> b(12288, 0);
  put<std::uint64_t>(b, 0, kMagic);
  put<std::uint32_t>(b, 8, 1);                                  // version
  put<std::uint32_t>(b, 12, static_cast<std::uint32_t>(kLayout));  // its size
  put<std::int32_t>(b, 20, 4242);                               // pid
  put<std::uint32_t>(b, 36, 1);                                 // rows
  put<std::int32_t>(b, kHeader, 0);                             // row 0: device 0
  put<std::uint64_t>(b, kHeader + 8, 12345);                    // live
  std::memcpy(b.data() + 48, "planted", 7);
  return b;
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
  char prefix[9];
  std::snprintf(prefix, sizeof prefix, "%08x", static_cast<unsigned>(getpid()));
  struct planted {
    std::string owner, why;
    std::vector<unsigned char> table;
  };
  std::vector<planted> cases;
  auto add = [&](const char* tag, const char* why, auto edit) {
    auto t = valid_table();
    edit(t);
    cases.push_back({std::string("0bad") + prefix + tag, why, t});
  };
  add("0001", "usage table of another version", [](auto& t) { put<std::uint32_t>(t, 8, 7); });
  add("0002", "usage table with too many rows", [](auto& t) { put<std::uint32_t>(t, 36, 1000); });
  add("0003", "usage table row of no device", [](auto& t) { put<std::int32_t>(t, kHeader, 999); });
  add("0004", "usage table of another size", [](auto& t) { put<std::uint32_t>(t, 12, 1 << 30); });
  add("0005", "", [](auto&) {});  // valid: listed as a process
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
        EXPECT_EQ(p.at("command"), "planted");
        ASSERT_EQ(p.at("devices").size(), 1u);
        EXPECT_EQ(p.at("devices")[0].at("live"), 12345);
      }
    EXPECT_EQ(skipped, !c.why.empty()) << c.owner;
    EXPECT_EQ(listed, c.why.empty()) << c.owner;
  }
}
