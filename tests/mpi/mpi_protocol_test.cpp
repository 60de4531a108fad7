// libmemarea_mpi's protocol, tested on its internals (white box: the MPI layer's sources are
// compiled into this program, over the shared libmemarea's public API; tests/mpi/CMakeLists.txt):
//   records         (3 ranks) first the checks of what peers send (a claimed size against the
//                   opened mapping, a peer's status code), then rank 1 sends what the protocol
//                   refuses: a status in a fence, a failure message with control bytes, a record
//                   of protocol version 1, more than the longest record
//   --gc            (no MPI) removes what dead processes left in /dev/shm
// Each rank writes its verdict and owner id as mpi_test.cpp's ranks do (mpi_test_util.hpp).
#include "mpi/shared.hpp"
#include "mpi_test_util.hpp"

#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/mpi.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using namespace mpi_test;

/// The checks of what peers send, without MPI: a claimed size against the opened mapping, and
/// a peer's status code.
void check_validation() {
  namespace d = memarea::mpi::detail;
  static char block[8192];
  memarea::allocation_info mapped;
  mapped.base = block;
  mapped.size = 4096;
  const void* p = block + 96;
  CHECK(d::checked_peer_size(4000, mapped, p, "rank 1 (node rank 1)") == 4000);
  CHECK(d::checked_peer_size(1, mapped, p, "rank 1 (node rank 1)") == 1);
  for (std::uint64_t claimed : {std::uint64_t(4001), std::uint64_t(1) << 40, std::uint64_t(0)}) {
    try {
      (void)d::checked_peer_size(claimed, mapped, p, "rank 1 (node rank 1)");
      g_failures.push_back(fmt::format("a claimed size of {} was accepted", claimed));
    } catch (const memarea::error& e) {
      CHECK(e.status() == memarea::errc::invalid_handle);
      CHECK(e.message().find(fmt::format("rank 1 (node rank 1) claims {} bytes", claimed)) !=
            std::string::npos);
      CHECK(e.message().find("holds 4000 bytes") != std::string::npos);
    }
  }
  try {
    (void)d::checked_peer_size(16, mapped, block + 4096, "rank 1 (node rank 1)");
    CHECK(!"a pointer past the mapping was accepted");
  } catch (const memarea::error& e) {
    CHECK(e.status() == memarea::errc::invalid_handle);
  }
  CHECK(d::status_of(12345) == memarea::errc::unknown);
  CHECK(d::status_of(-7) == memarea::errc::unknown);
  CHECK(d::status_of(0) == memarea::errc::unknown);
  CHECK(d::status_of(static_cast<int>(memarea::errc::invalid_handle)) ==
        memarea::errc::invalid_handle);
}

/// A group of its own over MPI_COMM_WORLD, for the scenarios that speak the protocol directly.
std::unique_ptr<memarea::mpi::detail::group> make_group(std::chrono::milliseconds t) {
  return std::make_unique<memarea::mpi::detail::group>(MPI_COMM_WORLD, t);
}

