// The child processes of the IPC bench (bench_ipc.cpp): the exporters whose buffers the bench
// imports, and the fresh processes that time their first export or import. The bench starts
// this binary again with MEMAREA_BENCH_IPC_ROLE (and MEMAREA_BENCH_IPC_ARG) set; main() then
// runs that role (run_child_role) instead of the command line.
#include "bench/src/bench_ipc.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/ipc.hpp>
#include <memarea/pool.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace memarea::cli::bench {

namespace ipc_case {

std::vector<unsigned char> pattern(std::size_t i) {
  std::mt19937_64 rng(0x1bc0ffee ^ i);
  std::vector<unsigned char> v(kChecked);
  for (auto& b : v) b = static_cast<unsigned char>(rng() | 1);
  return v;
}

bool holds(const void* p, std::size_t i, const host_copy& via) {
  std::vector<unsigned char> got(kChecked, 0);
  via(got.data(), p, kChecked);
  if (corrupt_for_test()) got[kChecked / 2] ^= 0xff;
  return got == pattern(i);
}
bool holds(const void* p, std::size_t i) { return holds(p, i, memarea_host_copy()); }

}  // namespace ipc_case

namespace {

using namespace ipc_case;

/// exporter N: N buffers of memarea's, buffer i filled with pattern(i), and N of the
/// baseline's, buffer i filled with pattern(kRawBase + i); prints memarea's handles, one per
/// line, then the baseline's; lives until stdin closes.
int exporter_role(std::size_t n) {
  const raw_ipc raw;
  std::vector<buffer> bufs;
  std::vector<void*> raws;
  for (std::size_t i = 0; i < n; ++i) {
    bufs.push_back(area(0).allocate(kBytes));
    const auto v = pattern(i);
    copy(bufs.back().data(), v.data(), v.size());
    raws.push_back(raw.malloc());
    const auto w = pattern(kRawBase + i);
    raw.copier()(raws.back(), w.data(), w.size());
  }
  for (auto& b : bufs) std::printf("%s\n", ipc::export_handle(b.data()).to_hex().c_str());
  for (void* q : raws) std::printf("%s\n", raw.get_handle(q).hex().c_str());
  std::fflush(stdout);
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  return 0;
}

/// pool-exporter ROUNDS PIECES BYTES: per round, a pool whose one block holds PIECES pieces of
/// BYTES, and PIECES separate raw allocations of BYTES (the baseline's, one driver allocation
/// each); piece or allocation i (counted over both, in print order) filled with pattern(i) or
/// pattern(kRawBase + i). Prints, per round, the pieces' handles, then the allocations' raw
/// handles; lives until stdin closes.
int pool_exporter_role(std::size_t rounds, std::size_t pieces, std::size_t bytes) {
  const raw_ipc raw;
  std::vector<pool> pools;
  std::vector<void*> separate;
  std::size_t i = 0;
  for (std::size_t r = 0; r < rounds; ++r) {
    pool_options o;
    o.initial_size = (pieces + 1) * bytes;
    pools.emplace_back(area(0), o);
    std::vector<std::string> lines;
    for (std::size_t k = 0; k < pieces; ++k, ++i) {
      void* x = pools.back().allocate(bytes);
      const auto v = pattern(i);
      copy(x, v.data(), v.size());
      lines.push_back(ipc::export_handle(x).to_hex());
    }
    if (pools.back().stats().driver_allocations != 1)
      throw error(errc::unknown, "bench ipc: the pieces of a round span more than one block");
    for (std::size_t k = 0; k < pieces; ++k, ++i) {
      separate.push_back(raw.malloc(bytes));
      const auto v = pattern(kRawBase + i);
      raw.copier()(separate.back(), v.data(), v.size());
      lines.push_back(raw.get_handle(separate.back()).hex());
    }
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
  }
  std::fflush(stdout);
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  return 0;
}

/// cold-export ORDER SETTLE / cold-import ORDER SETTLE I HEX J RAWHEX: both libraries made
/// ready, then the first export (of a new allocation each) or the first import (memarea:
/// handle HEX of memarea's buffer I; the baseline: raw handle RAWHEX of its buffer J) of this
/// process, timed; prints "MEMAREA RAW". ORDER: m (memarea first) or r; SETTLE: settled or
/// racing.
int cold_role(const std::string& role, const std::vector<std::string>& args) {
  const raw_ipc raw;
  buffer mine = area(0).allocate(kBytes);  // memarea ready
  void* theirs = raw.malloc();              // the runtime ready
  const bool memarea_first = args.at(0)[0] == 'm';
  // "settled": the program does a little work (5 ms) before its first IPC call, time in which
  // memarea's background preparation (lease, segment) finishes; otherwise the call races it.
  if (args.at(1) == "settled") std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double m = 0, r = 0;
  if (role == "cold-export") {
    auto mem = [&] { m = time_us([&] { (void)ipc::export_handle(mine.data()); }); };
    auto rawf = [&] { r = time_us([&] { (void)raw.get_handle(theirs); }); };
    if (memarea_first) mem(), rawf();
    else rawf(), mem();
  } else {
    const std::size_t i = std::stoul(args.at(2)), j = std::stoul(args.at(4));
    const ipc::handle h = ipc::handle::from_hex(args.at(3));
    const raw_handle native = raw_handle::from_hex(args.at(5));
    void* p = nullptr;
    void* q = nullptr;
    auto mem = [&] { m = time_us([&] { p = ipc::open(h, 0); }); };
    auto rawf = [&] { r = time_us([&] { q = raw.open(native); }); };
    if (memarea_first) mem(), rawf();
    else rawf(), mem();
    if (!holds(p, i) || !holds(q, kRawBase + j, raw.copier())) {
      std::printf("wrong bytes\n");  // the parent fails the case with this
      return 3;
    }
    ipc::close(p);
    raw.close(q);
  }
  raw.free(theirs);
  std::printf("%.3f %.3f\n", m, r);
  return 0;
}

}  // namespace

int run_child_role() {
  const char* role = std::getenv(kRoleEnv);
  if (!role) return -1;
  int rc = 0;
  try {
    std::vector<std::string> args;
    if (const char* a = std::getenv(kArgEnv)) {
      std::string word;
      for (char c : std::string(a) + " ") {
        if (c == ' ') {
          if (!word.empty()) args.push_back(word);
          word.clear();
        } else {
          word += c;
        }
      }
    }
    const std::string r = role;
    if (r == "exporter") rc = exporter_role(std::stoul(args.at(0)));
    else if (r == "pool-exporter")
      rc = pool_exporter_role(std::stoul(args.at(0)), std::stoul(args.at(1)),
                              std::stoul(args.at(2)));
    else rc = cold_role(r, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench ipc %s: %s\n", role, e.what());
    rc = 1;
  }
  std::fflush(nullptr);
  return rc;
}

}  // namespace memarea::cli::bench
