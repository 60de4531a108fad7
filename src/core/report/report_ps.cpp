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
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

namespace memarea::report {

namespace {

namespace lt = detail::lease_table;
namespace ii = detail::ipc_internal;

std::string hex16(std::uint64_t v) { return fmt::format("{:016x}", v); }

/// The pid of (pid in namespace ns) as this process sees it: itself when ns is ours, else found
/// through /proc's NSpid lines; -1 when not visible from here.
long pid_here(std::int32_t pid, std::uint64_t ns) {
  struct stat mine {};
  if (ns == 0 || stat("/proc/self/ns/pid", &mine) != 0) return -1;
  if (static_cast<std::uint64_t>(mine.st_ino) == ns) return pid;
  DIR* d = opendir("/proc");
  if (!d) return -1;
  long found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long p = std::strtol(e->d_name, &end, 10);
    if (!end || *end != '\0' || p <= 0) continue;
    struct stat st {};
    if (stat(fmt::format("/proc/{}/ns/pid", p).c_str(), &st) != 0 ||
        static_cast<std::uint64_t>(st.st_ino) != ns)
      continue;
    std::ifstream status(fmt::format("/proc/{}/status", p));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream words(line.substr(6));
      long last = -1, w = 0;
      while (words >> w) last = w;
      if (last == pid) found = p;
      break;
    }
    if (found >= 0) break;
  }
  closedir(d);
  return found;
}

/// What one exported buffer is, as its exporter's segment says.
struct export_entry {
  int device = -2;  ///< -2: not said (a segment of an older memarea)
  std::uint64_t bytes = 0;
  bool freed = false;
  std::vector<std::uint64_t> open_in;  ///< importers' owners
};

/// The exports in segment file `name` (of owner), or a reason it cannot be read.
bool read_segment(const std::string& name, std::uint64_t owner, bool any_user,
                  std::vector<export_entry>& out, std::string& why) {
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  struct stat st {};
  const bool ok_file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                       (any_user || st.st_uid == geteuid()) && (st.st_mode & 077) == 0;
  if (!ok_file || st.st_size < static_cast<off_t>(sizeof(ii::segment))) {
    ::close(fd);
    why = ok_file ? "segment shorter than its layout" : "not a file of this user";
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

/// The names of owner's IPC segments in /dev/shm ("memarea-ipc-<owner>-...").
std::vector<std::string> segments_of(std::uint64_t owner) {
  std::vector<std::string> names;
  DIR* d = opendir("/dev/shm");
  if (!d) return names;
  const std::string prefix = "memarea-ipc-" + hex16(owner) + "-";
  while (dirent* e = readdir(d))
    if (std::string_view(e->d_name).substr(0, prefix.size()) == prefix) names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
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
    std::vector<export_entry> exports;
  };
  std::vector<proc> procs;
  nlohmann::json skipped = nlohmann::json::array();
  std::vector<std::uint64_t> owners = detail::lease::owners();
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  for (std::uint64_t owner : owners) {
    const int fd = detail::lease::open_for_reading(owner, any_user);
    if (fd < 0) continue;  // gone meanwhile, or another user's: not ours to show
    const detail::lease::holder h = detail::lease::test(fd);
    std::string why;
    std::optional<lt::decoded> t;
    if (h == detail::lease::holder::alive) t = detail::lease::read_table(fd, &why);
    ::close(fd);
    if (h == detail::lease::holder::gone) continue;
    if (h == detail::lease::holder::unknown) why = "liveness unknown";
    if (!t) {
      if (why.find("no usage table") == std::string::npos)  // a lease of an older memarea: quiet
        skipped.push_back({{"owner", hex16(owner)}, {"why", why}});
      continue;
    }
    proc p{owner, std::move(*t), {}};
    for (const std::string& name : segments_of(owner)) {
      std::string seg_why;
      if (!read_segment(name, owner, any_user, p.exports, seg_why))
        skipped.push_back({{"segment", name}, {"why", seg_why}});
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
    return nlohmann::json{{"owner", hex16(owner)}, {"pid", it->second->t.pid}};
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
    const long here = pid_here(p.t.pid, p.t.pid_ns);
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
