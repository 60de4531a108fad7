// libmemarea_mpi's test-only settings (MEMAREA_MPI_TEST_*; docs/mpi.md, "Testing"): a rank
// that kills itself at a chosen point, damages its handles or its records, speaks another
// protocol version, or a machine split into several nodes. Environment variables, not calls:
// they must reach every rank of an mpirun job, programs that are no test included (the MPI
// tests run the halo example split into two nodes). Each collective call that makes a group
// reads them once.
#pragma once

#include <string>

namespace memarea::mpi::detail {

/// The points where a test may make this rank raise SIGKILL on itself
/// (MEMAREA_MPI_TEST_KILL_RANK and MEMAREA_MPI_TEST_KILL_AT; docs/mpi.md, "Testing").
enum class phase { arrive, exchange, open, fence, destroy };

/// The test-only settings (MEMAREA_MPI_TEST_*), parsed once per collective call that makes a
/// group. A malformed value never throws here: it is kept in `error` and fails every rank of
/// the call alike (the group's first exchange carries it).
struct test_hooks {
  long nodes = 1;              ///< MEMAREA_MPI_TEST_NODES: split each node by rank modulo this
  long kill_rank = -1;         ///< MEMAREA_MPI_TEST_KILL_RANK (-1: none)
  phase kill_at = phase::exchange;  ///< MEMAREA_MPI_TEST_KILL_AT
  long fail_open_rank = -1;    ///< MEMAREA_MPI_TEST_FAIL_OPEN_RANK (-1: none)
  long bad_record_rank = -1;   ///< MEMAREA_MPI_TEST_BAD_RECORD_RANK (-1: none)
  /// MEMAREA_MPI_TEST_VERSION_RANK (-1: none): that rank's join speaks protocol_version + 1,
  /// as a rank of a newer memarea would, and expects it of the others.
  long version_rank = -1;
  std::string error;           ///< non-empty: what is malformed (then the settings are unused)
  /// Reads the environment now.
  static test_hooks parse();
};

}  // namespace memarea::mpi::detail
