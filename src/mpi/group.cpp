// The node group: a private communicator, and steps that never wait past a deadline.
#include "group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sched.h>
#include <thread>
#include <unistd.h>

namespace memarea::mpi::detail {
namespace {

using clock = std::chrono::steady_clock;

/// The tag of memarea's step messages on its private communicator.
constexpr int kTag = 0x6d61;
/// The tag of node_comm()'s MPI_Comm_create_group on the private communicator (distinct from
/// kTag, so that its messages never match a step's).
constexpr int kCreateTag = 0x6d62;

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{} ms", d.count());
}

/// Waits a little between polls: spins first (a step of ranks that arrive together takes well
/// under a microsecond), then yields, then sleeps, so that a rank waiting for a late one leaves
/// the cores to the ranks that still work (CI oversubscribes them).
void back_off(clock::duration waited) {
  using namespace std::chrono_literals;
  if (waited < 200us) return;
  if (waited < 20ms) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(200us);
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 9) return s + fmt::format(", ... ({} in all)", ranks.size());
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}

/// FNV-1a.
std::uint64_t hash(std::uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return (h ^ 0xff) * 0x100000001b3ull;  // a separator, so that ("ab","c") != ("a","bc")
}

/// What names this rank's node: the host name and the kernel's boot id (so that two hosts with
/// the same name still differ), and the test split.
std::uint64_t node_key(long test_nodes, int rank) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  std::uint64_t h = hash(hash(0xcbf29ce484222325ull, host), boot);
  return hash(h, std::to_string(rank % test_nodes));
}

}  // namespace

comm_holder::~comm_holder() { reset(MPI_COMM_NULL); }

void comm_holder::reset(MPI_Comm c) noexcept {
  if (comm_ != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  comm_ = c;
}

void check_mpi(int code, const char* call, const std::string& step) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "?");
  throw collective_error(errc::unknown,
                         fmt::format("{}: {} failed with MPI error {} ({}); the communicator "
                                     "is unusable",
                                     step, call, code, text),
                         failure::mpi, -1);
}

void group::throw_mpi(int code, const char* call, const std::string& step) {
  broken = true;
  check_mpi(code, call, step);
  throw collective_error(errc::unknown, fmt::format("{}: {} failed", step, call), failure::mpi, -1);
}

bool group::wait(std::vector<MPI_Request>& requests, const std::string& step,
                 std::vector<int>* counts) {
  const auto start = clock::now();
  const auto deadline = start + timeout;  // timeout <= max_timeout: no overflow
  std::vector<int> done(requests.size());
  // Always with statuses: a request that failed (a receive truncated) is told by its status.
  std::vector<MPI_Status> statuses(requests.size());
  if (counts) counts->assign(requests.size(), -1);
  for (;;) {
    int count = 0;
    int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(),
                          statuses.data());
    if (rc == MPI_ERR_IN_STATUS) {
      // Some request failed while others may still be pending: the caller parks the buffers
      // (exchange and join do) before this reaches the user.
      for (int i = 0; i < count; ++i) {
        const MPI_Status& st = statuses[static_cast<std::size_t>(i)];
        if (st.MPI_ERROR == MPI_SUCCESS || st.MPI_ERROR == MPI_ERR_PENDING) continue;
        int cls = st.MPI_ERROR;
        if (MPI_Error_class(st.MPI_ERROR, &cls) != MPI_SUCCESS) cls = st.MPI_ERROR;
        broken = true;
        if (cls == MPI_ERR_TRUNCATE) {
          // Only a peer that is not a record sender of this version sends more than the
          // longest record: told like any malformed record.
          throw collective_error(
              errc::invalid_value,
              fmt::format("{}: rank {} sent a record longer than {} bytes: it runs another "
                          "version of memarea, or the message was damaged. The window or "
                          "buffers are unusable: destroy them",
                          step, st.MPI_SOURCE, max_record_bytes),
              failure::mismatch, st.MPI_SOURCE);
        }
        throw_mpi(st.MPI_ERROR, "a request of MPI_Testsome", step);
      }
    }
    if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Testsome", step);
    if (count == MPI_UNDEFINED) return true;  // every request has completed (all are null)
    for (int i = 0; counts && i < count; ++i) {
      // A receive's length is what its record is judged by (decode_record).
      int bytes = -1;
      if (MPI_Get_count(&statuses[static_cast<std::size_t>(i)], MPI_BYTE, &bytes) != MPI_SUCCESS ||
          bytes == MPI_UNDEFINED) {
        bytes = -1;
      }
      (*counts)[static_cast<std::size_t>(done[static_cast<std::size_t>(i)])] = bytes;
    }
    auto now = clock::now();
    if (now >= deadline) return false;
    back_off(now - start);
  }
}

