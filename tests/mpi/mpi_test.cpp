// libmemarea_mpi's tests through its public API, as a user's program: one MPI program with a
// scenario per argument (tests/mpi/CMakeLists.txt runs them through run_mpi_test.sh; the
// protocol's own checks, on its internals, are mpi_protocol_test.cpp):
//   window          windows and share() on the happy path and bad input, data checked byte for
//                   byte (random), the node split (MEMAREA_MPI_TEST_NODES), can_access
//   fail_open       one rank's open fails: every rank fails alike, naming it; the communicator
//                   stays usable and a new window works
//   kill PHASE      one rank raises SIGKILL at PHASE: every other rank fails within the timeout
//   late            rank 1 arrives after the others gave up: every rank fails within the
//                   timeout (+ slack), none hangs
//   mismatch        rank 0 fences while rank 1 destroys: both fail (failure::mismatch), and the
//                   destroying rank's free is refused while rank 0 still maps its segment
//   bad_record      (3 ranks) rank 1's opens record is malformed: every rank fails alike
//   version         (3 ranks) rank 1 speaks the next protocol version: every rank fails at the
//                   join, naming a rank of the other version and both versions, before
//                   anything is allocated; a new window works
//   --gc            (no MPI) removes what dead processes left in /dev/shm
// Each rank writes its verdict to $MEMAREA_MPI_TEST_RESULTS/rank-N ("PASS ..." / "FAIL ...")
// and its owner id to owner-N, for the harness's check of /dev/shm (mpi_test_util.hpp).
#include "mpi_test_util.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/ipc.hpp>
#include <memarea/mpi.hpp>
#include <memarea/peer.hpp>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace mpi_test;

/// Random bytes that any rank can regenerate from (seed, size).
std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 gen(seed * 0x9e3779b97f4a7c15ull + 12345);
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t x = gen();
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, n - i));
  }
  return v;
}

/// Reads n bytes of any memarea pointer into host memory.
std::vector<unsigned char> read(const void* p, std::size_t n) {
  std::vector<unsigned char> v(n);
  memarea::copy(v.data(), p, n);
  return v;
}

/// Checks the node split: its size, node_rank_of for every rank, and the refusal of others.
template <class W>
void check_node(const W& w, int size) {
  long k = std::getenv("MEMAREA_MPI_TEST_NODES") ? std::atol(std::getenv("MEMAREA_MPI_TEST_NODES")) : 1;
  if (k < 1) k = 1;
  int expected = 0;
  for (int r = 0; r < size; ++r) expected += (r % k == g_rank % k);
  CHECK(w.node_size() == expected);
  CHECK(w.rank_of(w.node_rank()) == g_rank);
  for (int r = 0; r < size; ++r) {
    if (r % k == g_rank % k) {
      CHECK(w.rank_of(w.node_rank_of(r)) == r);
      continue;
    }
    try {
      (void)w.node_rank_of(r);
      CHECK(!"node_rank_of accepted a rank of another node");
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("another node") != std::string::npos);
    }
  }
  for (int bad : {-1, w.node_size(), w.node_size() + 5}) {
    try {
      (void)w.remote(bad);
      CHECK(!"remote accepted a node rank outside the node");
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("outside this node") != std::string::npos);
    }
  }
  try {
    (void)w.node_rank_of(size);
    CHECK(!"node_rank_of accepted a rank past the communicator");
  } catch (const memarea::error& e) {
    CHECK(e.status() == memarea::errc::invalid_value);
  }
}

/// Whether device a reaches device b, from the test's own configuration rather than the
/// library's: on sim, MEMAREA_SIM_PEER_GROUPS ("0;1": groups of devices, ';' between groups,
/// ',' within one; unset: every device reaches every other); elsewhere the driver's answer.
bool expected_reach(int a, int b) {
  if (a == b) return true;
  const char* backend = std::getenv("MEMAREA_BACKEND");
  if (!backend || std::strcmp(backend, "sim") != 0) return memarea::peer::can_access(a, b);
  const char* groups = std::getenv("MEMAREA_SIM_PEER_GROUPS");
  if (!groups || !*groups) return true;
  std::stringstream all(groups);
  std::string group;
  while (std::getline(all, group, ';')) {
    std::stringstream members(group);
    std::string d;
    bool has_a = false, has_b = false;
    while (std::getline(members, d, ',')) {
      has_a |= std::atoi(d.c_str()) == a;
      has_b |= std::atoi(d.c_str()) == b;
    }
    if (has_a || has_b) return has_a && has_b;
  }
  return false;
}

