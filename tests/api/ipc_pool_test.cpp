// IPC of pool memory (issue 13, part 4): a handle of a pooled pointer names its sub-allocation;
// an importer opens each pool block once for all of its sub-allocations; a sub-allocation freed
// while another process has it open is held back from reuse until that process closes it.
// Real processes (tests/helper), run against whichever backend is active. What the handle's
// fields and the registry show is whitebox/ipc_pool_test.cpp's.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/area.hpp>
#include <memarea/ipc.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <string>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

/// A device pool whose first block (4 MiB) holds every piece these tests take.
pool one_block_pool() {
  pool_options o;
  o.initial_size = std::size_t{4} << 20;
  return pool(area(0), o);
}

}  // namespace

// A block's mapping is reused for its next piece while a piece of it is live, the piece being
// opened included where equal driver bytes name one allocation (CUDA, sim); on HIP, when only
// closed pieces that were freed hold it, the block may be gone, and the importer opens anew.
TEST(IpcPool, AMappingIsReusedOnlyWhileAPieceVouchesForItsBlock) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p = one_block_pool();
  const std::size_t n = 4096;
  void* a = p.allocate(n);
  void* b = p.allocate(n);
  const std::string ha = hex(ipc::export_handle(a)), hb = hex(ipc::export_handle(b));
  child imp({"importer"});
  EXPECT_EQ(imp.ask("open " + ha), "ok opens=1");
  EXPECT_EQ(imp.ask("close-all"), "closed");  // a stays cached, still live
  EXPECT_EQ(imp.ask("open " + hb), "ok opens=1") << "a, live, vouches for the block";
  EXPECT_EQ(imp.ask("close-all"), "closed");
  p.deallocate(a);
  p.deallocate(b);  // both cached in the importer, both freed
  // Rounds of one piece each: exported, opened, closed, freed; each round's open finds only
  // freed pieces holding the block's mapping, unless the importer's background sweep (about
  // every 50 ms) has closed it already. On HIP every round opens the block anew; elsewhere
  // the piece being opened vouches, so only rounds after such a sweep open it.
  constexpr int kRounds = 20;
  std::string last;
  for (int k = 0; k < kRounds; ++k) {
    void* c = p.allocate(n);
    last = imp.ask("open " + hex(ipc::export_handle(c)));
    EXPECT_EQ(imp.ask("close-all"), "closed");
    p.deallocate(c);
  }
  ASSERT_EQ(last.rfind("ok opens=", 0), 0u) << last;
  const int opens = std::stoi(last.substr(9)) - 1;  // in the rounds, after a and b's one
  if (backend_name() == "hip")
    EXPECT_EQ(opens, kRounds) << "no live piece but the new one: the block is opened anew";
  else
    EXPECT_LE(opens, kRounds / 2) << "each new piece, live, with the block's bytes vouches";
  EXPECT_EQ(imp.ask("open " + ha), "MEMAREA_ERROR_INVALID_HANDLE");
  EXPECT_EQ(imp.ask("close-all"), "closed");
  imp.close_stdin();
  EXPECT_EQ(imp.wait(), 0);
}

