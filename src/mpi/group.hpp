// The ranks of one node as libmemarea_mpi sees them: a private duplicate of the user's
// communicator, and the one way its collectives talk after the node is known: a step, an
// exchange of records (mpi/record.hpp) among the node's ranks that carries the step's kind and
// sequence number, bounded by a deadline so that a dead or absent rank fails the others instead
// of blocking them. No blocking MPI call follows a deadline-bounded one (node_comm()'s
// MPI_Comm_create_group excepted: it follows a bounded step of its own, and blocks only if a
// rank dies between the two).
#pragma once

#include "record.hpp"
#include "test_hooks.hpp"

#include <memarea/mpi.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memarea::mpi::detail {

/// An MPI communicator that is freed when its holder goes (unless MPI was finalized), so that
/// a constructor that throws midway leaks none; abandon() lets go of one that must not be
/// touched any more (a collective on it timed out).
class comm_holder {
 public:
  comm_holder() = default;
  ~comm_holder();
  comm_holder(const comm_holder&) = delete;
  comm_holder& operator=(const comm_holder&) = delete;
  /// The communicator (MPI_COMM_NULL when none).
  MPI_Comm get() const noexcept { return comm_; }
  /// Takes ownership of c (freeing the one held before).
  void reset(MPI_Comm c) noexcept;
  /// Forgets the communicator without freeing it.
  void abandon() noexcept { comm_ = MPI_COMM_NULL; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// This rank's node: made collectively over a user communicator.
struct group {
  /// Collective over comm: the arrival check (MPI_Comm_idup), then a nonblocking allgather of
  /// every rank's node key (host name and boot id, and the test split MEMAREA_MPI_TEST_NODES)
  /// and test-settings status, each bounded by the timeout. Throws invalid_value at once for
  /// bad arguments, collective_error(timeout) for a rank that did not arrive,
  /// collective_error(mismatch) on every rank for a rank of another protocol version (naming
  /// it and both versions), collective_error(rank) on every rank alike for a rank with
  /// malformed test settings or a malformed join record.
  group(MPI_Comm comm, std::chrono::milliseconds timeout);
  /// Frees the communicators unless the group is broken (then MPI may not be called on them).
  ~group();
  group(const group&) = delete;
  group& operator=(const group&) = delete;

  /// One step: every node rank's record, ordered by node rank (this rank's own included).
  /// Collective over the node. Throws collective_error(timeout) naming the ranks that sent
  /// nothing, collective_error(mismatch) naming a rank whose step had another kind or number
  /// or whose record decode_record refused (or that sent more than max_record_bytes).
  /// With `refused`, a record that decode_record refuses does not throw: the first refusal is
  /// kept there (its entry stays a default record) and the group stays usable, so that the
  /// caller can tell the other ranks in a next step (make_imports' confirm step).
  /// On any failure after the first request is posted, the step's buffers are leaked, never
  /// freed while MPI may still write into them.
  std::vector<record> exchange(const record& mine, step_kind kind, const std::string& step,
                               std::optional<collective_error>* refused = nullptr);
  /// A step that carries nothing but its kind: waits for every rank of the node.
  void barrier(step_kind kind, const std::string& step);
  /// Throws collective_error(rank) for the first record that failed, on every rank alike; the
  /// message names its rank and, when several failed, how many.
  void throw_first_failure(const std::vector<record>& all, const std::string& step) const;
  /// The caller's node communicator, made on the first call: a deadline-bounded step
  /// (step_kind::node_comm), so that a rank that left the sequence fails it with a timeout,
  /// then MPI_Comm_create_group over the node (blocking, with no deadline: it blocks only if a
  /// rank dies between the two).
  MPI_Comm user_comm();
  /// Raises SIGKILL when the test settings name this rank and phase p.
  void maybe_die(phase p) const;

  /// "rank 2 (node rank 1)".
  std::string who(int node_rank) const;
  /// Throws invalid_value unless 0 <= node_rank < node_size, naming the node's ranks.
  void check_node_rank(int node_rank, const char* what) const;
  /// The node rank of a rank of the user's communicator; invalid_value for other nodes.
  int node_rank_of(int rank) const;

  std::chrono::milliseconds timeout;
  test_hooks hooks;             ///< the test settings as this call read them
  int rank = -1;                ///< in the user's communicator (and in `priv`)
  int size = 0;                 ///< of the user's communicator
  int node_rank = -1;
  int node_size = 0;
  std::vector<int> node_ranks;  ///< the user-communicator rank of each node rank
  std::vector<int> node_of;     ///< for every rank of the user's communicator: its node's first rank
  std::uint64_t seq = 0;        ///< the next step's sequence number
  comm_holder priv;             ///< duplicate of the user's communicator: memarea's messages
  comm_holder node_user;        ///< node_comm(): the caller's, made on first use
  MPI_Errhandler user_handler = MPI_ERRHANDLER_NULL;  ///< the user communicator's, for node_user
  /// Set when a step timed out, MPI failed or the ranks' steps differed: MPI must not be called
  /// on the communicators any more.
  bool broken = false;

 private:
  /// Waits for requests until the deadline; returns false on timeout (the requests left are
  /// those not completed). Throws collective_error(mpi) on an MPI error, and
  /// collective_error(mismatch) naming the sender of a receive that MPI truncated (more than
  /// max_record_bytes); both break the group. With `counts`, the
  /// bytes each request received go to (*counts)[i] (-1 when MPI cannot tell).
  bool wait(std::vector<MPI_Request>& requests, const std::string& step,
            std::vector<int>* counts = nullptr);
  /// The constructor's steps after the arrival check: the node map.
  void join(MPI_Comm comm);
  [[noreturn]] void throw_mpi(int code, const char* call, const std::string& step);
};

/// Throws collective_error(mpi) when code is not MPI_SUCCESS.
void check_mpi(int code, const char* call, const std::string& step);

}  // namespace memarea::mpi::detail
