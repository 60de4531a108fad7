// share() and shared_window: IPC handles exchanged within a node, opened in every process.
#include "shared.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/ipc.hpp>
#include <memarea/peer.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

namespace memarea::mpi {

const char* to_string(failure f) noexcept {
  switch (f) {
    case failure::none: return "none";
    case failure::rank: return "rank";
    case failure::timeout: return "timeout";
    case failure::mpi: return "mpi";
    case failure::mismatch: return "mismatch";
  }
  return "unknown";
}

namespace detail {
namespace {

/// This process's ordinal of the device with PCI bus id `bus` (what names a device across
/// processes whose device lists differ, e.g. under CUDA_VISIBLE_DEVICES); else `ordinal` when
/// the bus id is unknown (sim) and the ordinal exists here; else -1 (not visible here).
int local_device(const std::string& bus, int ordinal) {
  int n = device_count();
  if (!bus.empty()) {
    for (int d = 0; d < n; ++d) {
      if (get_device_properties(d).pci_bus_id == bus) return d;
    }
    return -1;
  }
  return ordinal >= 0 && ordinal < n ? ordinal : -1;
}

std::string bus_of(int device) {
  try {
    return get_device_properties(device).pci_bus_id;
  } catch (const error&) {
    return {};
  }
}

}  // namespace

imports::~imports() { close_all(); }

std::size_t checked_peer_size(std::uint64_t claimed, const allocation_info& mapped,
                              const void* p, const std::string& who) {
  const auto* base = static_cast<const char*>(mapped.base);
  const auto* at = static_cast<const char*>(p);
  if (at < base || at >= base + mapped.size) {
    throw error(errc::invalid_handle,
                fmt::format("{}'s memory: the opened pointer {} lies outside the mapping [{}, "
                            "+{} bytes) that memarea knows", who, p, mapped.base, mapped.size));
  }
  const auto room = static_cast<std::uint64_t>(base + mapped.size - at);
  if (claimed == 0 || claimed > room) {
    throw error(errc::invalid_handle,
                fmt::format("{} claims {} bytes, but the memory it shared holds {} bytes from "
                            "its pointer to its end", who, claimed, room));
  }
  return static_cast<std::size_t>(claimed);
}

void imports::close_all() noexcept {
  for (std::size_t r = 0; r < ptrs.size(); ++r) {
    if (!opened[r]) continue;
    try {
      ipc::close(ptrs[r]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memarea mpi: closing node rank %zu's memory: %s\n", r, e.what());
    }
    opened[r] = false;
  }
}

std::unique_ptr<imports> make_imports(MPI_Comm comm, const options& o, const char* what,
                                      std::optional<std::size_t> window_bytes,
                                      const std::function<const void*(const group&)>& local) {
  auto im = std::make_unique<imports>();
  im->g = std::make_unique<group>(comm, o.timeout);
  group& g = *im->g;
  const auto n = static_cast<std::size_t>(g.node_size);
  const auto me = static_cast<std::size_t>(g.node_rank);
  im->ptrs.assign(n, nullptr);
  im->sizes.assign(n, 0);
  im->devices.assign(n, -1);
  im->access.assign(n, false);
  im->opened.assign(n, false);

  // 1. This rank's memory and its handle; a failure travels to every rank in the exchange.
  record mine;
  mine.requested = window_bytes.value_or(0);
  std::string my_bus;
  try {
    const void* p = local(g);
    allocation_info info = lookup(p);
    ipc::handle h = ipc::export_handle(p);
    static_assert(sizeof h.bytes == handle_bytes);
    mine.set_handle(h.bytes);
    mine.device = info.device;
    mine.size = static_cast<const char*>(info.base) + info.size - static_cast<const char*>(p);
    im->ptrs[me] = const_cast<void*>(p);
    my_bus = bus_of(info.device);
  } catch (const error& e) {
    mine.fail(e.status(), e.message());
  } catch (const std::exception& e) {
    mine.fail(errc::unknown, e.what());
  }
  // The bus id rides in the message field of a record that succeeded.
  if (mine.status == 0) mine.set_message(my_bus);
  g.maybe_die(phase::exchange);
  // share() has a step kind of its own: a rank calling share() against one making a window
  // fails both as a mismatch, whatever the sizes.
  auto all = g.exchange(mine, window_bytes ? step_kind::handles : step_kind::share_handles,
                        fmt::format("{}: exchanging handles", what));
  g.throw_first_failure(all, fmt::format("{}: sharing memory", what));
  // A window's size must agree within the node (every rank sees the same records: all throw
  // alike, before anything was opened).
  for (std::size_t r = 1; window_bytes && r < n; ++r) {
    if (all[r].requested == all[0].requested) continue;
    throw collective_error(
        errc::invalid_value,
        fmt::format("{}: bytes_per_rank differs within the node: {} asked for {} bytes, {} for "
                    "{}; every rank must pass the same",
                    what, g.who(int(r)), all[r].requested, g.who(0), all[0].requested),
        failure::rank, g.node_ranks[r]);
  }

  // 2. Every other rank's memory, opened on this rank's device where that device can reach it
  // (lazy peer access), else on the memory's own device, where memarea::copy stages.
  const int my_device = mine.device;
  const long broken_rank = g.hooks.fail_open_rank;
  record result;
  for (std::size_t r = 0; r < n; ++r) {
    const record& rec = all[r];
    const std::string& bus = rec.message;
    if (r == me) {
      im->sizes[r] = rec.size;
      im->devices[r] = my_device;
      im->access[r] = true;
      continue;
    }
    try {
      int theirs = local_device(bus, rec.device);
      im->devices[r] = theirs;
      bool reach = theirs < 0 || theirs == my_device || peer::can_access(my_device, theirs);
      int open_on = reach ? my_device : theirs;
      ipc::handle h;
      std::memcpy(h.bytes.data(), rec.handle.data(), h.bytes.size());
      // MEMAREA_MPI_TEST_FAIL_OPEN_RANK: a real open of a damaged handle (its checksum no
      // longer matches), so that the test sees memarea's own refusal travel to every rank.
      if (broken_rank == g.rank) h.bytes[64] ^= 0xff;
      im->ptrs[r] = ipc::open(h, open_on, ipc::lazy_enable_peer_access);
      im->opened[r] = true;
      im->access[r] = reach;
      // What the peer claims is checked against what was opened.
      im->sizes[r] = checked_peer_size(rec.size, lookup(im->ptrs[r]), im->ptrs[r], g.who(int(r)));
    } catch (const error& e) {
      result.fail(e.status(), fmt::format("opening {}'s memory on device {}: {}", g.who(int(r)),
                                          my_device, e.message()));
      break;
    } catch (const std::exception& e) {
      result.fail(errc::unknown, fmt::format("opening {}'s memory: {}", g.who(int(r)), e.what()));
      break;
    }
  }
  g.maybe_die(phase::open);
  // MEMAREA_MPI_TEST_BAD_RECORD_RANK: a record every receiver refuses (a device in a record
  // that shares nothing), so that the test sees the confirm step fail every rank alike.
  if (g.hooks.bad_record_rank == g.rank) result.device = 0;
  // A record refused here fails only its receivers; its sender saw nothing wrong. The confirm
  // step tells every rank, so that the constructor fails everywhere, not only on them (the
  // sender would keep a window that maps memory they free).
  std::optional<collective_error> refused;
  auto results = g.exchange(result, step_kind::opens, fmt::format("{}: reporting the opens", what),
                            &refused);
  record verdict;
  if (refused) verdict.fail(errc::invalid_value, refused->message());
  auto verdicts = g.exchange(verdict, step_kind::confirm,
                             fmt::format("{}: confirming the opens", what));
  bool failed = refused.has_value();
  for (const auto& rr : results) failed |= rr.status != 0;
  for (const auto& rr : verdicts) failed |= rr.status != 0;
  if (failed) {
    // Undo: every rank closes what it opened, and waits until all have, before any of them
    // frees its memory (the caller frees after this throws).
    im->close_all();
    g.barrier(step_kind::undo, fmt::format("{}: closing after a failed open", what));
    if (refused) throw *refused;
    g.throw_first_failure(results, fmt::format("{}: opening the node's memory", what));
    // Only a refusal elsewhere is left: failure::mismatch, as on the rank that refused.
    for (std::size_t r = 0; r < n; ++r) {
      if (verdicts[r].status == 0) continue;
      throw collective_error(
          errc::invalid_value,
          fmt::format("{}: {} refused a record of the opens step: {}", what, g.who(int(r)),
                      printable(verdicts[r].message)),
          failure::mismatch, g.node_ranks[r]);
    }
  }
  return im;
}

void close_imports(imports& im, const char* what) {
  im.close_all();
  im.g->maybe_die(phase::destroy);
  im.g->barrier(step_kind::close, fmt::format("{}: waiting until every rank has closed", what));
}

}  // namespace detail

// --- node_view ----------------------------------------------------------------------------------

node_view::node_view(const char* name) noexcept : name_(name) {}
node_view::node_view(const char* name, std::unique_ptr<detail::imports> i) noexcept
    : imports_(std::move(i)), name_(name) {}
node_view::~node_view() = default;
node_view::node_view(node_view&&) noexcept = default;
node_view& node_view::operator=(node_view&& o) noexcept {
  imports_ = std::move(o.imports_);  // the name stays: it is the class's
  return *this;
}
void node_view::adopt(std::unique_ptr<detail::imports> i) noexcept { imports_ = std::move(i); }

detail::imports& node_view::need(const char* call) const {
  if (!imports_) {
    throw error(errc::invalid_value, fmt::format("{}::{}: the object is empty", name_, call));
  }
  return *imports_;
}

void* node_view::memory_of(int r, const char* call) const {
  auto& im = need(call);
  im.g->check_node_rank(r, fmt::format("{}::{}", name_, call).c_str());
  return im.ptrs[static_cast<std::size_t>(r)];
}

int node_view::device_of(int r) const {
  auto& im = need("device_of");
  im.g->check_node_rank(r, fmt::format("{}::device_of", name_).c_str());
  return im.devices[static_cast<std::size_t>(r)];
}
bool node_view::can_access(int r) const {
  auto& im = need("can_access");
  im.g->check_node_rank(r, fmt::format("{}::can_access", name_).c_str());
  return im.access[static_cast<std::size_t>(r)];
}
int node_view::node_rank() const { return need("node_rank").g->node_rank; }
int node_view::node_size() const { return need("node_size").g->node_size; }
int node_view::node_rank_of(int rank) const { return need("node_rank_of").g->node_rank_of(rank); }
int node_view::rank_of(int r) const {
  auto& im = need("rank_of");
  im.g->check_node_rank(r, fmt::format("{}::rank_of", name_).c_str());
  return im.g->node_ranks[static_cast<std::size_t>(r)];
}
MPI_Comm node_view::node_comm() const { return need("node_comm").g->user_comm(); }

void node_view::step(int kind, const char* call) {
  auto& im = need(call);
  im.g->maybe_die(detail::phase::fence);
  // group::barrier refuses a broken group.
  im.g->barrier(static_cast<detail::step_kind>(kind), fmt::format("{}::{}", name_, call));
}

void node_view::close_imports(const char* call) {
  if (!imports_) return;
  auto im = std::move(imports_);  // empty afterwards, whatever happens
  const std::string what = fmt::format("{}::{}", name_, call);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    // No MPI call is allowed any more (an object that outlived MPI_Finalize): close what this
    // process opened; memarea defers the peers' frees while it still maps them.
    im->g->broken = true;
    im->close_all();
    throw error(errc::invalid_value, fmt::format("{}: MPI was finalized first; this rank closed "
                                                 "its imports without waiting for the others",
                                                 what));
  }
  if (im->g->broken) {
    im->close_all();
    return;
  }
  detail::close_imports(*im, what.c_str());
}

// --- shared_buffers -----------------------------------------------------------------------------

shared_buffers::shared_buffers() noexcept : node_view("shared_buffers") {}
shared_buffers::shared_buffers(std::unique_ptr<detail::imports> i) noexcept
    : node_view("shared_buffers", std::move(i)) {}
shared_buffers::shared_buffers(shared_buffers&&) noexcept = default;
shared_buffers& shared_buffers::operator=(shared_buffers&& o) noexcept {
  if (this != &o) {
    if (*this) {
      try {
        close();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "memarea mpi: closing shared buffers: %s\n", e.what());
      }
    }
    node_view::operator=(std::move(o));
  }
  return *this;
}
shared_buffers::~shared_buffers() {
  if (!*this) return;
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memarea mpi: closing shared buffers: %s\n", e.what());
  }
}