// lookup of imported memory, in a real other process whose current device is 0: the buffer
// the exporter shared (a 1 KiB piece, not its 2 MiB+ block) on the device it lives on (1). A
// piece of 1000 bytes is shared as 1000 bytes, not its rounded capacity: the importer can reach
// no byte the allocation did not ask for.
TEST(IpcPool, LookupOfImportedMemoryGivesTheExportedBufferAndTheExportersDevice) {
  MEMAREA_REQUIRE_DEVICES(2);
  REQUIRE_HELPER();
  pool_options o;
  o.initial_size = std::size_t{4} << 20;
  pool p(area(1), o);
  void* before = p.allocate(1024);
  void* x = p.allocate(1024);
  void* after = p.allocate(1024);
  const area a(1);
  const std::size_t n = 5000;
  void* plain = a.mmap(n);
  child imp({"importer"});
  EXPECT_EQ(imp.ask("open " + hex(ipc::export_handle(x))), "ok opens=1");
  EXPECT_EQ(imp.ask("lookup 0"), "at=0 size=1024 capacity=1024 device=1 kind=ipc_imported");
  EXPECT_EQ(imp.ask("lookup 1023"),
            "at=1023 size=1024 capacity=1024 device=1 kind=ipc_imported");
  void* odd = p.allocate(1000);
  EXPECT_EQ(imp.ask("open " + hex(ipc::export_handle(odd))), "ok opens=1");
  EXPECT_EQ(imp.ask("lookup 0"), "at=0 size=1000 capacity=1000 device=1 kind=ipc_imported");
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(static_cast<char*>(odd) + 1000), errc::invalid_value);
  EXPECT_EQ(imp.ask("open " + hex(ipc::export_handle(plain))), "ok opens=2");
  const std::string r = imp.ask("lookup 0");
  EXPECT_EQ(r.rfind("at=0 size=", 0), 0u) << r;
  EXPECT_NE(r.find(" device=1 kind=ipc_imported"), std::string::npos) << r;
  EXPECT_EQ(imp.ask("close-all"), "closed");
  imp.close_stdin();
  EXPECT_EQ(imp.wait(), 0);
  a.munmap(plain, n);
  for (void* q : {before, x, after, odd}) p.deallocate(q);
}

TEST(IpcPool, WhatLegacyIpcCannotShareIsRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p = one_block_pool();
  void* x = p.allocate(4096);
  p.deallocate(x);
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(x), errc::invalid_value);  // free memory
  EXPECT_EQ(ipc::importers(x), 0);
  pool pinned(area(0, MEMAREA_AREA_HOST));
  void* h = pinned.allocate(4096);
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(h), errc::not_supported);
  memarea_ipc_handle_t c;
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&c, h), MEMAREA_ERROR_NOT_SUPPORTED);
  pinned.deallocate(h);
  pool host = pool::host();
  void* hp = host.allocate(4096);
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(hp), errc::not_supported);
  host.deallocate(hp);
  // A piece never exported has no importers; its free needs no IPC.
  void* y = p.allocate(4096);
  EXPECT_EQ(ipc::importers(y), 0);
  p.deallocate(y);
}

TEST(IpcPool, FreeWhileImportedIsHeldFromReuseUntilTheLastClose) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p = one_block_pool();
  const std::size_t n = std::size_t{64} << 10;
  void* x = p.allocate(n);
  const std::uint64_t seed = new_seed();
  fill(x, seed, n);
  const ipc::handle h = ipc::export_handle(x);
  child holder({"hold", hex(h), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  EXPECT_EQ(ipc::importers(x), 1);
  ipc::collect();  // what earlier tests left deferred finishes now, not during this one
  const std::size_t before = ipc::deferred_frees();
  p.deallocate(x);  // succeeds at once
  EXPECT_EQ(ipc::deferred_frees(), before + 1);
  EXPECT_MEMAREA_ERROR(p.deallocate(x), errc::invalid_value);  // a second free
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_GE(p.stats().bytes_in_use, n) << "held for the importer";
  // The whole block goes to other allocations; never the held piece.
  std::vector<void*> others;
  for (int k = 0; k < 64; ++k) {
    void* y = p.allocate(n);
    EXPECT_NE(y, x);
    fill(y, new_seed(), n);
    others.push_back(y);
  }
  EXPECT_EQ(holder.ask("check " + str(seed)), "ok") << "no one wrote into the held piece";
  {
    child late({"expect", hex(h), "MEMAREA_ERROR_INVALID_HANDLE"});
    EXPECT_EQ(late.wait(), 0) << "a freed piece cannot be opened any more";
  }
  for (void* y : others) p.deallocate(y);
  EXPECT_EQ(holder.ask("close"), "closed");
  ipc::collect();
  EXPECT_EQ(ipc::deferred_frees(), before);
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
  // The piece is the pool's again. This thread's cache hands out the 64 pieces it holds
  // first (up to 4 MiB of them), then the arena its free spans, x among them.
  std::vector<void*> again;
  for (int k = 0; k < 2 * 64 + 1 && std::find(again.begin(), again.end(), x) == again.end(); ++k)
    again.push_back(p.allocate(n));
  EXPECT_NE(std::find(again.begin(), again.end(), x), again.end());
  for (void* y : again) p.deallocate(y);
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0);
}