/// What peers send that the protocol refuses, sent through the group's own steps or raw on its
/// private communicator (3 ranks; rank 1 misbehaves).
int scenario_records() {
  namespace d = memarea::mpi::detail;
  // 1. A status in a fence record: refused by the receivers (never dropped unseen). The
  // sender saw nothing wrong; its node_comm() then times out instead of blocking in
  // MPI_Comm_create_group.
  {
    auto g = make_group(2s);
    if (g_rank == 1) {
      d::record r;
      r.fail(memarea::errc::out_of_memory, "a fence that failed");
      try {
        (void)g->exchange(r, d::step_kind::fence, "test fence");
      } catch (const std::exception& e) {
        g_failures.push_back(std::string("the sender of a refused record failed: ") + e.what());
      }
      auto start = std::chrono::steady_clock::now();
      auto e = expect_collective_error([&] { (void)g->user_comm(); },
                                       "node_comm() after the others left the sequence");
      auto took = std::chrono::steady_clock::now() - start;
      std::printf("rank 1 got: %s\n", e.what());
      CHECK(e.kind() == mm::failure::timeout);
      CHECK(e.message().find("node_comm") != std::string::npos);
      CHECK(took >= 1900ms);
      CHECK(took < 5s);
    } else {
      auto e = expect_collective_error(
          [&] { (void)g->exchange(d::record{}, d::step_kind::fence, "test fence"); },
          "a fence record carrying a status");
      std::printf("rank %d got: %s\n", g_rank, e.what());
      CHECK(e.kind() == mm::failure::mismatch);
      CHECK(e.rank() == 1);
      CHECK(e.message().find("malformed record (bad_status") != std::string::npos);
      CHECK(g->broken);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // 2. A failure message with control bytes: every rank's exception shows it escaped.
  {
    auto g = make_group(5s);
    d::record r;
    if (g_rank == 1) r.fail(memarea::errc::not_found, "evil\x1b[2J\r\nline\\x");
    auto all = g->exchange(r, d::step_kind::opens, "test opens");
    auto e = expect_collective_error([&] { g->throw_first_failure(all, "test"); },
                                     "a failure message with control bytes");
    CHECK(e.kind() == mm::failure::rank);
    CHECK(e.rank() == 1);
    CHECK(e.status() == memarea::errc::not_found);
    CHECK(e.message().find("evil\\x1b[2J\\x0d\\x0aline\\\\x") != std::string::npos);
    for (unsigned char c : e.message()) {
      if (c < 0x20 || c == 0x7f) {
        g_failures.push_back(fmt::format("a control byte {:#04x} in: {}", c, e.message()));
        break;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // 3. A record of protocol version 1 (magic "MMR1"), raw on the private communicator, each
  // message matched: the receivers fail with failure::mismatch naming rank 1 and both versions.
  {
    auto g = make_group(5s);
    if (g_rank == 1) {
      d::record r;
      r.rank = 1;
      r.kind = static_cast<std::int32_t>(d::step_kind::fence);
      auto old = d::encode_record(r);
      old[3] = '1';
      std::vector<std::vector<unsigned char>> in(2, std::vector<unsigned char>(d::max_record_bytes));
      std::vector<MPI_Request> req;
      for (int i = 0; i < 2; ++i) {
        const int peer = i == 0 ? 0 : 2;
        req.push_back(MPI_REQUEST_NULL);
        MPI_Irecv(in[static_cast<std::size_t>(i)].data(), static_cast<int>(d::max_record_bytes),
                  MPI_BYTE, peer, 0x6d61, g->priv.get(), &req.back());
        req.push_back(MPI_REQUEST_NULL);
        MPI_Isend(old.data(), static_cast<int>(old.size()), MPI_BYTE, peer, 0x6d61, g->priv.get(),
                  &req.back());
      }
      auto end = std::chrono::steady_clock::now() + 3s;
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < end) {
        MPI_Testall(static_cast<int>(req.size()), req.data(), &done, MPI_STATUSES_IGNORE);
      }
      CHECK(done);
      g->broken = true;  // the others left the sequence
    } else {
      auto e = expect_collective_error(
          [&] { (void)g->exchange(d::record{}, d::step_kind::fence, "test fence"); },
          "a record of protocol version 1");
      std::printf("rank %d got: %s\n", g_rank, e.what());
      CHECK(e.kind() == mm::failure::mismatch);
      CHECK(e.rank() == 1);
      CHECK(e.status() == memarea::errc::invalid_value);
      CHECK(e.message().find("rank 1 (node rank 1) sent a record of another version of memarea's "
                             "MPI protocol (bad_version: protocol version 1 (magic 0x31524d4d); "
                             "this rank speaks version 2)") != std::string::npos);
      CHECK(g->broken);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // 4. More than the longest record, raw on the private communicator: MPI truncates it, and
  // the receivers fail with failure::mismatch naming rank 1 while their receive from rank 2
  // (late by 500 ms) is still pending. Its buffer must not be freed: rank 2's record lands in
  // it later, and must not land in memory this rank reuses.
  {
    auto g = make_group(5s);
    if (g_rank == 1) {
      std::vector<unsigned char> big(2000, 0x5a);
      std::vector<MPI_Request> sends;
      for (int r : {0, 2}) {
        sends.push_back(MPI_REQUEST_NULL);
        MPI_Isend(big.data(), static_cast<int>(big.size()), MPI_BYTE, r, 0x6d61, g->priv.get(),
                  &sends.back());
      }
      auto end = std::chrono::steady_clock::now() + 3s;
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < end) {
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
      }
      CHECK(done);
      g->broken = true;  // the others' records to it are never received
    } else {
      if (g_rank == 2) std::this_thread::sleep_for(500ms);
      auto e = expect_collective_error(
          [&] { (void)g->exchange(d::record{}, d::step_kind::fence, "test fence"); },
          "a record longer than the longest");
      std::printf("rank %d got: %s\n", g_rank, e.what());
      CHECK(e.kind() == mm::failure::mismatch);
      CHECK(e.rank() == 1);
      CHECK(e.message().find("rank 1 sent a record longer than 1204 bytes") != std::string::npos);
      CHECK(g->broken);
      // Memory of the size the step's buffers had, reused at once if they had been freed.
      std::vector<std::vector<unsigned char>> probes;
      for (int i = 0; i < 64; ++i) probes.emplace_back(3 * memarea::mpi::detail::max_record_bytes, 0xa5);
      auto end = std::chrono::steady_clock::now() + 1500ms;
      while (std::chrono::steady_clock::now() < end) {  // rank 2's record arrives meanwhile
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        std::this_thread::sleep_for(100us);
      }
      for (auto& p : probes) {
        if (std::count(p.begin(), p.end(), 0xa5) != static_cast<long>(p.size())) {
          g_failures.push_back("a late record landed in memory the step had freed");
          break;
        }
      }
    }
  }
  return verdict("records scenario");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--gc") == 0) {
    std::printf("removed %zu objects\n", memarea::ipc::remove_stale_objects());
    return 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const std::string what = argc > 1 ? argv[1] : "records";
  int rc = 1;
  try {
    if (what == "records") {
      check_validation();
      rc = scenario_records();
    } else {
      g_failures.push_back("unknown scenario " + what);
      rc = verdict(what);
    }
  } catch (const std::exception& e) {
    g_failures.push_back(std::string("uncaught: ") + e.what());
    rc = verdict(what);
  }
  // The groups the records scenario broke leave requests behind: no MPI_Finalize (as after a
  // timeout).
  std::fflush(stdout);
  std::exit(rc);
}