void* shared_buffers::get(int r) const { return memory_of(r, "get"); }
std::size_t shared_buffers::size(int r) const {
  auto& im = need("size");
  im.g->check_node_rank(r, "shared_buffers::size");
  return im.sizes[static_cast<std::size_t>(r)];
}
void shared_buffers::barrier() { step(static_cast<int>(detail::step_kind::barrier), "barrier"); }
void shared_buffers::close() { close_imports("close"); }

shared_buffers share(MPI_Comm comm, const void* buffer, const options& o) {
  auto im = detail::make_imports(comm, o, "share", std::nullopt, [&](const detail::group&) -> const void* {
    if (!buffer) throw error(errc::invalid_value, "share: buffer is NULL");
    return buffer;
  });
  return shared_buffers(std::move(im));
}

// --- shared_window ------------------------------------------------------------------------------

namespace {

/// The allocation of a window's segment from area a, which must hand out device memory.
std::function<void*(int)> from_area(const area& a, std::size_t bytes) {
  return [a, bytes](int) {
    if (a.kind() != memory_kind::device) {
      throw error(errc::not_supported,
                  fmt::format("the area hands out {} memory; a window needs device memory (area "
                              "flags 0, or a pool of such an area)",
                              memarea::to_string(a.kind())));
    }
    return a.mmap(bytes);
  };
}

}  // namespace