/// The data checks of one window: every rank's random segment read by every node peer, then a
/// write into the next node rank's segment read back by its owner. round: distinct data.
/// device_of(rank): the device the test put that rank's segment on.
void check_window(mm::shared_window& w, int size, int round,
                  const std::function<int(int)>& device_of) {
  const std::size_t n = w.size();
  const int me = w.node_rank(), ns = w.node_size();
  auto mine = pattern(std::uint64_t(g_rank) * 1000 + round, n);
  memarea::copy(w.local(), mine.data(), n);
  w.fence();
  for (int r = 0; r < ns; ++r) {
    auto expect = pattern(std::uint64_t(w.rank_of(r)) * 1000 + round, n);
    CHECK(read(w.remote(r), n) == expect);
    CHECK(w.device_of(r) == device_of(w.rank_of(r)));
    CHECK(w.can_access(r) == expected_reach(device_of(g_rank), device_of(w.rank_of(r))));
  }
  CHECK(w.remote(me) == w.local());
  w.fence();
  // Remote writes: into the next node rank's segment, at an odd offset and length.
  const int next = (me + 1) % ns, prev = (me + ns - 1) % ns;
  const std::size_t off = 3, len = n - 7;
  auto block = pattern(std::uint64_t(g_rank) * 1000 + round + 500, len);
  memarea::copy(static_cast<char*>(w.remote(next)) + off, block.data(), len);
  w.fence();
  auto got = read(static_cast<char*>(w.local()) + off, len);
  CHECK(got == pattern(std::uint64_t(w.rank_of(prev)) * 1000 + round + 500, len));
  check_node(w, size);
  // node_comm() is the caller's: a reduction over it counts the node's ranks.
  int one = 1, total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, w.node_comm());
  CHECK(total == ns);
}

