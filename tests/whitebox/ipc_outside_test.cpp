// What processes outside memarea's control can do to IPC, each case with real processes: another
// user's segment vouching for a handle that names our private memory, a segment or a device
// memory object cut short under the processes that map it, and an importer that writes its lease
// into every slot of an exporter's segment. (The sweep's side, files merely named like memarea's
// and links, is in tests/lease_test.cpp.)
#include "whitebox/whitebox.hpp"

#include "driver/sim/sim_internal.hpp"

#include <grp.h>
#include <sys/stat.h>

namespace memarea::test {
namespace {

namespace wf = memarea::detail::ipc_internal;
namespace lease = memarea::detail::lease;

constexpr std::size_t kBytes = 8192;
constexpr uid_t kOtherUid = 65534;  // nobody

std::string status_name(errc e) { return memarea::to_string(e); }

/// A segment that vouches for `h`'s driver bytes as buffer 1 in slot 0, made with `mode`;
/// returns the handle that names it, or an empty optional. It names as exporter the calling
/// process (its lease), or with `as_target` h's exporter: anyone can make a file in /dev/shm
/// named after another process's lease. What an attacker of the same user, or of another (mode
/// 0666), can write there.
std::optional<ipc::handle> vouching_segment(const ipc::handle& h, mode_t mode, bool as_target,
                                            std::string* made = nullptr) {
  int err = 0;
  const wf::wire real = wire_of(h);
  const std::uint64_t me = as_target ? real.owner : lease::own(&err);
  if (me == 0) return std::nullopt;
  const std::uint64_t segment_id = 0x5e65e65e00000000ull | static_cast<std::uint64_t>(getpid());
  const std::string name = wf::segment_name(me, segment_id);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return std::nullopt;
  if (fchmod(fd, mode) != 0 || ftruncate(fd, sizeof(wf::segment)) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  void* p = mmap(nullptr, sizeof(wf::segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return std::nullopt;
  auto* s = static_cast<wf::segment*>(p);
  s->version = wf::kSegmentVersion;
  s->buffers = wf::kBuffers;
  s->owner_pid = getpid();
  s->owner = me;
  s->owner_alive = 1;
  s->slot[0].begin = 0;
  s->slot[0].end = real.offset + kBytes;
  s->slot[0].digest = wf::native_digest(real.native);
  s->slot[0].live = 1;
  s->slot[0].id = 1;
  s->magic = wf::kSegmentMagic;
  munmap(p, sizeof(wf::segment));
  if (made) *made = name;
  return forged(h, [&](wf::wire& w) {
    w.owner = me;
    w.pid = getpid();
    w.segment = segment_id;
    w.slot = 0;
    w.buffer_id = 1;
  });
}

/// A forked child that makes a vouching segment as `uid` (0: as we are), sends its handle, and
/// lives (holding its lease) until `go` is written or closed. It makes files only (no backend
/// call), so it may be a child of a process that uses CUDA or HIP.
struct forger {
  forked proc;
  int go = -1;
  std::optional<ipc::handle> handle;
  std::string segment;

  forger(const ipc::handle& target, uid_t uid, mode_t mode, bool as_target) {
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) != 0 || pipe2(down, O_CLOEXEC) != 0) return;
    std::fflush(nullptr);
    proc.pid = fork();
    if (proc.pid == 0) {
      alarm(60);
      ::close(up[0]);
      ::close(down[1]);
      if (uid != 0 && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
        _exit(77);
      std::string made;
      const auto h = vouching_segment(target, mode, as_target, &made);
      if (!h) _exit(78);
      if (!write_all(up[1], h->bytes.data(), h->bytes.size())) _exit(79);
      char c = 0;
      (void)!::read(down[0], &c, 1);
      shm_unlink(made.c_str());
      _exit(0);
    }
    ::close(up[1]);
    ::close(down[0]);
    go = down[1];
    ipc::handle h;
    if (read_within(up[0], h.bytes.data(), h.bytes.size(), kForkWait)) handle = h;
    ::close(up[0]);
    if (handle) segment = wf::segment_name(wire_of(*handle).owner, wire_of(*handle).segment);
  }
  ~forger() {
    if (go >= 0) ::close(go);
    if (proc.pid > 0) (void)proc.wait(kForkWait);
    if (!segment.empty()) shm_unlink(segment.c_str());
  }
};

bool is_sim() { return std::string(backend_name()) == "sim"; }

/// Ignores SIGPIPE while it lives: a helper killed by a signal then reads as "<eof>" in its
/// next answer instead of taking the test process with it.
struct ignore_sigpipe {
  struct sigaction old {};
  ignore_sigpipe() {
    struct sigaction sa {};
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, &old);
  }
  ~ignore_sigpipe() { sigaction(SIGPIPE, &old, nullptr); }
  ignore_sigpipe(const ignore_sigpipe&) = delete;
  ignore_sigpipe& operator=(const ignore_sigpipe&) = delete;
};


}  // namespace

// Another user lists /dev/shm, and writes a handle naming our (the importing server's uid)
// private device memory plus a segment of its own, open to all, that vouches for it (named
// after the memory's owner, as if that process had exported it). The server
// must refuse it, with the segment's checks before the driver's open (first imports overlap the
// two) and after (MEMAREA_IPC_OVERLAP=0), and never read or write that memory.
TEST(IpcOutside, AnotherUsersSegmentCannotVouchForOurMemory) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  if (geteuid() != 0) GTEST_SKIP() << "making a second uid needs root (this runs as uid " << geteuid() << ")";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  // The third process: our uid, its secret in device memory. (Its handle's driver bytes name
  // its object, whose name and size anyone can read in /dev/shm: the forger starts from them.)
  const std::uint64_t secret = new_seed();
  child owner({"export", str(kBytes), str(secret)});
  const ipc::handle target = ipc::handle::from_hex(owner.line());
  // Its segment is named after the third process's lease, so the handle names that process as
  // its exporter, as the driver bytes do: only the segment's owner and mode give it away.
  forger other(target, kOtherUid, 0666, true);
  ASSERT_TRUE(other.handle.has_value()) << "the other user could not make its segment";
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + other.segment).c_str(), &st), 0);
  ASSERT_EQ(st.st_uid, kOtherUid);
  for (const char* overlap : {"1", "0"}) {
    child server({"expect", hex(*other.handle), status_name(errc::not_permitted)}, -1,
                 {{"MEMAREA_IPC_OVERLAP", overlap}});
    EXPECT_EQ(server.line(), status_name(errc::not_permitted)) << "MEMAREA_IPC_OVERLAP=" << overlap;
    EXPECT_EQ(server.wait(), 0) << "MEMAREA_IPC_OVERLAP=" << overlap;
  }
  EXPECT_EQ(owner.ask("check " + str(secret)), "ok") << "the secret was written";
}

