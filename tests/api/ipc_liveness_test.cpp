// Liveness of IPC's two sides through the public API (issue 14: exporters and importers
// dying): the survivors learn it from the background thread, and nothing is left once everyone
// is gone. Real processes; run against whichever backend is active. Leases, segments and the
// background thread's clock in hand: whitebox/ipc_liveness_test.cpp.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/ipc.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace memarea;
using namespace memarea::test;

// Issue 14: the exporter is SIGKILLed while three importers hold mappings. Each survivor learns
// it from the background thread (no call of theirs scans anything): a re-open is refused with
// INVALID_HANDLE, its own close still works, and once everyone is gone nothing is left.
TEST(IpcLiveness, ExporterKilledWhileThreeImportersHoldIt) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 70000;
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(n), str(seed)});
  const std::string h = exporter.line();
  const std::uint64_t exporter_owner = owner_from_hex(exporter.ask("owner"));
  // What the end checks is gone is there now: the exporter's lease and segment, and each
  // importer's lease (an owner of 0 would own nothing, and the checks would hold vacuously).
  ASSERT_NE(exporter_owner, 0u);
  ASSERT_EQ(objects_of(exporter_owner, "lease").size(), 1u);
  ASSERT_EQ(objects_of(exporter_owner, "ipc").size(), 1u);
  std::vector<std::unique_ptr<child>> importers;
  std::vector<std::uint64_t> importer_owners;
  for (int i = 0; i < 3; ++i) {
    importers.push_back(
        std::make_unique<child>(std::vector<std::string>{"hold", h, str(n), str(seed)}));
    ASSERT_EQ(importers.back()->line(), "opened");
    importer_owners.push_back(owner_from_hex(importers.back()->ask("owner")));
    ASSERT_NE(importer_owners.back(), 0u);
    ASSERT_NE(importer_owners.back(), exporter_owner);
    ASSERT_EQ(objects_of(importer_owners.back(), "lease").size(), 1u);
  }
  EXPECT_EQ(exporter.ask("importers"), "3");
  for (auto& i : importers) EXPECT_EQ(i->ask("reopen"), "reopened");
  exporter.kill_now();
  EXPECT_EQ(exporter.wait(), 128 + SIGKILL);
  for (auto& i : importers) {
    std::string said;
    EXPECT_TRUE(within(20, [&] { return (said = i->ask("reopen")) != "reopened"; }))
        << "still re-opens the dead exporter's memory";
    EXPECT_EQ(said, "MEMAREA_ERROR_INVALID_HANDLE");
    if (backend_name() == "sim") {
      EXPECT_EQ(i->ask("check " + str(seed)), "ok");
    }
    EXPECT_EQ(i->ask("close"), "closed");
  }
  // This process too, at once when it asks (collect tests the lease now).
  ipc::collect();
  EXPECT_MEMAREA_ERROR((void)ipc::open(ipc::handle::from_hex(h)), errc::invalid_handle);
  for (auto& i : importers) {
    i->close_stdin();
    EXPECT_EQ(i->wait(), 0);
  }
  (void)ipc::remove_stale_objects();
  EXPECT_TRUE(objects_of(exporter_owner).empty());
  for (std::uint64_t o : importer_owners) EXPECT_TRUE(objects_of(o).empty());
}

// Issue 14: an importer is SIGKILLed while the exporter's free waits for it. The exporter makes
// no call at all: its background thread finds the importer gone and finishes the free.
TEST(IpcLiveness, ImporterKilledWhileTheFreeWaits) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const area a(0);
  const std::size_t n = 8192;
  void* p = a.mmap(n);
  const std::uint64_t seed = new_seed();
  fill(p, seed, n);
  child holder({"hold", hex(ipc::export_handle(p)), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  const std::uint64_t holder_owner = owner_from_hex(holder.ask("owner"));
  // The importer's lease is there (the end checks that nothing of it is left).
  ASSERT_NE(holder_owner, 0u);
  ASSERT_EQ(objects_of(holder_owner, "lease").size(), 1u);
  ipc::collect();
  const std::size_t before = ipc::deferred_frees();
  a.munmap(p, n);
  EXPECT_EQ(ipc::deferred_frees(), before + 1);
  holder.kill_now();
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  EXPECT_TRUE(within(20, [&] { return ipc::deferred_frees() == before; }))
      << "the free still waits for a dead importer";
  (void)ipc::remove_stale_objects();
  EXPECT_TRUE(objects_of(holder_owner).empty());
}

// ipc::owner_id() and memarea_ipc_owner_id() name this process's objects in /dev/shm (what a
// program checks after a job, as tests/mpi's harness does): 0 in a child of fork() until it
// makes a shared object, then an id of its own, never the parent's.
TEST(IpcLiveness, OwnerIdNamesThisProcessesObjects) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer b = area(0).allocate(4096);
  (void)ipc::export_handle(b.data());  // makes the lease and the segment
  const std::uint64_t id = ipc::owner_id();
  ASSERT_NE(id, 0u);
  EXPECT_EQ(objects_of(id, "lease").size(), 1u);
  EXPECT_EQ(objects_of(id, "ipc").size(), 1u);
  unsigned long long c = 0;
  EXPECT_STATUS(memarea_ipc_owner_id(&c), MEMAREA_SUCCESS);
  EXPECT_EQ(c, id);
  EXPECT_STATUS(memarea_ipc_owner_id(nullptr), MEMAREA_ERROR_INVALID_VALUE);

  // Sim alone survives fork() without exec; TSan cannot start threads in such a child.
  bool child_exports = backend_name() == "sim";
#ifdef __SANITIZE_THREAD__
  child_exports = false;
#endif
  int ids[2];  // the child's id, for the parent to check and to remove what the child left
  ASSERT_EQ(pipe(ids), 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(300);  // a stuck child dies instead of hanging the suite
    ::close(ids[0]);
    int rc = 0;
    unsigned long long before = 1;
    if (ipc::owner_id() != 0) rc = 2;
    if (rc == 0 && (memarea_ipc_owner_id(&before) != MEMAREA_SUCCESS || before != 0)) rc = 3;
    if (rc == 0 && child_exports) {
      try {
        buffer mine = area(0).allocate(4096);
        (void)ipc::export_handle(mine.data());
        const std::uint64_t own = ipc::owner_id();
        // Alive, its objects cannot be swept: its lease and segment are there under its id.
        if (objects_of(own, "lease").size() != 1 || objects_of(own, "ipc").size() != 1) rc = 4;
        if (!write_all(ids[1], &own, sizeof own)) rc = 5;
      } catch (...) {
        rc = 6;
      }
    }
    _exit(rc);
  }
  ::close(ids[1]);
  std::uint64_t child = 0;
  const bool got = read_within(ids[0], &child, sizeof child, kForkWait);
  ::close(ids[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2, 3: the parent's id in the child; 4: its objects not under its id; 5: its id not "
         "sent; 6: it threw";
  EXPECT_EQ(ipc::owner_id(), id);  // the parent's is unchanged
  if (child_exports && got) {
    // An id of its own. What it left by _exit is removed here, by name: a sweep would take
    // the dead owners of other test processes from under their tests.
    EXPECT_NE(child, 0u);
    EXPECT_NE(child, id);
    for (const std::string& name : objects_of(child)) shm_unlink(("/" + name).c_str());
    EXPECT_TRUE(objects_of(child).empty());
  } else {
    EXPECT_FALSE(child_exports) << "the child sent no id";
  }
}