group::group(MPI_Comm comm, std::chrono::milliseconds t) : timeout(t) {
  static const std::string step = "joining the node";
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw error(errc::invalid_value, initialized ? "MPI was finalized already"
                                                 : "MPI is not initialized: call MPI_Init first");
  }
  if (comm == MPI_COMM_NULL) throw error(errc::invalid_value, "comm is MPI_COMM_NULL");
  if (timeout.count() <= 0 || timeout > max_timeout) {
    throw error(errc::invalid_value,
                fmt::format("timeout {} ms is not in (0, {}] ms (about 116 days)",
                            timeout.count(), max_timeout.count()));
  }
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter", step);
  if (inter) throw error(errc::invalid_value, "comm is an intercommunicator");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank", step);
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size", step);
  hooks = test_hooks::parse();
  maybe_die(phase::arrive);

  // The arrival check: a nonblocking duplicate completes only once every rank has called it,
  // and a deadline bounds it. Its output is written when it completes, which may be after a
  // timeout: it lives on the heap and is let go (leaked) then, never freed under MPI's feet.
  // Every later step is nonblocking and deadline-bounded too: a rank that arrives after the
  // others gave up completes this one but then times out at the next, never blocks.
  auto world = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Comm_idup(comm, world.get(), req.data()), "MPI_Comm_idup", step);
  bool arrived = false;
  try {
    arrived = wait(req, step);
  } catch (...) {
    (void)world.release();  // MPI may still write the duplicate's handle
    throw;
  }
  if (!arrived) {
    broken = true;
    (void)world.release();
    throw collective_error(
        errc::unknown,
        fmt::format("{}: not every one of the communicator's {} ranks arrived within {} (a rank "
                    "died, is stuck, or does not make this collective call); the communicator "
                    "is unusable",
                    step, size, duration_text(timeout)),
        failure::timeout, -1);
  }
  priv.reset(*world);
  MPI_Comm_set_errhandler(priv.get(), MPI_ERRORS_RETURN);
  try {
    join(comm);
  } catch (...) {
    // The group's destructor does not run for a constructor that throws; its holders do.
    if (broken) priv.abandon();
    throw;
  }
}

