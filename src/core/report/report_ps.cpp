// `memarea ps --json`: every live process of this user (every user's, for root) that published
// its usage in its lease (base/lease_table.hpp), with what it exported and who has it open, read
// from its IPC segment (core/ipc/ipc_segment.hpp). Everything read from /dev/shm is untrusted:
// sizes, magic, version and bounds are checked, and a lease or segment that fails is listed
// under "skipped" with the reason, never followed.
#include "base/lease.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/report/report.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace memarea::report {

namespace {

namespace lt = detail::lease_table;
namespace ii = detail::ipc_internal;

std::string hex16(std::uint64_t v) { return fmt::format("{:016x}", v); }

/// Finds, as this process sees them, the pids that leases give in their own PID namespaces.
/// A lease says its pid and namespace itself, and any process of its user can write that: a
/// pid is shown as the lease's process only if that process has the lease open (as its owner
/// does for its lifetime), so neither a lie nor a reused pid names another process. /proc is
/// read once for every namespace not ours, and each process's descriptors once, however many
/// leases there are.
class pid_finder {
 public:
  /// The pid of (pid in namespace ns) here, if it has the lease (dev, ino) open; -1 if not, or
  /// when the namespace is not visible from here.
  long find(std::int32_t pid, std::uint64_t ns, dev_t dev, ino_t ino) {
    if (ns == 0 || pid <= 0 || mine() == 0) return -1;
    long here = -1;
    if (ns == mine()) {
      here = pid;
    } else {
      const auto& m = others();
      const auto it = m.find({ns, pid});
      if (it != m.end()) here = it->second;
    }
    return here > 0 && files_of(here).count({dev, ino}) ? here : -1;
  }

 private:
  using file = std::pair<dev_t, ino_t>;
  /// The files process pid (as this process sees it) has open.
  const std::set<file>& files_of(long pid) {
    auto [it, made] = files_.try_emplace(pid);
    if (!made) return it->second;
    DIR* d = opendir(fmt::format("/proc/{}/fd", pid).c_str());
    if (!d) return it->second;
    while (dirent* e = readdir(d)) {
      struct stat st {};
      if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0)
        it->second.emplace(st.st_dev, st.st_ino);
    }
    closedir(d);
    return it->second;
  }
  std::uint64_t mine() {
    if (!mine_) {
      struct stat st {};
      mine_ = stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
    }
    return *mine_;
  }
  /// (namespace, innermost pid) -> pid here, for every process visible in /proc.
  const std::map<std::pair<std::uint64_t, long>, long>& others() {
    if (others_) return *others_;
    others_.emplace();
    DIR* d = opendir("/proc");
    if (!d) return *others_;
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long p = std::strtol(e->d_name, &end, 10);
      if (!end || *end != '\0' || p <= 0) continue;
      struct stat st {};
      if (stat(fmt::format("/proc/{}/ns/pid", p).c_str(), &st) != 0 ||
          static_cast<std::uint64_t>(st.st_ino) == mine())
        continue;
      std::ifstream status(fmt::format("/proc/{}/status", p));
      std::string line;
      while (std::getline(status, line)) {
        if (line.rfind("NSpid:", 0) != 0) continue;
        std::istringstream words(line.substr(6));
        long last = -1, w = 0;
        while (words >> w) last = w;
        if (last > 0) others_->emplace(std::pair{static_cast<std::uint64_t>(st.st_ino), last}, p);
        break;
      }
    }
    closedir(d);
    return *others_;
  }
  std::optional<std::uint64_t> mine_;
  std::optional<std::map<std::pair<std::uint64_t, long>, long>> others_;
  std::map<long, std::set<file>> files_;
};

/// What one exported buffer is, as its exporter's segment says.
struct export_entry {
  int device = -2;  ///< -2: not said (a segment of an older memarea)
  std::uint64_t bytes = 0;
  bool freed = false;
  std::vector<std::uint64_t> open_in;  ///< importers' owners
};

