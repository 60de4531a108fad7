// Liveness of IPC's two sides through the public API (issue 14: exporters and importers
// dying): the survivors learn it from the background thread, and nothing is left once everyone
// is gone. Real processes; run against whichever backend is active. Leases, segments and the
// background thread's clock in hand: whitebox/ipc_liveness_test.cpp.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/ipc.hpp>

#include <signal.h>

#include <cstdint>
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