shared_window::shared_window(MPI_Comm comm, std::size_t bytes, const options& o)
    : shared_window(
          comm, bytes,
          [bytes, o](int node_rank) {
            if (o.device < -1) {
              throw error(errc::invalid_device,
                          fmt::format("options.device {} is neither -1 (node rank % device "
                                      "count) nor a device ordinal",
                                      o.device));
            }
            int n = device_count();
            if (n == 0) {
              throw error(errc::no_device, fmt::format("the {} backend has no device for a "
                                                       "window", backend_name()));
            }
            return area(o.device >= 0 ? o.device : node_rank % n).mmap(bytes);
          },
          // A device allocation is freed by its pointer whatever the device (area's munmap
          // checks that an area of that device made it, so the device is looked up).
          [](void* p, std::size_t n) { area(lookup(p).device).munmap(p, n); }, o) {}

shared_window::shared_window(MPI_Comm comm, std::size_t bytes, const area& a, const options& o)
    : shared_window(comm, bytes, from_area(a, bytes),
                    [a](void* p, std::size_t n) { a.munmap(p, n); }, o) {}

shared_window::shared_window(MPI_Comm comm, std::size_t bytes, pool& p, const options& o)
    : shared_window(comm, bytes, p.as_area(), o) {}

shared_window::shared_window(MPI_Comm comm, std::size_t bytes, const allocate_fn& allocate,
                             release_fn release, const options& o)
    : node_view("shared_window"), release_(std::move(release)) {
  try {
    auto im = detail::make_imports(comm, o, "shared_window", bytes, [&](const detail::group& g) {
      if (bytes == 0) throw error(errc::invalid_value, "bytes_per_rank is 0");
      segment_ = allocate(g.node_rank);
      size_ = bytes;
      return segment_;
    });
    adopt(std::move(im));
  } catch (...) {
    // After a failure that every rank saw alike (failure::rank, or a record refused at the
    // opens step, which the confirm step tells every rank), every rank closed its imports
    // before any throws (the undo step), so the segment is no longer mapped anywhere. After a
    // timeout, an MPI error or a mismatch at another step, another rank may still map it:
    // memarea then defers the driver's free until that process closes it or dies
    // (docs/ipc.md, "Lifetimes").
    free_segment();
    throw;
  }
}

