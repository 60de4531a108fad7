// IPC of pool memory seen inside: sub-allocations of one block share the driver's handle in
// their handles' bytes, a handle forged to reach past its sub-allocation is refused, and a
// destroyed pool's held block leaves the registry with its last close. Real processes
// (tests/helper), run against whichever backend is active. The rest is api/ipc_pool_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/area.hpp>
#include <memarea/ipc.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace wire_format = memarea::detail::ipc_internal;

namespace {

/// A device pool whose first block (4 MiB) holds every piece these tests take.
pool one_block_pool() {
  pool_options o;
  o.initial_size = std::size_t{4} << 20;
  return pool(area(0), o);
}

bool on_sim() { return backend_name() == "sim"; }

}  // namespace

TEST(IpcPool, SubAllocationsOfOneBlockCostOneDriverOpen) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p = one_block_pool();
  const std::size_t n = 100000;  // not a multiple of the pool's alignment
  const std::uint64_t seed = new_seed();
  std::vector<void*> pieces;
  std::vector<std::string> args = {"import-all", str(n), str(seed)};
  std::set<std::uint64_t> ids, offsets;
  for (std::uint64_t k = 0; k < 8; ++k) {
    void* x = p.allocate(n);
    fill(x, seed + k, n);
    const ipc::handle h = ipc::export_handle(x);
    EXPECT_EQ(ipc::export_handle(x), h) << "exporting again gives the same handle";
    const wire_format::wire w = wire_of(h);
    EXPECT_EQ(std::memcmp(w.native, wire_of(ipc::export_handle(pieces.empty() ? x : pieces[0]))
                                        .native,
                          sizeof w.native),
              0)
        << "one driver handle: the block's";
    ids.insert(w.buffer_id);
    offsets.insert(w.offset);
    pieces.push_back(x);
    args.push_back(hex(h));
  }
  EXPECT_EQ(p.stats().driver_allocations, 1u) << "one block holds them all";
  EXPECT_EQ(ids.size(), 8u) << "each sub-allocation is its own buffer";
  EXPECT_EQ(offsets.size(), 8u);
  child c(args);
  EXPECT_EQ(c.line(), "ok opens=1 mappings=1") << "one driver open for the block";
  for (std::uint64_t k = 0; k < 8; ++k) {
    EXPECT_TRUE(holds(pieces[k], seed + 1000 + k, n)) << "the importer's writes, piece " << k;
    EXPECT_EQ(ipc::importers(pieces[k]), 1);
  }
  EXPECT_EQ(c.ask("close"), "closed");
  for (void* x : pieces) EXPECT_EQ(ipc::importers(x), 0);
  c.close_stdin();
  EXPECT_EQ(c.wait(), 0);
  for (void* x : pieces) p.deallocate(x);
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

TEST(IpcPool, AHandleNamesOnlyItsSubAllocation) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p = one_block_pool();
  const std::size_t n = 8192;
  void* a = p.allocate(n);
  void* b = p.allocate(n);
  const std::uint64_t sa = new_seed(), sb = new_seed();
  fill(a, sa, n);
  fill(b, sb, n);
  // An interior pointer opens at its offset, in another process and in this one.
  const ipc::handle inner = ipc::export_handle(static_cast<char*>(a) + 17);
  {
    child c({"check", hex(inner), str(n), str(sa), "17", "0"});
    EXPECT_EQ(c.line(), "ok");
    EXPECT_EQ(c.wait(), 0);
  }
  void* own = ipc::open(inner);
  EXPECT_EQ(own, static_cast<char*>(a) + 17) << "the exporter gets its own pointer";
  ipc::close(own);
  // Offsets moved out of a's range, into b or past a's end, are refused everywhere.
  const std::uint64_t a_off = wire_of(inner).offset - 17;
  const std::uint64_t b_off = a_off + static_cast<std::uint64_t>(static_cast<char*>(b) -
                                                                  static_cast<char*>(a));
  for (std::uint64_t off : {b_off, a_off + p.stats().bytes_in_use, a_off + (n + 255) / 256 * 256,
                            a_off - 1}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    const ipc::handle bad = forged(inner, [&](wire_format::wire& w) { w.offset = off; });
    EXPECT_MEMAREA_ERROR((void)ipc::open(bad), errc::invalid_handle);
    child c({"expect", hex(bad), "MEMAREA_ERROR_INVALID_HANDLE"});
    EXPECT_EQ(c.wait(), 0);
  }
  EXPECT_TRUE(holds(b, sb, n)) << "nothing wrote into b";
  // A freed piece's handle is stale, even when a new piece takes its address.
  p.deallocate(a);
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(a), errc::invalid_value);
  void* again = nullptr;
  std::vector<void*> taken;
  for (int k = 0; k < 64 && again != a; ++k) {
    again = p.allocate(n);
    taken.push_back(again);
  }
  ASSERT_EQ(again, a) << "the pool hands the address out again";
  EXPECT_NE(wire_of(ipc::export_handle(a)).buffer_id, wire_of(inner).buffer_id);
  {
    child c({"expect", hex(inner), "MEMAREA_ERROR_INVALID_HANDLE"});
    EXPECT_EQ(c.wait(), 0);
  }
  EXPECT_MEMAREA_ERROR((void)ipc::open(inner), errc::invalid_handle);
  for (void* x : taken) p.deallocate(x);
  p.deallocate(b);
}

TEST(IpcPool, ADestroyedPoolsHeldBlockIsFreedAfterTheLastClose) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = std::size_t{256} << 10;
  const std::size_t records = live_records();
  for (bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "destroyed with the piece live" : "freed, then destroyed");
    ipc::collect();
    const std::size_t before = ipc::deferred_frees();
    const std::size_t free_before = get_device_properties(0).free_memory;
    const std::uint64_t seed = new_seed();
    std::optional<child> holder;
    {
      pool p = one_block_pool();
      void* x = p.allocate(n);
      fill(x, seed, n);
      holder.emplace(std::vector<std::string>{"hold", hex(ipc::export_handle(x)), str(n),
                                              str(seed)});
      ASSERT_EQ(holder->line(), "opened");
      if (!forced) {
        p.deallocate(x);
        p.destroy();  // nothing is live: the held piece does not count
      }
    }  // forced: the destructor frees what is live
    EXPECT_EQ(ipc::deferred_frees(), before + 1);
    EXPECT_EQ(live_records(), records) << "the block left the registry with its pool";
    if (on_sim()) {
      EXPECT_LT(get_device_properties(0).free_memory, free_before) << "not freed yet";
    }
    EXPECT_EQ(holder->ask("check " + str(seed)), "ok") << "the importer's memory is whole";
    EXPECT_EQ(holder->ask("close"), "closed");
    ipc::collect();
    EXPECT_EQ(ipc::deferred_frees(), before);
    if (on_sim()) {
      EXPECT_EQ(get_device_properties(0).free_memory, free_before) << "freed now";
    }
    holder->close_stdin();
    EXPECT_EQ(holder->wait(), 0);
  }
}