void group::join(MPI_Comm comm) {
  static const std::string step = "joining the node";
  std::vector<MPI_Request> req(1);

  // The node: every rank's node key (host, boot id, test split) and the state of its test
  // settings, gathered without blocking. MEMAREA_MPI_TEST_NODES=k splits by rank modulo k, so
  // that CI runs the path of several nodes on one machine.
  // MEMAREA_MPI_TEST_VERSION_RANK: this rank speaks the next version, as a newer memarea would.
  const std::uint32_t version = protocol_version + (hooks.version_rank == rank ? 1 : 0);
  join_record me;
  me.key = node_key(hooks.nodes, rank);
  me.version = version;
  if (!hooks.error.empty()) me.status = static_cast<std::int32_t>(errc::invalid_value);
  using wire = std::array<unsigned char, join_record_bytes>;
  auto sent = std::make_unique<wire>(encode_join(me));
  auto all = std::make_unique<std::vector<wire>>(static_cast<std::size_t>(size));
  int rc = MPI_Iallgather(sent->data(), join_record_bytes, MPI_BYTE, all->data(),
                          join_record_bytes, MPI_BYTE, priv.get(), req.data());
  if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Iallgather", step);
  bool gathered = false;
  try {
    gathered = wait(req, step);
  } catch (...) {
    (void)sent.release(), (void)all.release();  // the allgather may still use them
    throw;
  }
  if (!gathered) {
    broken = true;
    (void)sent.release(), (void)all.release();
    throw collective_error(errc::unknown,
                           fmt::format("{}: not every rank arrived within {} to map the nodes "
                                       "(a rank died, is stuck, arrived too late or does not "
                                       "make this collective call); the communicator is "
                                       "unusable",
                                       step, duration_text(timeout)),
                           failure::timeout, -1);
  }
  // Every rank sees the same records, so every rank throws what follows alike. Ranks of
  // different protocol versions meet here, before anything is allocated or opened: each one
  // fails naming the first rank whose version differs from its own, and both versions.
  std::vector<join_record> joined(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    auto d = decode_join((*all)[static_cast<std::size_t>(r)], version);
    if (d.why == refusal::bad_version) {
      throw collective_error(errc::invalid_value,
                             fmt::format("{}: rank {} speaks another version of memarea's MPI "
                                         "protocol than this rank (rank {}) ({}: {}): every rank "
                                         "must run the same version of libmemarea_mpi",
                                         step, r, rank, to_string(d.why), d.error),
                             failure::mismatch, r);
    }
    if (!d.ok()) {
      throw collective_error(errc::invalid_value,
                             fmt::format("{}: rank {} sent a malformed record ({}: {}): it runs "
                                         "another version of memarea, or the message was "
                                         "damaged", step, r, to_string(d.why), d.error),
                             failure::rank, r);
    }
    joined[static_cast<std::size_t>(r)] = d.value;
  }
  for (int r = 0; r < size; ++r) {
    if (joined[static_cast<std::size_t>(r)].status == 0) continue;
    std::string mine = r == rank ? ": " + hooks.error : " (that rank's error names it)";
    throw collective_error(errc::invalid_value,
                           fmt::format("{}: rank {}'s test settings (MEMAREA_MPI_TEST_*) are "
                                       "malformed{}",
                                       step, r, mine),
                           failure::rank, r);
  }
  node_of.assign(static_cast<std::size_t>(size), -1);
  for (int r = 0; r < size; ++r) {
    const auto key = joined[static_cast<std::size_t>(r)].key;
    for (int f = 0; f <= r; ++f) {
      if (joined[static_cast<std::size_t>(f)].key == key) {
        node_of[static_cast<std::size_t>(r)] = f;
        break;
      }
    }
    if (key == me.key) {
      if (r == rank) node_rank = static_cast<int>(node_ranks.size());
      node_ranks.push_back(r);
    }
  }
  node_size = static_cast<int>(node_ranks.size());
  if (MPI_Comm_get_errhandler(comm, &user_handler) != MPI_SUCCESS) {
    user_handler = MPI_ERRHANDLER_NULL;
  }
}

group::~group() {
  if (broken) {
    priv.abandon();
    node_user.abandon();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && user_handler != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&user_handler);
}

void group::maybe_die(phase p) const {
  if (hooks.kill_rank == rank && hooks.kill_at == p) std::raise(SIGKILL);
}

MPI_Comm group::user_comm() {
  if (node_user.get() != MPI_COMM_NULL) return node_user.get();
  static const std::string step = "node_comm";
  if (broken) {
    throw collective_error(errc::unknown, "node_comm: an earlier collective failed; the "
                                          "communicator is unusable", failure::timeout, -1);
  }
  // MPI_Comm_create_group blocks until every node rank calls it. A deadline-bounded step
  // first: a rank that left the sequence (its object failed, it refused a record, it died)
  // surfaces here as a timeout instead of a hang. Once this step completed, every node rank
  // has entered node_comm().
  barrier(step_kind::node_comm, step);
  MPI_Group all = MPI_GROUP_NULL, node = MPI_GROUP_NULL;
  int rc = MPI_Comm_group(priv.get(), &all);
  if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Comm_group", step);
  rc = MPI_Group_incl(all, node_size, node_ranks.data(), &node);
  MPI_Group_free(&all);
  if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Group_incl", step);
  MPI_Comm made = MPI_COMM_NULL;
  rc = MPI_Comm_create_group(priv.get(), node, kCreateTag, &made);
  MPI_Group_free(&node);
  if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Comm_create_group", step);
  node_user.reset(made);
  if (user_handler != MPI_ERRHANDLER_NULL) MPI_Comm_set_errhandler(made, user_handler);
  return made;
}