int scenario_window(int size) {
  const int devices = memarea::device_count();
  CHECK(devices > 0);
  // The default device of a rank's segment: its node rank modulo the device count; with
  // MEMAREA_MPI_TEST_NODES=k, ranks r, r+k, r+2k... make a node, so a rank's node rank is r / k.
  const int nodes_k = std::getenv("MEMAREA_MPI_TEST_NODES") ? std::atoi(std::getenv("MEMAREA_MPI_TEST_NODES")) : 1;
  auto default_device = [&](int rank) { return (rank / nodes_k) % devices; };
  auto area_device = [&](int rank) { return (rank + 1) % devices; };
  // 1. The default window: device node rank % count.
  {
    mm::shared_window w(MPI_COMM_WORLD, 1 << 20);
    CHECK(w.device() == w.node_rank() % devices);
    check_window(w, size, 1, default_device);
    // Moved, it keeps working; the moved-from one is empty.
    mm::shared_window v = std::move(w);
    CHECK(!w && v);
    check_window(v, size, 2, default_device);
  }
  write_owner();
  // 2. From an area and from a pool, odd sizes.
  {
    int dev = (g_rank + 1) % devices;
    mm::shared_window w(MPI_COMM_WORLD, 4096 + 13, memarea::area(dev));
    CHECK(w.device() == dev);
    check_window(w, size, 3, area_device);
    memarea::pool p{memarea::area(dev)};
    {
      mm::shared_window pw(MPI_COMM_WORLD, 100000, p);
      check_window(pw, size, 4, area_device);
      CHECK(p.stats().live_allocations == 1);
    }
    CHECK(p.stats().live_allocations == 0);
  }
  // 3. Many windows in a row: nothing accumulates.
  for (int i = 0; i < 20; ++i) {
    mm::shared_window w(MPI_COMM_WORLD, 256 + i);
    memarea::copy(w.local(), pattern(g_rank + i, 256 + i).data(), 256 + i);
    w.fence();
  }
  CHECK(memarea::ipc::deferred_frees() == 0);
  // 4. Bad input on one rank fails every rank alike, naming it, and changes nothing.
  {
    // Ranks below k (the number of test nodes) are each the first rank of their node.
    const int k = std::getenv("MEMAREA_MPI_TEST_NODES") ? std::atoi(std::getenv("MEMAREA_MPI_TEST_NODES")) : 1;
    auto e = expect_collective_error(
        [&] { mm::shared_window w(MPI_COMM_WORLD, g_rank < k ? 0 : 4096); },
        "bytes_per_rank 0 on the first rank of each node");
    CHECK(e.kind() == mm::failure::rank);
    CHECK(e.rank() == g_rank % k);
    CHECK(e.status() == memarea::errc::invalid_value);
    CHECK(e.message().find(fmt::format("failed on rank {} (node rank 0)", g_rank % k)) !=
          std::string::npos);
    CHECK(e.message().find("bytes_per_rank is 0") != std::string::npos);
    CHECK(e.communicator_usable());
    auto host = expect_collective_error(
        [&] {
          mm::shared_window w(MPI_COMM_WORLD, 4096, memarea::area(0, memarea::area_flags::host));
        },
        "a window of host memory");
    CHECK(host.status() == memarea::errc::not_supported);
    CHECK(host.message().find("needs device memory") != std::string::npos);
    // Device ids follow memarea's one rule: -1 (here: node rank % count) or an ordinal.
    auto bad_device = expect_collective_error(
        [&] {
          mm::options o;
          o.device = -5;
          mm::shared_window w(MPI_COMM_WORLD, 4096, o);
        },
        "options.device -5");
    CHECK(bad_device.status() == memarea::errc::invalid_device);
    CHECK(bad_device.message().find("options.device -5") != std::string::npos);
    // Arguments every rank can judge alone are refused at once, before any message, with a
    // plain memarea::error (every rank passes the same options).
    try {
      mm::options o;
      o.timeout = 0ms;
      mm::shared_window w(MPI_COMM_WORLD, 4096, o);
      CHECK(!"a timeout of 0 was accepted");
    } catch (const mm::collective_error&) {
      CHECK(!"a timeout of 0 failed collectively instead of at once");
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("timeout 0 ms is not in (0, ") != std::string::npos);
    }
    // A timeout past max_timeout (milliseconds::max() overflowed the deadline) is refused at
    // once; max_timeout itself works.
    try {
      mm::options o;
      o.timeout = std::chrono::milliseconds::max();
      mm::shared_window w(MPI_COMM_WORLD, 4096, o);
      CHECK(!"a timeout of milliseconds::max() was accepted");
    } catch (const mm::collective_error& e) {
      g_failures.push_back(std::string("milliseconds::max() failed collectively: ") + e.what());
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("is not in (0, 10000000000] ms") != std::string::npos);
    }
    {
      mm::options o;
      o.timeout = mm::max_timeout;
      mm::shared_window w(MPI_COMM_WORLD, 4096, o);
      w.fence();
    }
    // bytes_per_rank differing within a node: every rank fails alike, naming the first rank
    // whose size differs from node rank 0's (ranks below k are node rank 0 of their node).
    {
      auto e = expect_collective_error(
          [&] { mm::shared_window w(MPI_COMM_WORLD, g_rank < k ? 4096 : 8192); },
          "bytes_per_rank differing within the node");
      CHECK(e.kind() == mm::failure::rank);
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.rank() == g_rank % k + k);
      CHECK(e.message().find(fmt::format("bytes_per_rank differs within the node: rank {} "
                                         "(node rank 1) asked for 8192 bytes, rank {} (node "
                                         "rank 0) for 4096",
                                         g_rank % k + k, g_rank % k)) != std::string::npos);
      CHECK(e.communicator_usable());
    }
    // Malformed test settings on one rank fail every rank alike, naming it.
    {
      if (g_rank == size - 1) setenv("MEMAREA_MPI_TEST_KILL_AT", "bogus", 1);
      auto e = expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096); },
                                       "malformed test settings on the last rank");
      unsetenv("MEMAREA_MPI_TEST_KILL_AT");
      CHECK(e.kind() == mm::failure::rank);
      CHECK(e.rank() == size - 1);
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("test settings (MEMAREA_MPI_TEST_*) are malformed") !=
            std::string::npos);
      if (g_rank == size - 1) CHECK(e.message().find("'bogus'") != std::string::npos);
    }
    try {
      mm::shared_window w(MPI_COMM_NULL, 4096);
      CHECK(!"MPI_COMM_NULL was accepted");
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_value);
    }
    CHECK(memarea::ipc::deferred_frees() == 0);
  }
  // 5. share(): a buffer of an area and a pool piece per rank.
  {
    int dev = g_rank % devices;
    memarea::buffer b = memarea::area(dev).allocate(3000);
    auto data = pattern(g_rank + 77, 3000);
    memarea::copy(b.data(), data.data(), 3000);
    {
      auto s = mm::share(MPI_COMM_WORLD, b);
      for (int r = 0; r < s.node_size(); ++r) {
        CHECK(s.size(r) == 3000);
        CHECK(read(s.get(r), 3000) == pattern(s.rank_of(r) + 77, 3000));
      }
      CHECK(s.get(s.node_rank()) == b.data());
      s.close();
      CHECK(!s);
    }
    memarea::pool p{memarea::area(dev)};
    memarea::pool_buffer pb(p, 5000);
    // A pool piece of 5000 bytes spans 5120 (the pool's 512-byte granule), and is shared as
    // the 5000 bytes its allocation asked for.
    constexpr std::size_t kPieceBytes = 5000;
    memarea::copy(pb.data(), pattern(g_rank + 99, 5000).data(), 5000);
    {
      auto s = mm::share(MPI_COMM_WORLD, pb);
      for (int r = 0; r < s.node_size(); ++r) {
        CHECK(s.size(r) == kPieceBytes);
        CHECK(read(s.get(r), 5000) == pattern(s.rank_of(r) + 99, 5000));
      }
    }
    // share() on one rank against a window on the others (both a handle exchange): every
    // rank fails at once with failure::mismatch, whatever the sizes, and frees what it made.
    {
      const int k = std::getenv("MEMAREA_MPI_TEST_NODES") ? std::atoi(std::getenv("MEMAREA_MPI_TEST_NODES")) : 1;
      auto start = std::chrono::steady_clock::now();
      auto m = expect_collective_error(
          [&] {
            if (g_rank < k) {
              (void)mm::share(MPI_COMM_WORLD, b);
            } else {
              mm::shared_window w(MPI_COMM_WORLD, 4096);
            }
          },
          "share() against a window");
      CHECK(m.kind() == mm::failure::mismatch);
      CHECK(m.status() == memarea::errc::invalid_value);
      CHECK(m.rank() == (g_rank < k ? g_rank % k + k : g_rank % k));
      CHECK(m.message().find("made another collective call") != std::string::npos);
      CHECK(m.message().find(g_rank < k ? "making a window (exchanging handles)"
                                        : "calling share() (exchanging handles)") !=
            std::string::npos);
      CHECK(m.communicator_usable());
      CHECK(std::chrono::steady_clock::now() - start < 5s);  // told at once, not timed out
      CHECK(memarea::ipc::deferred_frees() == 0);
    }
    // Host memory cannot be shared: every rank fails, naming the first rank of its node.
    std::vector<char> host(64);
    auto e = expect_collective_error([&] { (void)mm::share(MPI_COMM_WORLD, host.data()); },
                                     "share of pageable host memory");
    CHECK(e.kind() == mm::failure::rank);
    CHECK(e.message().find("rank ") != std::string::npos);
  }
  return verdict(fmt::format("window scenario, {} ranks", size));
}

