// The first import from an exporter this process does not import from yet (ipc_importer.hpp):
// mapping the exporter's segment, on the keeper's thread while the importing thread opens the
// driver handle (segment_job), the pause of that overlap after a forged handle, the checks of
// the segment, and MEMAREA_IPC_TIMING's line of the phases.
#include "core/ipc/ipc_importer.hpp"

#include "base/fault_guard.hpp"
#include "base/fresh_mmap.hpp"
#include "base/housekeeper.hpp"
#include "core/ipc/ipc_exporter.hpp"
#include "core/ipc/ipc_impl.hpp"
#include "core/system.hpp"
#include "testing/memarea_testing.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

namespace memarea::detail::ipc_internal {

namespace {

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The testing interface's hooks (testing::set_segment_job_hooks): a first import's two
/// threads held at chosen points.
std::atomic<void (*)() noexcept> g_keeper_before_take{nullptr};
std::atomic<void (*)() noexcept> g_keeper_took_job{nullptr};
std::atomic<void (*)() noexcept> g_after_early_open{nullptr};

}  // namespace

}  // namespace memarea::detail::ipc_internal

namespace memarea::detail::testing {

void set_segment_job_hooks(const segment_job_hooks& h) {
  using namespace ipc_internal;
  g_keeper_before_take.store(h.keeper_before_take, std::memory_order_release);
  g_keeper_took_job.store(h.keeper_took, std::memory_order_release);
  g_after_early_open.store(h.after_open, std::memory_order_release);
}

}  // namespace memarea::detail::testing

namespace memarea::detail::ipc_internal {

importer::source& importer::first_source_locked(const wire& w, int device, phase_times* t,
                                               early_open& early) {
  // A new exporter: its segment is mapped on the keeper's thread while this one opens the
  // driver handle (segment_job says why and how). Without the keeper, in this order.
  job_.name = segment_name(w.owner, w.segment);
  job_.owner = w.owner;
  job_.timing = t != nullptr;
  const bool overlap = may_overlap();
  // Posted only when it may go to the keeper: a keeper's call left from an earlier import
  // takes only a posted job.
  if (overlap) job_.state.store(segment_job::posted, std::memory_order_release);
  std::int64_t grace_until = 0;
  // Only to an idle keeper: one busy in a round (a fresh process's set-up, a sweep) would
  // begin late, and its own system calls slow this thread's.
  if (overlap && housekeeper::post(&segment_job::on_keeper, &job_, true)) {
    grace_until = steady_ns() + std::chrono::nanoseconds(kKeeperGrace).count();
    early.tried = true;
    overlapped_opens_.fetch_add(1, std::memory_order_relaxed);
    try {
      early.status = driver_open(w, device, &early.base);
    } catch (...) {
      early.failure = std::current_exception();  // thrown once the job is settled
    }
    if (t) t->stamp(phase_times::driver_open);
    if (auto hook = g_after_early_open.load(std::memory_order_acquire)) hook();
  }
  if (overlap) {
    job_.finish(grace_until);  // takes the job back unless a keeper's call began it
  } else {
    job_.by_keeper = false;  // never posted: its state stays idle, which no keeper's call takes
    job_.run();
  }
  if (early.tried && job_.by_keeper)
    keeper_segment_jobs_.fetch_add(1, std::memory_order_relaxed);
  if (early.failure) {
    job_.discard();
    std::rethrow_exception(early.failure);
  }
  if (t) {
    t->overlapped = early.tried;
    t->by_keeper = job_.by_keeper;
    t->job_began = job_.began;
    t->ns[phase_times::seg_opened] = job_.opened;
    t->ns[phase_times::seg_mapped] = job_.mapped;
    t->ns[phase_times::seg_read] = job_.read;
  }
  // The driver accepted bytes of an exporter whose segment refuses them (not one that exited
  // cleanly): someone forged them.
  if (early.base && job_.why != segment_job::failure::none &&
      job_.why != segment_job::failure::exited)
    note_forgery();
  return adopt_source_locked(w);  // throws for a segment that refuses w
}

importer::early_open::~early_open() noexcept {
  // Refused after the driver opened it (the segment, or a check): the reference goes back. A
  // failing close changes nothing memarea tracks (its message may fail to allocate: ignored).
  if (!base) return;
  try {
    (void)system::get().gpu().ipc_close_handle(base);
  } catch (...) {
  }
}

dstatus importer::driver_open(const wire& w, int device, void** base) {
  ipc_native_handle native;
  std::memcpy(native.bytes, w.native, sizeof native.bytes);
  // CUDA and HIP refuse 0 ("must be specified as ..._LAZY_ENABLE_PEER_ACCESS"; CUDA answers
  // CUDA_ERROR_INVALID_VALUE): lazy enabling costs nothing on the memory's own
  // device, so memarea's 0 and LAZY both reach the driver as LAZY.
  *base = nullptr;
  dstatus s = system::get().gpu().ipc_open_handle(device, native,
                                                  MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, base);
  if (!s.ok()) *base = nullptr;
  return s;
}

bool importer::may_overlap() const noexcept {
  return overlap_ && several_cpus_ &&
         housekeeper::now().time_since_epoch().count() >= check_first_until_;
}

void importer::note_forgery() noexcept {
  check_first_until_ =
      (housekeeper::now() + std::chrono::duration_cast<housekeeper::clock_type::duration>(
                                kForgeryPause))
          .time_since_epoch()
          .count();
}

void importer::segment_job::discard() noexcept {
  fault_guard::unwatch(std::exchange(guard, -1));
  if (seg) munmap(std::exchange(seg, nullptr), sizeof(segment));
  state.store(idle, std::memory_order_relaxed);
}

void importer::segment_job::on_keeper(void* job) noexcept {
  auto* j = static_cast<segment_job*>(job);
  if (auto hook = g_keeper_before_take.load(std::memory_order_acquire)) hook();
  int expected = posted;
  // Taken already (by the importing thread), or a job posted earlier and done since: nothing.
  if (!j->state.compare_exchange_strong(expected, running, std::memory_order_acquire)) return;
  j->by_keeper = true;
  if (auto hook = g_keeper_took_job.load(std::memory_order_acquire)) hook();
  j->run();
  j->state.store(done, std::memory_order_release);
  j->state.notify_all();
}

void importer::segment_job::finish(std::int64_t grace_until) noexcept {
  while (grace_until != 0 && state.load(std::memory_order_acquire) == posted &&
         steady_ns() < grace_until) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#else
    std::this_thread::yield();
#endif
  }
  int expected = posted;
  if (state.compare_exchange_strong(expected, running, std::memory_order_acquire)) {
    by_keeper = false;
    run();
    state.store(done, std::memory_order_release);
    return;
  }
  // The keeper is running it: a few system calls, no lock.
  for (int s = state.load(std::memory_order_acquire); s != done;
       s = state.load(std::memory_order_acquire))
    state.wait(s, std::memory_order_acquire);
}