/// The exports in segment file `name` (of owner, whose lease is a file of uid), or a reason it
/// cannot be read. A file of another user than the lease's is not its owner's (root reads every
/// user's: one user must not pass exports off as another's).
bool read_segment(const std::string& name, std::uint64_t owner, uid_t uid,
                  std::vector<export_entry>& out, std::string& why) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  struct stat st {};
  const bool ok_file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid &&
                       (st.st_mode & 077) == 0;
  if (!ok_file || st.st_size < static_cast<off_t>(sizeof(ii::segment))) {
    ::close(fd);
    why = ok_file ? "segment shorter than its layout" : "not a file of its lease's user";
    return false;
  }
  auto seg = std::make_unique<ii::segment>();
  const ssize_t n = pread(fd, seg.get(), sizeof *seg, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof *seg)) {
    why = "segment cut short";
    return false;
  }
  if (seg->magic != ii::kSegmentMagic || seg->version != ii::kSegmentVersion) {
    why = "segment of another version";
    return false;
  }
  if (seg->owner != owner) {
    why = "segment names another owner";
    return false;
  }
  for (const ii::buffer_slot& b : seg->slot) {
    if (b.id == 0 || b.end < b.begin) continue;
    export_entry e;
    e.device = b.device >= 1 && b.device < lt::kMaxRows ? static_cast<int>(b.device) - 1 : -2;
    e.bytes = b.end - b.begin;
    e.freed = b.live == 0;
    for (const ii::importer_slot& w : b.who)
      if (w.owner != 0) e.open_in.push_back(w.owner);
    out.push_back(std::move(e));
  }
  return true;
}

/// Whether name is what memarea names an IPC segment, "memarea-ipc-<owner>-<segment>" (16 hex
/// digits each, ipc_wire.cpp), and its owner then. Anyone of the user can make a file of any
/// name in /dev/shm: a name of other bytes (invalid UTF-8, terminal controls) is not ours and
/// never reaches the document.
bool segment_name(std::string_view name, std::uint64_t& owner) {
  constexpr std::string_view prefix = "memarea-ipc-";
  if (name.size() != prefix.size() + 33 || name.substr(0, prefix.size()) != prefix ||
      name[prefix.size() + 16] != '-')
    return false;
  for (char c : name.substr(prefix.size() + 17))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  owner = detail::lease::owner_of(name);
  return owner != 0;
}

/// The names of every IPC segment in /dev/shm by owner, sorted: one pass over the directory,
/// however many leases there are.
std::map<std::uint64_t, std::vector<std::string>> segments_by_owner() {
  std::map<std::uint64_t, std::vector<std::string>> names;
  DIR* d = opendir("/dev/shm");
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    std::uint64_t owner = 0;
    if (segment_name(e->d_name, owner)) names[owner].emplace_back(e->d_name);
  }
  closedir(d);
  for (auto& [owner, list] : names) std::sort(list.begin(), list.end());
  return names;
}

nlohmann::json figures_json(const lt::row& r) {
  return {{"device", r.device},       {"live", r.live},
          {"cached", r.cached},       {"reserved", r.reserved},
          {"exported", r.exported},   {"imported", r.imported},
          {"peak_live", r.peak_live}, {"peak_cached", r.peak_cached},
          {"peak_reserved", r.peak_reserved}, {"peak_exported", r.peak_exported},
          {"peak_imported", r.peak_imported}};
}

}  // namespace