std::vector<record> group::exchange(const record& mine, step_kind kind, const std::string& step,
                                    std::optional<collective_error>* refused) {
  // Point to point rather than an allgather: on a timeout, the receives that did not complete
  // name the ranks that never sent. The buffers are on the heap and let go after a timeout: a
  // late rank's message may still land in them.
  if (broken) {
    throw collective_error(errc::unknown,
                           fmt::format("{}: an earlier collective failed; the communicator is "
                                       "unusable", step),
                           failure::timeout, -1);
  }
  // Records travel in their wire form (mpi/record.hpp): what arrives is judged by
  // decode_record, with the length MPI received, before anything of it is used.
  struct buffers {
    std::vector<unsigned char> sent;
    std::vector<unsigned char> received;  ///< max_record_bytes for each node rank
  };
  record me = mine;
  me.rank = rank;
  me.kind = static_cast<std::int32_t>(kind);
  me.seq = seq++;
  auto b = std::make_unique<buffers>();
  b->sent = encode_record(me);
  const auto n = static_cast<std::size_t>(node_size);
  b->received.resize(n * max_record_bytes);
  std::vector<MPI_Request> req;
  req.reserve(2 * n);
  std::vector<int> source;  // the node rank of each receive (receives first)
  std::vector<int> counts;
  bool completed = false;
  try {
    for (int r = 0; r < node_size; ++r) {
      if (r == node_rank) continue;
      req.push_back(MPI_REQUEST_NULL);
      source.push_back(r);
      int rc = MPI_Irecv(b->received.data() + static_cast<std::size_t>(r) * max_record_bytes,
                         static_cast<int>(max_record_bytes), MPI_BYTE,
                         node_ranks[static_cast<std::size_t>(r)], kTag, priv.get(), &req.back());
      if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Irecv", step);
    }
    for (int r = 0; r < node_size; ++r) {
      if (r == node_rank) continue;
      req.push_back(MPI_REQUEST_NULL);
      int rc = MPI_Isend(b->sent.data(), static_cast<int>(b->sent.size()), MPI_BYTE,
                         node_ranks[static_cast<std::size_t>(r)], kTag, priv.get(), &req.back());
      if (rc != MPI_SUCCESS) throw_mpi(rc, "MPI_Isend", step);
    }
    completed = wait(req, step, &counts);
  } catch (...) {
    // An MPI error (a posting that failed partway, a receive truncated) while other requests
    // may still be pending: MPI may yet write into the receive buffers and read the send
    // buffer, so they are let go (leaked), as after a timeout. The group is broken: no MPI
    // call touches its communicator again.
    broken = true;
    (void)b.release();
    throw;
  }
  if (!completed) {
    broken = true;
    std::vector<int> missing;
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (req[i] != MPI_REQUEST_NULL) missing.push_back(node_ranks[static_cast<std::size_t>(source[i])]);
    }
    (void)b.release();
    int first = missing.empty() ? -1 : missing.front();
    throw collective_error(
        errc::unknown,
        fmt::format("{}: rank{} {} of this node sent nothing within {} (dead, stuck, or not "
                    "making this collective call); the communicator is unusable",
                    step, missing.size() == 1 ? "" : "s", ranks_text(missing),
                    duration_text(timeout)),
        failure::timeout, first);
  }
  // Every message of the step was matched. Each record is decoded whole first: a malformed
  // one (another protocol version, a damaged message) fails this rank before any of its fields
  // is used. The sender sent every rank the same bytes, so every receiver refuses it alike.
  std::vector<record> all(n);
  std::vector<bool> kept_back(n, false);  // refused into *refused: no kind or number to compare
  all[static_cast<std::size_t>(node_rank)] = me;
  for (std::size_t i = 0; i < source.size(); ++i) {
    const auto r = static_cast<std::size_t>(source[i]);
    const std::size_t got = counts[i] < 0 ? 0 : static_cast<std::size_t>(counts[i]);
    auto d = decode_record({b->received.data() + r * max_record_bytes, got},
                           record_limits{size, node_ranks[r]});
    if (!d.ok()) {
      collective_error e(
          errc::invalid_value,
          d.why == refusal::bad_version
              ? fmt::format("{}: {} sent a record of another version of memarea's MPI protocol "
                            "({}: {}): every rank must run the same version of libmemarea_mpi. "
                            "The window or buffers are unusable: destroy them",
                            step, who(static_cast<int>(r)), printable(to_string(d.why)),
                            printable(d.error))
              : fmt::format("{}: {} sent a malformed record ({}: {}): it runs another version "
                            "of memarea, or the message was damaged. The window or buffers are "
                            "unusable: destroy them",
                            step, who(static_cast<int>(r)), printable(to_string(d.why)),
                            printable(d.error)),
          failure::mismatch, node_ranks[r]);
      if (refused) {
        // The caller tells the others in its next step (make_imports' confirm step): every
        // message of this one was matched, so the sequence goes on.
        if (!*refused) refused->emplace(std::move(e));
        kept_back[r] = true;
        continue;
      }
      broken = true;  // this rank leaves the step sequence: no further step can agree
      throw e;
    }
    all[r] = std::move(d.value);
  }
  // The ranks agree only if they made the same step.
  for (int r = 0; r < node_size; ++r) {
    const record& theirs = all[static_cast<std::size_t>(r)];
    if (kept_back[static_cast<std::size_t>(r)]) continue;
    if (theirs.kind == me.kind && theirs.seq == me.seq) continue;
    broken = true;  // the ranks' objects are out of step: no further step can agree
    auto their_kind = static_cast<step_kind>(theirs.kind);
    throw collective_error(
        errc::invalid_value,
        fmt::format("{}: {} made another collective call: {} (its step {}) while this rank "
                    "(rank {}) was {} (step {}); every rank of the node must make the same "
                    "collective calls in the same order. The window or buffers are unusable: "
                    "destroy them",
                    step, who(r), describe(their_kind), theirs.seq, rank, describe(kind),
                    me.seq),
        failure::mismatch, node_ranks[static_cast<std::size_t>(r)]);
  }
  return all;
}