void importer::segment_job::run() noexcept {
  auto now = steady_ns;
  seg = nullptr;
  why = failure::none;
  err = 0;
  if (timing) began = now();
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (timing) opened = now();
  if (fd < 0) {
    err = errno;
    why = err == ENOENT ? failure::not_found : failure::open_failed;
    return;
  }
  struct stat sb {};
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
      static_cast<std::size_t>(sb.st_size) < sizeof(segment)) {
    ::close(fd);
    why = failure::not_segment;
    return;
  }
  // Only a segment of this user that no other user can write vouches for anything: another
  // user could otherwise make one that vouches for handles naming our own private memory.
  if (sb.st_uid != geteuid() || (sb.st_mode & 077) != 0) {
    ::close(fd);
    file_uid = sb.st_uid;
    file_mode = sb.st_mode & 07777;
    why = failure::not_private;
    return;
  }
  void* p = fresh_mmap(nullptr, sizeof(segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  ::close(fd);
  if (timing) mapped = now();
  if (p == MAP_FAILED) {
    why = failure::map_failed;
    return;
  }
  err = 0;
  // Watched before its first read: the exporter, or anyone of this user, may cut it short.
  guard = fault_guard::watch(p, sizeof(segment));
  if (guard < 0) {
    munmap(p, sizeof(segment));
    why = failure::map_failed;
    err = ENOMEM;
    return;
  }
  auto give_back = [&](failure f) {
    fault_guard::unwatch(std::exchange(guard, -1));
    munmap(p, sizeof(segment));
    why = f;
  };
  auto* s = static_cast<segment*>(p);
  const bool ours = at(s->magic).load() == kSegmentMagic;
  if (timing) read = now();
  if (!ours || s->version != kSegmentVersion || s->owner != owner) {
    give_back(fault_guard::damaged(guard) ? failure::damaged : failure::foreign);
    return;
  }
  if (!at(s->owner_alive).load()) {
    // Its objects are removed by the next sweep (the background thread), not here.
    give_back(failure::exited);
    return;
  }
  seg = s;
}

std::string importer::format_phases(const phase_times& t, const wire& w) noexcept {
  using P = phase_times;
  auto us = [&](P::phase a, P::phase b) { return static_cast<double>(t.ns[b] - t.ns[a]) / 1e3; };
  const P::phase mapped = t.new_mapping ? P::recorded : P::registered;
  try {
    if (t.overlapped)
      return fmt::format(
          "memarea ipc timing: first open of buffer {} of process {}: driver open {:.1f} us "
          "while the {} mapped the exporter's segment (began {:.1f} us in; shm_open {:.1f}, "
          "fstat mmap close {:.1f}, first read {:.1f}), then {:.1f} us more to have it, "
          "register {:.1f} us, driver's size query {:.1f} us, registry {:.1f} us, hand out "
          "{:.1f} us, total {:.1f} us\n",
          w.buffer_id, w.pid, us(P::start, P::driver_open),
          t.by_keeper ? "keeper's thread" : "importing thread (after the open)",
          static_cast<double>(t.job_began - t.ns[P::start]) / 1e3,
          static_cast<double>(t.ns[P::seg_opened] - t.job_began) / 1e3,
          us(P::seg_opened, P::seg_mapped), us(P::seg_mapped, P::seg_read),
          static_cast<double>(t.ns[P::source] -
                              std::max(t.ns[P::driver_open], t.ns[P::seg_read])) /
              1e3,
          us(P::source, P::registered), us(P::registered, P::size_query),
          us(P::size_query, P::recorded), us(P::recorded, P::end), us(P::start, P::end));
    const std::string segment =
        t.ns[P::seg_read] ? fmt::format("exporter's segment {:.1f} us (shm_open {:.1f}, fstat "
                                        "mmap close {:.1f}, first read {:.1f}, rest {:.1f})",
                                        us(P::start, P::source), us(P::start, P::seg_opened),
                                        us(P::seg_opened, P::seg_mapped),
                                        us(P::seg_mapped, P::seg_read),
                                        us(P::seg_read, P::source))
                          : fmt::format("exporter's segment mapped already {:.1f} us",
                                        us(P::start, P::source));
    return fmt::format(
        "memarea ipc timing: first open of buffer {} of process {}: {}, register {:.1f} us, {}, "
        "hand out {:.1f} us, total {:.1f} us\n",
        w.buffer_id, w.pid, segment, us(P::source, P::registered),
        t.new_mapping
            ? fmt::format("driver open {:.1f} us, driver's size query {:.1f} us, registry "
                          "{:.1f} us",
                          us(P::registered, P::driver_open), us(P::driver_open, P::size_query),
                          us(P::size_query, P::recorded))
            : std::string("mapping of its allocation open already"),
        us(mapped, P::end), us(P::start, P::end));
  } catch (...) {
    return {};  // diagnostics only: out of memory for the line changes nothing
  }
}

importer::source& importer::adopt_source_locked(const wire& w) {
  segment_job& j = job_;
  // Relaxed is enough: a stale on_keeper only tries posted -> running, and the next job's
  // fields are published by its release store of posted.
  j.state.store(segment_job::idle, std::memory_order_relaxed);
  const std::string& name = j.name;
  switch (j.why) {
    case segment_job::failure::none:
      break;
    case segment_job::failure::not_found:
      throw error(errc::invalid_handle,
                  fmt::format("ipc open: process {} has exited or never exported memory", w.pid));
    case segment_job::failure::open_failed:
      throw error(errc::invalid_handle,
                  fmt::format("ipc open: cannot open {}: {}", name, std::strerror(j.err)));
    case segment_job::failure::not_segment:
      throw error(errc::invalid_handle, fmt::format("ipc open: {} is not a memarea segment", name));
    case segment_job::failure::map_failed:
      throw error(errc::out_of_memory,
                  fmt::format("ipc open: mapping {} failed: {}", name, std::strerror(j.err)));
    case segment_job::failure::foreign:
      throw error(errc::invalid_handle, fmt::format("ipc open: {} is not a memarea segment "
                                                    "(or of another version)",
                                                    name));
    case segment_job::failure::not_private:
      throw error(errc::not_permitted,
                  fmt::format("ipc open: {} belongs to uid {} with mode {:04o}; only a segment "
                              "of this user (uid {}) that no other user can open (mode 0600) "
                              "vouches for a handle",
                              name, j.file_uid, j.file_mode, geteuid()));
    case segment_job::failure::damaged:
      throw segment_damaged(w);
    case segment_job::failure::exited:
      throw exporter_exited(w);
  }
  segment* seg = std::exchange(j.seg, nullptr);
  const int guard = std::exchange(j.guard, -1);
  try {
    source& s = sources_.emplace_back();
    s.seg = seg;
    s.guard = guard;
    s.owner = w.owner;
    s.segment_id = w.segment;
    s.pid = w.pid;
    return s;
  } catch (...) {
    fault_guard::unwatch(guard);
    munmap(seg, sizeof(segment));
    throw;
  }
}

}  // namespace memarea::detail::ipc_internal
