// What the MPI test programs share (mpi_test.cpp on libmemarea_mpi's public API,
// mpi_protocol_test.cpp on its internals): the failure list and CHECK, the verdict and owner
// files that run_mpi_test.sh reads, and the expectation of a collective_error.
#pragma once

#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/mpi.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace mpi_test {

namespace mm = memarea::mpi;

/// This process's rank in MPI_COMM_WORLD (set by main).
inline int g_rank = -1;
/// What failed so far; the verdict is PASS while it is empty.
inline std::vector<std::string> g_failures;

/// Writes text to $MEMAREA_MPI_TEST_RESULTS/name (nothing without the variable).
inline void write_file(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("MEMAREA_MPI_TEST_RESULTS");
  if (!dir) return;
  std::ofstream(std::string(dir) + "/" + name) << text << "\n";
}

/// Records this process's owner id (memarea::ipc::owner_id), once it has one (its first shared
/// object drew it), for the harness's check of /dev/shm.
inline void write_owner() {
  if (auto owner = memarea::ipc::owner_id()) {
    write_file(fmt::format("owner-{}", g_rank), fmt::format("{:016x}", owner));
  }
}

/// Reports the verdict; returns the process's exit status.
inline int verdict(const std::string& what) {
  write_owner();
  std::string text;
  if (g_failures.empty()) {
    text = "PASS " + what;
  } else {
    text = "FAIL " + what;
    for (auto& f : g_failures) text += "\n  " + f;
  }
  std::printf("rank %d: %s\n", g_rank, text.c_str());
  write_file(fmt::format("rank-{}", g_rank), text);
  return g_failures.empty() ? 0 : 1;
}

/// Runs f, expecting a collective_error; returns it (or a default one after a CHECK failure).
template <class F>
mm::collective_error expect_collective_error(F&& f, const char* what) {
  try {
    f();
  } catch (const mm::collective_error& e) {
    return e;
  } catch (const std::exception& e) {
    g_failures.push_back(fmt::format("{}: threw another exception: {}", what, e.what()));
    return mm::collective_error(memarea::errc::success, "", mm::failure::none, -2);
  }
  g_failures.push_back(fmt::format("{}: did not throw", what));
  return mm::collective_error(memarea::errc::success, "", mm::failure::none, -2);
}

}  // namespace mpi_test

/// Records a failure (file, line, the condition) unless cond holds.
#define CHECK(cond)                                                                        \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::mpi_test::g_failures.push_back(fmt::format("{}:{}: {}", __FILE__, __LINE__, #cond)); \
  } while (0)