// The same forgery by a process of our own user, with a private segment: the sim's driver bytes
// name whose memory they are, and that must be the exporter the handle names.
TEST(IpcOutside, TheDriverBytesMustNameTheHandlesExporter) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  if (!is_sim())
    GTEST_SKIP() << "CUDA's and HIP's IPC bytes do not say whose memory they are (docs/security.md)";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  const std::uint64_t secret = new_seed();
  child owner({"export", str(kBytes), str(secret)});
  const ipc::handle target = ipc::handle::from_hex(owner.line());
  forger same(target, 0, 0600, false);
  ASSERT_TRUE(same.handle.has_value());
  for (const char* overlap : {"1", "0"}) {
    child server({"expect", hex(*same.handle), status_name(errc::invalid_handle)}, -1,
                 {{"MEMAREA_IPC_OVERLAP", overlap}});
    EXPECT_EQ(server.line(), status_name(errc::invalid_handle)) << "MEMAREA_IPC_OVERLAP=" << overlap;
    EXPECT_EQ(server.wait(), 0) << "MEMAREA_IPC_OVERLAP=" << overlap;
  }
  EXPECT_EQ(owner.ask("check " + str(secret)), "ok");
}

// A process that cuts an exporter's segment short must not kill the importers that map it (an
// idle importer's background thread reads it every tick) nor the exporter: each gets a clear
// status at its next call that needs the segment.
TEST(IpcOutside, ACutShortSegmentKillsNobody) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const ignore_sigpipe quiet;
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(kBytes), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  child importer({"hold", hex(h), str(kBytes), str(seed)});
  ASSERT_EQ(importer.line(), "opened");
  ASSERT_EQ(importer.ask("close"), "closed");  // idle, its mapping cached
  const wf::wire w = wire_of(h);
  const std::string name = wf::segment_name(w.owner, w.segment);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  ::close(fd);
  // Several ticks of both background threads.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(importer.ask("reopen"), status_name(errc::invalid_handle)) << "the importer";
  EXPECT_EQ(exporter.ask("another 4096 " + str(new_seed())), status_name(errc::not_permitted))
      << "the exporter's next export";
  EXPECT_EQ(exporter.ask("check " + str(seed)), "ok") << "the exporter's own memory";
  importer.close_stdin();
  EXPECT_EQ(importer.wait(), 0) << "the importer died (128 + 7 is SIGBUS)";
  exporter.close_stdin();
  EXPECT_EQ(exporter.wait(), 0) << "the exporter died (128 + 7 is SIGBUS)";
}