int scenario_fail_open(int size) {
  {  // the first window makes the lease
    mm::shared_window w(MPI_COMM_WORLD, 4096);
  }
  write_owner();
  setenv("MEMAREA_MPI_TEST_FAIL_OPEN_RANK", "1", 1);
  auto start = std::chrono::steady_clock::now();
  auto e = expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096); },
                                   "a window whose open fails on rank 1");
  auto took = std::chrono::steady_clock::now() - start;
  unsetenv("MEMAREA_MPI_TEST_FAIL_OPEN_RANK");
  CHECK(e.kind() == mm::failure::rank);
  CHECK(e.rank() == 1);
  CHECK(e.status() == memarea::errc::invalid_handle);
  CHECK(e.message().find("rank 1 (node rank 1)") != std::string::npos);
  CHECK(e.message().find("opening") != std::string::npos);
  CHECK(took < 5s);
  std::printf("rank %d got: %s\n", g_rank, e.what());
  // Nothing stayed open or allocated, and the communicator still works: a new window does.
  CHECK(memarea::ipc::deferred_frees() == 0);
  mm::shared_window w(MPI_COMM_WORLD, 8192);
  check_window(w, size, 9, [&](int rank) { return rank % memarea::device_count(); });
  return verdict("fail_open scenario");
}