void shared_window::free_segment() noexcept {
  if (!segment_) return;
  // A free that fails (busy under ipc::free_policy::refuse while a peer still maps the
  // segment after a failed destroy) leaves the segment allocated: the release-failure record
  // keeps it for the caller, never lost on stderr.
  try {
    release_(segment_, size_);
  } catch (const std::exception& e) {
    memarea::report_release_failure(segment_, size_, e);
  } catch (...) {
    memarea::report_release_failure(segment_, size_, std::runtime_error("an unknown exception"));
  }
  segment_ = nullptr;
  size_ = 0;
}

shared_window::~shared_window() {
  if (!*this && !segment_) return;
  try {
    destroy();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memarea mpi: destroying a window: %s\n", e.what());
  }
}

shared_window::shared_window(shared_window&& o) noexcept
    : node_view(std::move(o)),
      release_(std::move(o.release_)),
      segment_(std::exchange(o.segment_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

shared_window& shared_window::operator=(shared_window&& o) noexcept {
  if (this != &o) {
    if (*this || segment_) {
      try {
        destroy();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "memarea mpi: destroying a window: %s\n", e.what());
      }
    }
    node_view::operator=(std::move(o));
    release_ = std::move(o.release_);
    segment_ = std::exchange(o.segment_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void shared_window::destroy() {
  // The segment is freed on every path, after the closes when they succeed. When the barrier
  // failed, another rank may still map it: memarea then defers the driver's free until that
  // process closes it or dies (docs/ipc.md, "Lifetimes").
  struct on_exit {
    shared_window& w;
    ~on_exit() { w.free_segment(); }
  } guard{*this};
  close_imports("destroy");
}

void* shared_window::local() const {
  if (!segment_) throw error(errc::invalid_value, "shared_window::local: the window is empty");
  return segment_;
}
void* shared_window::remote(int r) const { return memory_of(r, "remote"); }
std::size_t shared_window::size() const { return size_; }
int shared_window::device() const {
  auto& im = need("device");
  return im.devices[static_cast<std::size_t>(im.g->node_rank)];
}

void shared_window::fence() {
  device_synchronize(device());
  step(static_cast<int>(detail::step_kind::fence), "fence");
}
void shared_window::fence(stream_view s) {
  detail::require_ok(memarea_stream_synchronize(to_c(s)), "shared_window::fence");
  step(static_cast<int>(detail::step_kind::fence), "fence");
}

}  // namespace memarea::mpi