TEST(IpcPool, FreeIsRefusedWhenAsked) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  memarea_area_t a;
  ASSERT_EQ(memarea_area_create(&a, 0, 0), MEMAREA_SUCCESS);
  memarea_pool_t p;
  ASSERT_EQ(memarea_pool_create(&p, a, nullptr), MEMAREA_SUCCESS);
  const std::size_t n = 50000;
  void* x = nullptr;
  ASSERT_EQ(memarea_pool_alloc(p, &x, n, nullptr), MEMAREA_SUCCESS);
  const std::uint64_t seed = new_seed();
  fill(x, seed, n);
  memarea_pool_stats before{};
  ASSERT_EQ(memarea_pool_get_stats(p, &before), MEMAREA_SUCCESS);
  {
    child holder({"hold", hex(ipc::export_handle(x)), str(n), str(seed)});
    ASSERT_EQ(holder.line(), "opened");
    ipc::set_free_policy(ipc::free_policy::refuse);
    EXPECT_STATUS(memarea_pool_free(p, x, nullptr), MEMAREA_ERROR_BUSY);
    EXPECT_NE(std::string(memarea_last_error_message()).find("refuse"), std::string::npos);
    ipc::set_free_policy(ipc::free_policy::defer);
    ipc::set_free_policy(x, ipc::free_policy::refuse);  // this piece only
    EXPECT_STATUS(memarea_pool_free(p, x, nullptr), MEMAREA_ERROR_BUSY);
    memarea_pool_stats after{};
    ASSERT_EQ(memarea_pool_get_stats(p, &after), MEMAREA_SUCCESS);
    EXPECT_EQ(after.live_allocations, before.live_allocations) << "a refused free changes nothing";
    EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
    EXPECT_TRUE(holds(x, seed, n));
    EXPECT_EQ(holder.ask("check " + str(seed)), "ok");
    EXPECT_EQ(holder.ask("close"), "closed");
  }
  EXPECT_STATUS(memarea_pool_free(p, x, nullptr), MEMAREA_SUCCESS);  // no importer left
  EXPECT_EQ(ipc::get_free_policy(), ipc::free_policy::defer);
  EXPECT_STATUS(memarea_pool_destroy(p), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

TEST(IpcPool, AKilledImporterDoesNotPinAPiece) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p = one_block_pool();
  const std::size_t n = 4096;
  void* x = p.allocate(n);
  const std::uint64_t seed = new_seed();
  fill(x, seed, n);
  child holder({"hold", hex(ipc::export_handle(x)), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  ipc::collect();
  const std::size_t before = ipc::deferred_frees();
  p.deallocate(x);
  EXPECT_EQ(ipc::deferred_frees(), before + 1);
  EXPECT_EQ(p.stats().bytes_in_use, n) << "the piece is held for its importer";
  holder.kill_now();
  EXPECT_EQ(holder.wait(), 128 + SIGKILL);
  // collect() purges it at once, unless another process's sweep holds the dead importer's lease
  // for longer than a liveness test waits (other test processes sweep /dev/shm too): then the
  // next collect.
  EXPECT_TRUE(within(20, [&] {
    ipc::collect();
    return p.stats().bytes_in_use == 0;
  })) << "the dead importer still pins the piece";
  EXPECT_EQ(ipc::deferred_frees(), before) << "the dead importer is purged";
}

TEST(IpcPoolConcurrent, ExportsRaceFreesOfTheSamePieces) {
  // Exports racing with frees of the same pieces (TSan runs it): every export either returns a
  // handle that opens to the piece or says the piece was freed; nothing is held afterwards.
  MEMAREA_REQUIRE_DEVICES(1);
  pool p = one_block_pool();
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::atomic<int> stale{0};  // exports that lost the race (any number is right)
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kRounds; ++k) {
        void* x = p.allocate(512 + 64 * static_cast<std::size_t>(t));
        std::thread other([&] { p.deallocate(x); });
        try {
          (void)ipc::export_handle(x);
        } catch (const error& e) {
          EXPECT_EQ(e.status(), errc::invalid_value) << e.what();
          ++stale;
        }
        other.join();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
}