int scenario_kill(const std::string& at) {
  mm::options o;
  o.timeout = 5s;
  {  // the first window makes every rank's lease, which the harness then checks
    mm::shared_window w(MPI_COMM_WORLD, 4096, o);
  }
  write_owner();
  MPI_Barrier(MPI_COMM_WORLD);  // every owner file is written before the victim may die
  setenv("MEMAREA_MPI_TEST_KILL_RANK", "1", 1);
  setenv("MEMAREA_MPI_TEST_KILL_AT", at.c_str(), 1);
  auto start = std::chrono::steady_clock::now();
  mm::collective_error e(memarea::errc::success, "", mm::failure::none, -2);
  if (at == "fence" || at == "destroy") {
    mm::shared_window w(MPI_COMM_WORLD, 4096, o);
    start = std::chrono::steady_clock::now();
    if (at == "fence") {
      e = expect_collective_error([&] { w.fence(); }, "fence with a dead rank");
    } else {
      e = expect_collective_error([&] { w.destroy(); }, "destroy with a dead rank");
      CHECK(!w);
    }
  } else {
    e = expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096, o); },
                                "a window with a dead rank");
  }
  auto took = std::chrono::steady_clock::now() - start;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  std::printf("rank %d got after %lld ms: %s\n", g_rank, static_cast<long long>(ms), e.what());
  CHECK(e.kind() == mm::failure::timeout);
  CHECK(!e.communicator_usable());
  CHECK(took >= 4900ms);
  CHECK(took < 10s);
  if (at == "exchange" || at == "open") {
    CHECK(e.rank() == 1);
    CHECK(e.message().find("rank 1 of this node sent nothing") != std::string::npos);
  }
  // The dead rank's objects: its lease is free now, so a sweep removes them.
  memarea::ipc::remove_stale_objects();
  return verdict(fmt::format("kill scenario at {}: timed out after {} ms", at, ms));
}

/// Keeps MPI progressing on this rank for d (as an application that reports and goes on), so
/// that a late rank's collectives may complete against this rank's abandoned ones.
void progress_for(std::chrono::milliseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    std::this_thread::sleep_for(100us);
  }
}

int scenario_late() {
  mm::options o;
  o.timeout = 2s;
  {  // the first window makes every rank's lease, which the harness then checks
    mm::shared_window w(MPI_COMM_WORLD, 4096, o);
  }
  write_owner();
  MPI_Barrier(MPI_COMM_WORLD);
  // Rank 1 arrives 3 s late: the others give up after 2 s; its own arrival check may then
  // complete (the others keep MPI progressing), but no later step may block it.
  if (g_rank == 1) std::this_thread::sleep_for(3s);
  auto start = std::chrono::steady_clock::now();
  auto e = expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096, o); },
                                   "a window that rank 1 joins late");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d got after %lld ms: %s\n", g_rank, static_cast<long long>(ms), e.what());
  CHECK(e.kind() == mm::failure::timeout);
  CHECK(ms >= 1900);
  CHECK(ms < 2000 + 3000);  // the timeout plus slack: never more than one step's wait
  std::fflush(stdout);
  progress_for(g_rank == 1 ? 1s : 5s);
  return verdict(fmt::format("late scenario: timed out after {} ms", ms));
}