// The sim's device memory is a shm object too: cut short under its exporter and an importer,
// the next copy of it says so in both, and neither dies.
TEST(IpcOutside, ACutShortDeviceObjectKillsNobody) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  if (!is_sim()) GTEST_SKIP() << "the sim's device memory alone is a file another process can cut";
  const ignore_sigpipe quiet;
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(kBytes), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  child importer({"hold", hex(h), str(kBytes), str(seed)});
  ASSERT_EQ(importer.line(), "opened");
  const auto objects = objects_of(wire_of(h).owner, "sim");
  ASSERT_EQ(objects.size(), 1u);
  const int fd = shm_open(("/" + *objects.begin()).c_str(), O_RDWR | O_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  ::close(fd);
  EXPECT_EQ(importer.ask("check " + str(seed)), status_name(errc::invalid_value));
  EXPECT_EQ(exporter.ask("check " + str(seed)), status_name(errc::invalid_value));
  importer.close_stdin();
  EXPECT_EQ(importer.wait(), 0) << "the importer died (128 + 7 is SIGBUS)";
  exporter.close_stdin();
  EXPECT_EQ(exporter.wait(), 0) << "the exporter died (128 + 7 is SIGBUS)";
}

// An importer that writes its lease into every free slot of an exporter's segment (and an id
// into each) and exits must not stop the exporter from exporting; one that fills every importer
// slot of a live buffer with its lease, and lives, must not keep other importers out.
TEST(IpcOutside, AnImporterCannotUseUpAnExportersSlots) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(kBytes), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  const std::uint32_t live_slot = wire_of(h).slot;
  // The squatter: takes every free slot (its lease as an importer, a made-up id), and every
  // importer slot of the live buffer; then lives until told, or exits at once.
  auto squat = [&](bool stay) {
    auto proc = std::make_unique<forked>();
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) != 0 || pipe2(down, O_CLOEXEC) != 0) return std::make_pair(std::move(proc), -1);
    std::fflush(nullptr);
    proc->pid = fork();
    if (proc->pid == 0) {
      alarm(60);
      ::close(up[0]);
      ::close(down[1]);
      int err = 0;
      const std::uint64_t me = lease::own(&err);
      wf::segment* s = map_segment_of(h);
      if (me == 0 || !s) _exit(78);
      for (std::uint32_t i = 0; i < wf::kBuffers; ++i) {
        wf::buffer_slot& b = s->slot[i];
        if (i == live_slot) {
          for (auto& who : b.who) wf::at(who.owner).store(me);
        } else if (wf::at(b.id).load() == 0) {
          wf::at(b.who[0].owner).store(me);
          if (!stay) wf::at(b.id).store(0xdead0000u + i);
        }
      }
      munmap(s, sizeof(wf::segment));
      char c = 1;
      if (!write_all(up[1], &c, 1)) _exit(79);
      if (stay) (void)!::read(down[0], &c, 1);
      _exit(0);
    }
    ::close(up[1]);
    ::close(down[0]);
    char c = 0;
    const bool done = read_within(up[0], &c, 1, kForkWait);
    ::close(up[0]);
    if (!done) {
      ::close(down[1]);
      return std::make_pair(std::move(proc), -1);
    }
    return std::make_pair(std::move(proc), down[1]);
  };
  {
    auto [dead, go] = squat(false);
    ASSERT_GE(go, 0);
    EXPECT_EQ(dead->wait(kForkWait), 0);
    ::close(go);
  }
  // Every slot but the live buffer's was taken by a process now dead: exports go on.
  for (int i = 0; i < 3; ++i) {
    const std::string reply = exporter.ask("another 4096 " + str(new_seed()));
    EXPECT_EQ(reply.size(), 256u) << "export " << i << ": " << reply;
  }
  {
    auto [alive, go] = squat(true);
    ASSERT_GE(go, 0);
    // Every importer slot of the live buffer names one living process: another importer opens.
    child other({"check", hex(h), str(kBytes), str(seed), "0", "0"});
    EXPECT_EQ(other.line(), "ok");
    EXPECT_EQ(other.wait(), 0);
    ::close(go);
    EXPECT_EQ(alive->wait(kForkWait), 0);
  }
  EXPECT_EQ(exporter.ask("check " + str(seed)), "ok");
}

}  // namespace memarea::test