nlohmann::json ps_json(const int* device) {
  const bool any_user = geteuid() == 0;
  struct proc {
    std::uint64_t owner;
    lt::decoded t;
    long pid_here;
    std::vector<export_entry> exports;
  };
  pid_finder pids;
  // Leases whose sweep byte stays held (a sweep at work, or anyone of the user holding it) are
  // waited for as long as one sweep waits, in all: not that long for each.
  int waits_left = detail::lease::kSweepWaits;
  std::vector<proc> procs;
  nlohmann::json skipped = nlohmann::json::array();
  const auto segments = segments_by_owner();
  std::vector<std::uint64_t> owners = detail::lease::owners();
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  for (std::uint64_t owner : owners) {
    const int fd = detail::lease::open_for_reading(owner, any_user);
    if (fd < 0) continue;  // gone meanwhile, or another user's: not ours to show
    const detail::lease::holder h = detail::lease::test(fd, &waits_left);
    std::string why;
    std::optional<lt::decoded> t;
    struct stat st {};
    if (h == detail::lease::holder::alive) t = detail::lease::read_table(fd, &why);
    const bool known = t && fstat(fd, &st) == 0;
    ::close(fd);  // first: this process is not the lease's
    const long here = known ? pids.find(t->pid, t->pid_ns, st.st_dev, st.st_ino) : -1;
    if (h == detail::lease::holder::gone) continue;
    if (h == detail::lease::holder::unknown) why = "liveness unknown";
    if (!t) {
      if (why.find("no usage table") == std::string::npos)  // a lease of an older memarea: quiet
        skipped.push_back({{"owner", hex16(owner)}, {"why", why}});
      continue;
    }
    proc p{owner, std::move(*t), here, {}};
    if (const auto mine = segments.find(owner); mine != segments.end()) {
      for (const std::string& name : mine->second) {
        std::string seg_why;
        if (!read_segment(name, owner, p.t.uid, p.exports, seg_why))
          skipped.push_back({{"segment", name}, {"why", seg_why}});
      }
    }
    procs.push_back(std::move(p));
  }
  std::sort(procs.begin(), procs.end(), [](const proc& a, const proc& b) {
    return std::tie(a.t.start_ns, a.owner) < std::tie(b.t.start_ns, b.owner);
  });
  std::map<std::uint64_t, const proc*> by_owner;
  for (const proc& p : procs) by_owner[p.owner] = &p;
  auto who = [&](std::uint64_t owner) {
    auto it = by_owner.find(owner);
    const long here = it->second->pid_here;
    return nlohmann::json{{"owner", hex16(owner)},
                          {"pid", it->second->t.pid},
                          {"pid_here", here >= 0 ? nlohmann::json(here) : nlohmann::json(nullptr)}};
  };
  auto wanted = [&](int d) { return !device || *device == d; };
  std::map<std::uint64_t, nlohmann::json> imports;
  for (const proc& p : procs) {
    for (const export_entry& e : p.exports) {
      if (!wanted(e.device)) continue;
      for (std::uint64_t o : e.open_in) {
        if (!by_owner.count(o)) continue;
        imports[o].push_back({{"from", who(p.owner)}, {"device", e.device}, {"bytes", e.bytes}});
      }
    }
  }
  nlohmann::json list = nlohmann::json::array();
  for (const proc& p : procs) {
    nlohmann::json devices = nlohmann::json::array();
    for (const lt::row& r : p.t.rows) {
      const bool any = r.live || r.cached || r.reserved || r.exported || r.imported ||
                       r.peak_live || r.peak_cached || r.peak_reserved || r.peak_exported ||
                       r.peak_imported;
      if (any && wanted(r.device)) devices.push_back(figures_json(r));
    }
    nlohmann::json exports = nlohmann::json::array();
    for (const export_entry& e : p.exports) {
      if (!wanted(e.device)) continue;
      nlohmann::json open_in = nlohmann::json::array();
      for (std::uint64_t o : e.open_in)
        if (by_owner.count(o)) open_in.push_back(who(o));
      exports.push_back(
          {{"device", e.device}, {"bytes", e.bytes}, {"freed", e.freed}, {"open_in", open_in}});
    }
    const long here = p.pid_here;
    list.push_back({{"owner", hex16(p.owner)},
                    {"pid", p.t.pid},
                    {"pid_here", here >= 0 ? nlohmann::json(here) : nlohmann::json(nullptr)},
                    {"uid", p.t.uid},
                    {"command", p.t.comm},
                    {"start_time_ns", p.t.start_ns},
                    {"devices", devices},
                    {"exports", exports},
                    {"imports", imports.count(p.owner) ? imports[p.owner] : nlohmann::json::array()}});
  }
  return {{"processes", list}, {"skipped", skipped}};
}

}  // namespace memarea::report