int scenario_mismatch() {
  mm::options o;
  o.timeout = 3s;
  mm::shared_window w(MPI_COMM_WORLD, 4096, o);
  write_owner();
  auto mine = pattern(std::uint64_t(g_rank) + 4242, 4096);
  memarea::copy(w.local(), mine.data(), 4096);
  w.fence();
  void* segment = w.local();
  const int dev = w.device();
  auto start = std::chrono::steady_clock::now();
  if (g_rank == 0) {
    // Rank 1 skipped its fence (say, an exception) and destroys the window instead.
    auto e = expect_collective_error([&] { w.fence(); }, "a fence against a destroy");
    std::printf("rank 0 got: %s\n", e.what());
    CHECK(e.kind() == mm::failure::mismatch);
    CHECK(e.rank() == 1);
    CHECK(e.status() == memarea::errc::invalid_value);
    CHECK(e.message().find("rank 1 (node rank 1) made another collective call: destroying") !=
          std::string::npos);
    CHECK(e.communicator_usable());
    CHECK(std::chrono::steady_clock::now() - start < 2s);  // told at once, not timed out
    CHECK(w);  // the window stays (broken) until destroyed
  } else if (g_rank == 1) {
    // Under free_policy::refuse the free fails while another process maps the segment: what
    // the destroy frees must not be mapped elsewhere, so the free is refused and the segment
    // goes to the release-failure record.
    memarea::ipc::set_free_policy(segment, memarea::ipc::free_policy::refuse);
    (void)memarea::take_release_failures();
    auto e = expect_collective_error([&] { w.destroy(); }, "a destroy against a fence");
    std::printf("rank 1 got: %s\n", e.what());
    CHECK(!w);
    CHECK(e.kind() == mm::failure::mismatch);
    CHECK(e.rank() == 0);
    CHECK(e.message().find("rank 0 (node rank 0) made another collective call: fencing") !=
          std::string::npos);
    auto failures = memarea::take_release_failures();
    CHECK(failures.size() == 1);
    if (failures.size() == 1) {
      CHECK(failures[0].ptr == segment);
      CHECK(failures[0].size == 4096);
      CHECK(failures[0].status == memarea::errc::busy);
    }
    CHECK(memarea::ipc::importers(segment) == 1);  // rank 0 still maps it
  }
  // The user's communicator is still usable; rank 0 still reads rank 1's data.
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    CHECK(read(w.remote(1), 4096) == pattern(1 + 4242, 4096));
    // Destroying the broken window makes no MPI call: it closes and frees at once.
    auto t = std::chrono::steady_clock::now();
    w.destroy();
    CHECK(!w);
    CHECK(std::chrono::steady_clock::now() - t < 1s);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 1) {
    // Nobody maps it any more: the caller frees what the record kept.
    memarea::ipc::collect();
    CHECK(memarea::ipc::importers(segment) == 0);
    memarea::area(dev).munmap(segment, 4096);
  }
  CHECK(memarea::ipc::deferred_frees() == 0);
  return verdict("mismatch scenario");
}

/// Rank 1's report of its opens is malformed: the others refuse it, and the confirm step
/// makes rank 1 fail too; nothing stays open, and a new window works.
int scenario_bad_record(int size) {
  mm::options o;
  o.timeout = 5s;
  {  // the first window makes the lease
    mm::shared_window w(MPI_COMM_WORLD, 4096, o);
  }
  write_owner();
  setenv("MEMAREA_MPI_TEST_BAD_RECORD_RANK", "1", 1);
  auto start = std::chrono::steady_clock::now();
  auto e = expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096, o); },
                                   "a window whose rank 1 sends a malformed opens record");
  auto took = std::chrono::steady_clock::now() - start;
  unsetenv("MEMAREA_MPI_TEST_BAD_RECORD_RANK");
  std::printf("rank %d got: %s\n", g_rank, e.what());
  CHECK(e.kind() == mm::failure::mismatch);
  CHECK(e.status() == memarea::errc::invalid_value);
  if (g_rank == 1) {
    CHECK(e.rank() == 0);  // the first rank that refused its record
    CHECK(e.message().find("refused a record of the opens step") != std::string::npos);
  } else {
    CHECK(e.rank() == 1);
    CHECK(e.message().find("rank 1 (node rank 1) sent a malformed record (bad_device") !=
          std::string::npos);
  }
  CHECK(e.communicator_usable());
  CHECK(took < 3s);  // told by the confirm step, not by a timeout
  CHECK(memarea::ipc::deferred_frees() == 0);
  mm::shared_window w(MPI_COMM_WORLD, 8192, o);
  check_window(w, size, 11, [&](int rank) { return rank % memarea::device_count(); });
  return verdict("bad_record scenario");
}

