// What memarea prepares for IPC before the first export: its first device allocation runs the
// hook the memory room publishes (memory_events::first_device_allocation, which IPC arms when
// memarea loads and again in a child of fork()), and IPC makes the process's lease and segment
// in the background, with no IPC call. Seen from the helper process (tests/helper, "prepare"),
// which reads the hook and its lease, and in /dev/shm, where the segment appears.
#include "whitebox/whitebox.hpp"

#include <memarea/ipc.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

using namespace memarea;
using namespace memarea::test;

namespace {

/// A state line of the helper's "prepare" ("armed=A owner=O", after `prefix`).
struct prepare_state {
  int armed = -1;
  std::uint64_t owner = 0;
};

prepare_state parse_state(const std::string& line, const std::string& prefix = "") {
  prepare_state s;
  unsigned long long owner = 0;
  if (line.rfind(prefix, 0) != 0 ||
      std::sscanf(line.c_str() + prefix.size(), "armed=%d owner=%llx", &s.armed, &owner) != 2)
    ADD_FAILURE() << "not a state line: " << line;
  s.owner = owner;
  return s;
}

}  // namespace

// A fresh process: the hook is armed and there is no lease; a pinned host allocation leaves it
// so (only device memory is shared by legacy IPC); the first device allocation disarms it, and
// the lease and the IPC segment appear without an IPC call. Its child of fork(), whose parent
// had prepared, finds the hook armed again and no lease, and its first device allocation makes
// its own lease and segment; the parent's stay as they were.
TEST(IpcPrepare, TheFirstDeviceAllocationPreparesInAProcessAndInAForkChild) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  child helper({"prepare"});
  prepare_state s = parse_state(helper.ask("state"));
  EXPECT_EQ(s.armed, 1) << "memarea loaded without arming the hook";
  EXPECT_EQ(s.owner, 0u) << "a lease before any allocation";
  s = parse_state(helper.ask("host"));
  EXPECT_EQ(s.armed, 1) << "pinned host memory ran the first device allocation's hook";
  s = parse_state(helper.ask("device"));
  EXPECT_EQ(s.armed, 0) << "the first device allocation left the hook armed";
  ASSERT_TRUE(within(20, [&] { return (s = parse_state(helper.ask("state"))).owner != 0; }))
      << "no lease made after the first device allocation";
  const std::uint64_t parent = s.owner;
  EXPECT_TRUE(within(20, [&] { return objects_of(parent, "ipc").size() == 1; }))
      << "no IPC segment made after the first device allocation";
  EXPECT_EQ(objects_of(parent, "lease").size(), 1u);
  s = parse_state(helper.ask("device"));
  EXPECT_EQ(s.armed, 0);
  EXPECT_EQ(s.owner, parent);

  if (backend_name() != "sim") GTEST_SKIP() << "a child of fork() may not use CUDA or HIP";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  MEMAREA_SKIP_UNLESS_ASAN_IS_FORK_SAFE();
  s = parse_state(helper.ask("fork"), "child ");
  EXPECT_EQ(s.armed, 1) << "a child of fork() did not arm the hook again";
  EXPECT_EQ(s.owner, 0u) << "a child of fork() kept its parent's lease";
  s = parse_state(helper.line(), "child ");
  EXPECT_EQ(s.armed, 0) << "the child's first device allocation left the hook armed";
  unsigned long long read_owner = 0;
  const std::string owner_line = helper.line();
  ASSERT_EQ(std::sscanf(owner_line.c_str(), "child owner=%llx", &read_owner), 1) << owner_line;
  const std::uint64_t kid = read_owner;
  ASSERT_NE(kid, 0u);
  EXPECT_NE(kid, parent);
  EXPECT_TRUE(within(20, [&] { return objects_of(kid, "ipc").size() == 1; }))
      << "no IPC segment of the child's own after its first device allocation";
  EXPECT_EQ(objects_of(kid, "lease").size(), 1u);
  EXPECT_EQ(objects_of(parent, "ipc").size(), 1u) << "the parent's segment went";
  EXPECT_EQ(helper.ask("end"), "ended 0");
  // The child left by _exit: the sweep removes what it made, and only that.
  (void)ipc::remove_stale_objects();
  EXPECT_TRUE(objects_of(kid).empty());
  EXPECT_EQ(objects_of(parent, "ipc").size(), 1u);
  helper.close_stdin();
  EXPECT_EQ(helper.wait(), 0);
  (void)ipc::remove_stale_objects();
  EXPECT_TRUE(objects_of(parent).empty()) << "the helper left objects behind";
}