void group::barrier(step_kind kind, const std::string& step) { (void)exchange(record{}, kind, step); }

void group::throw_first_failure(const std::vector<record>& all, const std::string& step) const {
  int first = -1, failed = 0;
  for (int r = 0; r < node_size; ++r) {
    if (all[static_cast<std::size_t>(r)].status == 0) continue;
    if (first < 0) first = r;
    ++failed;
  }
  if (first < 0) return;
  const record& f = all[static_cast<std::size_t>(first)];
  auto code = status_of(f.status);
  throw collective_error(
      code,
      fmt::format("{} failed on {}{}: {}: {}", step, who(first),
                  failed > 1 ? fmt::format(" (and on {} more)", failed - 1) : std::string(),
                  to_string(code), printable(f.message)),
      failure::rank, node_ranks[static_cast<std::size_t>(first)]);
}

std::string group::who(int r) const {
  return fmt::format("rank {} (node rank {})", node_ranks[static_cast<std::size_t>(r)], r);
}

void group::check_node_rank(int r, const char* what) const {
  if (r >= 0 && r < node_size) return;
  throw error(errc::invalid_value,
              fmt::format("{}: node rank {} is outside this node's {} ranks (node ranks 0-{}: "
                          "ranks {} of the communicator); ranks of other nodes are never "
                          "reachable (node_rank_of maps a rank)",
                          what, r, node_size, node_size - 1, ranks_text(node_ranks)));
}

int group::node_rank_of(int r) const {
  if (r < 0 || r >= size) {
    throw error(errc::invalid_value,
                fmt::format("node_rank_of: rank {} is not a rank of the communicator (size {})",
                            r, size));
  }
  if (node_of[static_cast<std::size_t>(r)] != node_of[static_cast<std::size_t>(rank)]) {
    throw error(errc::invalid_value,
                fmt::format("node_rank_of: rank {} is on another node than rank {} (whose node "
                            "holds ranks {}); memory is shared only within a node",
                            r, rank, ranks_text(node_ranks)));
  }
  auto it = std::find(node_ranks.begin(), node_ranks.end(), r);
  return static_cast<int>(it - node_ranks.begin());
}

}  // namespace memarea::mpi::detail