/// Rank 1 speaks the next protocol version (MEMAREA_MPI_TEST_VERSION_RANK): every rank fails at
/// the join with failure::mismatch, naming a rank of the other version and both versions, before
/// anything is allocated; the communicator stays usable, and a new window works.
int scenario_version(int size) {
  mm::options o;
  o.timeout = 5s;
  {  // the first window makes the lease
    mm::shared_window w(MPI_COMM_WORLD, 4096, o);
  }
  write_owner();
  const int dev = g_rank % memarea::device_count();
  auto check_error = [&](const mm::collective_error& e, const char* what) {
    std::printf("rank %d got (%s): %s\n", g_rank, what, e.what());
    CHECK(e.kind() == mm::failure::mismatch);
    CHECK(e.status() == memarea::errc::invalid_value);
    CHECK(e.communicator_usable());
    CHECK(e.message().find("joining the node") != std::string::npos);
    const int other = g_rank == 1 ? 0 : 1;
    CHECK(e.rank() == other);
    CHECK(e.message().find(fmt::format("rank {} speaks another version of memarea's MPI protocol "
                                       "than this rank (rank {})",
                                       other, g_rank)) != std::string::npos);
    CHECK(e.message().find(g_rank == 1 ? "protocol version 2; this rank speaks version 3"
                                       : "protocol version 3; this rank speaks version 2") !=
          std::string::npos);
  };
  memarea::pool p{memarea::area(dev)};
  memarea::buffer mine = memarea::area(dev).allocate(4096);
  setenv("MEMAREA_MPI_TEST_VERSION_RANK", "1", 1);
  auto start = std::chrono::steady_clock::now();
  check_error(expect_collective_error([&] { mm::shared_window w(MPI_COMM_WORLD, 4096, p, o); },
                                      "a window whose rank 1 speaks the next protocol version"),
              "window");
  CHECK(std::chrono::steady_clock::now() - start < 3s);  // at the join, not by a timeout
  check_error(expect_collective_error([&] { (void)mm::share(MPI_COMM_WORLD, mine.data(), o); },
                                      "share() whose rank 1 speaks the next protocol version"),
              "share");
  unsetenv("MEMAREA_MPI_TEST_VERSION_RANK");
  // Nothing was allocated, exported or opened: the join comes first.
  const auto st = p.stats();
  CHECK(st.driver_allocations == 0);
  CHECK(st.peak_bytes_in_use == 0);
  CHECK(memarea::ipc::deferred_frees() == 0);
  mm::shared_window w(MPI_COMM_WORLD, 8192, o);
  check_window(w, size, 13, [&](int rank) { return rank % memarea::device_count(); });
  return verdict("version scenario");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--gc") == 0) {
    std::printf("removed %zu objects\n", memarea::ipc::remove_stale_objects());
    return 0;
  }
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string what = argc > 1 ? argv[1] : "window";
  int rc = 1;
  try {
    if (what == "window") {
      rc = scenario_window(size);
    } else if (what == "mismatch") {
      rc = scenario_mismatch();
    } else if (what == "late") {
      rc = scenario_late();
      std::fflush(stdout);
      std::exit(rc);  // the communicator is unusable after a timeout: no MPI_Finalize
    } else if (what == "bad_record") {
      rc = scenario_bad_record(size);
    } else if (what == "version") {
      rc = scenario_version(size);
    } else if (what == "fail_open") {
      rc = scenario_fail_open(size);
    } else if (what == "kill" && argc > 2) {
      rc = scenario_kill(argv[2]);
      // MPI's rule after a timeout: the communicator is unusable, so the process exits
      // without MPI_Finalize (which would wait for the dead rank); memarea's exit handlers
      // still remove its objects.
      std::fflush(stdout);
      std::exit(rc);
    } else {
      g_failures.push_back("unknown scenario " + what);
      rc = verdict(what);
    }
  } catch (const std::exception& e) {
    g_failures.push_back(std::string("uncaught: ") + e.what());
    rc = verdict(what);
  }
  MPI_Finalize();
  return rc;
}
