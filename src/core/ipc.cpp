// Legacy IPC handles: export with a per-allocation cache, import with a reference-counted LRU
// cache, and lifetimes shared through a small segment per exporting process (ipc_shm.hpp).
//
// State: one per process, made by the first IPC call; a child of fork() sets its parent's aside
// and makes its own (or refuses, on backends that do not survive fork). Repeated exports are
// served from a per-thread cache validated by a generation counter (g_export_generation).
//
// Locks: `ex` (export side) is innermost: free_record's hook takes it under the registry's
// lock, so code holding `ex` never touches the registry. `im` (import side) may take the
// registry's lock inside it and never takes `ex`.
#include "base/fresh_mmap.hpp"
#include "base/random_name.hpp"
#include "core/area_impl.hpp"
#include "core/ipc_impl.hpp"
#include "core/ipc_shm.hpp"
#include "core/registry.hpp"
#include "core/system.hpp"

#include <memarea/ipc.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace memarea::detail {
namespace ipc_internal {

std::uint64_t checksum(const wire& w) noexcept {
  // A multiply-xorshift over the 15 words before the checksum: garbage passes with odds near
  // 2^-64 (and the magic must match too); it guards against accidents, not an adversary, and
  // costs a few nanoseconds on the export and open fast paths.
  static_assert(offsetof(wire, checksum) % 8 == 0);
  std::uint64_t h = 0x6d656d6172656131ull;
  const auto* p = reinterpret_cast<const unsigned char*>(&w);
  for (std::size_t i = 0; i < offsetof(wire, checksum); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h;
}

namespace {

std::uint32_t hash_name(const char* name) {
  std::uint32_t h = 2166136261u;
  for (; *name; ++name) {
    h ^= static_cast<unsigned char>(*name);
    h *= 16777619u;
  }
  return h;
}

/// The active backend's name hashed (handles of another backend are refused).
std::uint32_t backend_tag() {
  // Not a function-local static: its guard, pending in a thread at fork(), would hang the child.
  return hash_name(system::get().gpu().name());
}

/// Start time (field 22) and state (field 3) of /proc/<pid>/stat; nullopt when it is gone.
std::optional<std::pair<std::uint64_t, char>> proc_stat(std::int32_t pid) {
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  if (!f) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::string field;
  char state = '?';
  std::uint64_t start = 0;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) start = std::strtoull(field.c_str(), nullptr, 10);
  }
  return std::make_pair(start, state);
}

}  // namespace

std::uint64_t self_token() {
  // Not cached: a child of fork() has its own start time.
  auto s = proc_stat(static_cast<std::int32_t>(getpid()));
  return s ? s->first : 0;
}

bool process_alive(std::int32_t pid, std::uint64_t token) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto s = proc_stat(pid);
  if (!s) return false;  // exited between the two checks
  if (s->second == 'Z' || s->second == 'X') return false;  // killed, not yet reaped
  if (token != 0 && s->first != 0 && s->first != token) return false;  // the pid was reused
  return true;
}

std::string segment_name(std::int32_t pid, std::uint64_t token, std::uint64_t nonce) {
  return fmt::format("/memarea-ipc-{}-{}-{:016x}", pid, token, nonce);
}

std::uint64_t native_digest(const unsigned char (&native)[64]) noexcept {
  std::uint64_t h = 0x6e61746976656831ull;
  for (std::size_t i = 0; i < sizeof native; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, native + i, 8);
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
  }
  return h;
}

wire parse(const ipc::handle& h) {
  wire w;
  std::memcpy(&w, h.bytes.data(), sizeof w);
  auto bad = [](const std::string& why) {
    return error(errc::invalid_handle, "not a valid memarea IPC handle: " + why);
  };
  if (w.magic != kHandleMagic) throw bad("bad magic");
  if (w.version != kHandleVersion)
    throw bad(fmt::format("version {} (this memarea reads version {})", w.version,
                          kHandleVersion));
  if (w.checksum != checksum(w)) throw bad("checksum mismatch (corrupted bytes)");
  // The offset is checked against the exporter's segment and the driver at the open: the
  // handle says nothing trusted about the allocation's size.
  if (w.nonce == 0 || w.pid <= 0 || w.buffer_id == 0 ||
      w.slot >= kBuffers || w.reserved != 0)
    throw bad("fields out of range");
  if (w.backend != backend_tag())
    throw bad(fmt::format("exported by another backend than this process's '{}'",
                          system::get().gpu().name()));
  return w;
}

ipc_native_handle native_of(const ipc::handle& h) {
  wire w = parse(h);
  ipc_native_handle n;
  std::memcpy(n.bytes, w.native, sizeof n.bytes);
  return n;
}

}  // namespace ipc_internal

namespace {
using namespace ipc_internal;
using clock_type = std::chrono::steady_clock;

class state;
/// This process's state; null until the first IPC call, in a child of fork() until its first
/// IPC call, and after exit.
std::atomic<state*> g_state{nullptr};
/// Set once the state was shut down at exit: later IPC calls are refused, not given a new one.
std::atomic<bool> g_exited{false};
/// The states of ancestors that a fork() child inherited: never used nor destroyed there (their
/// locks and bookkeeping are the parent's), kept reachable for leak checkers.
state* g_inherited = nullptr;
/// The state shut down at exit (see exit_guard): never deleted.
state* g_retired = nullptr;

/// Bumped by every free of an exported allocation, in a child of fork() and at exit. A handle
/// in a thread's export cache is valid only under the value it was made under, so a cached handle can never outlive its allocation (free, then a new allocation
/// at the same address, gets a new handle). Starts at 1: an empty cache slot (0) never matches.
std::atomic<std::uint64_t> g_export_generation{1};

/// Recent exports of one thread: pointer -> finished handle. Trivial, so thread_local costs no
/// guard or destructor.
struct export_cache {
  static constexpr unsigned kSlots = 8;
  struct slot {
    const void* ptr;
    std::uint64_t generation;
    unsigned char bytes[128];
  };
  slot slots[kSlots];
  unsigned next;
};
thread_local constinit export_cache t_exports{};

void on_fork_child();
/// Made when memarea is loaded, so that a child of fork() is told even when its parent had no
/// IPC state yet. Its child handler runs after the driver's and before the locks are renewed.
struct ipc_fork final : fork_participant {
  ipc_fork() noexcept : fork_participant(lock_rank::ipc_fork_state) {}
  void fork_child() noexcept override { on_fork_child(); }
};
ipc_fork g_ipc_fork;

constexpr auto kPurgeInterval = std::chrono::milliseconds(100);  // dead-pid scans, at most
constexpr auto kOwnerCheckInterval = std::chrono::milliseconds(50);

/// Removes the segments of exporters that died without cleaning up (crash, SIGKILL, abort), so
/// they do not accumulate in /dev/shm; run once per process, at its first export.
void remove_dead_segments() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    long long pid = 0;
    unsigned long long token = 0;
    char tail = 0;
    // memarea-ipc-<pid>-<token>-<nonce> (and the nonce-less names of version 1)
    const int got = std::sscanf(e->d_name, "memarea-ipc-%lld-%llu%c", &pid, &token, &tail);
    if (got != 2 && !(got == 3 && tail == '-')) continue;
    if (pid <= 0 || pid > INT32_MAX) continue;
    if (process_alive(static_cast<std::int32_t>(pid), token)) continue;
    shm_unlink((std::string("/") + e->d_name).c_str());
  }
  closedir(d);
}

/// Frees an importer slot if its process is gone; true when it did.
bool purge_if_dead(buffer_slot& b, importer_slot& s) {
  std::int32_t pid = at(s.pid).load();
  if (pid == 0) return false;
  std::uint64_t token = at(s.token).load();
  if (process_alive(pid, token)) return false;
  // Only the pid is cleared: a new importer may take the slot at once and write its token.
  (void)b;
  return at(s.pid).compare_exchange_strong(pid, 0);
}

void purge_dead(buffer_slot& b) {
  for (auto& s : b.who) purge_if_dead(b, s);
}

/// The registry record of memory IPC mapped (no area frees it: see the sentinels).
record ipc_record(void* base, std::size_t size, memarea_memory_kind kind, int device,
                  int sentinel) {
  record r;
  r.base = base;
  r.size = size;
  r.requested = size;
  r.kind = kind;
  r.device = device;
  r.context_device = device;
  r.made_by = origin::area;
  r.area_flags = kNoAreaFlags;
  r.area_device = sentinel;
  r.id = allocations().next_id();
  return r;
}

/// Removes the registry record with this id at base (and nothing else).
void erase_record(void* base, std::uint64_t id) {
  allocations().erase_if(base, [id](const record& r) { return r.id == id; });
}

// --- export side -------------------------------------------------------------------------------

struct exported {
  void* driver_base = nullptr;
  std::size_t driver_size = 0;
  int device = 0;
  ipc_native_handle native{};
  std::uint32_t slot = 0;
};

struct deferred_free {
  record r;
  std::uint32_t slot;
};

struct key {
  std::int32_t pid;
  std::uint64_t token;
  std::uint64_t buffer;
  bool operator==(const key&) const = default;
};
struct key_hash {
  std::size_t operator()(const key& k) const noexcept {
    return std::hash<std::uint64_t>()(k.buffer * 0x9e3779b97f4a7c15ull ^ k.token ^
                                      (static_cast<std::uint64_t>(k.pid) << 32));
  }
};

/// One exporting process this process imports from.
struct owner {
  segment* seg = nullptr;
  std::int32_t pid = 0;
  std::uint64_t token = 0;
  int entries = 0;
  clock_type::time_point checked{};
};

/// One mapping of another process's buffer.
struct entry {
  void* base = nullptr;       ///< the driver's mapping
  std::size_t size = 0;       ///< bytes mapped (the exporter's record, bounded by the driver's)
  std::uint64_t digest = 0;   ///< the exporter's native_digest of the driver handle
  int device = 0;
  std::uint32_t slot = 0;
  owner* from = nullptr;
  int refs = 0;               ///< open() calls not yet closed, over all pointers into it
  bool registered = false;    ///< holds an importer slot in the owner's segment
  bool cached = false;        ///< closed, in the LRU list
  importer_slot* who = nullptr;
  std::uint64_t record_id = 0;
  std::list<key>::iterator lru;  ///< valid while refs == 0
};

struct opened_ptr {
  key k;
  int count = 0;
};

class state {
 public:
  /// This process's state, made by the first IPC call. Throws not_supported in a child of
  /// fork() whose backend cannot be used there, and invalid_value for a malformed
  /// MEMAREA_IPC_CACHE_LIMIT.
  static state& get() {
    if (state* s = g_state.load(std::memory_order_acquire)) [[likely]]
      return *s;
    return make();
  }

  state() : pid_(static_cast<std::int32_t>(getpid())), token_(self_token()) {
    if (const char* v = std::getenv("MEMAREA_IPC_CACHE_LIMIT"); v && *v) {
      // Digits only: no sign, spaces or suffix (strtoull would wrap "-1" and skip spaces).
      std::size_t n = 0;
      const char* end = v + std::strlen(v);
      auto [stop, ec] = std::from_chars(v, end, n);
      if (ec != std::errc() || stop != end)
        throw error(errc::invalid_value,
                    fmt::format("MEMAREA_IPC_CACHE_LIMIT='{}' is not a number of mappings (a "
                                "decimal integer from 0 to {}); fix it or unset it",
                                v, std::numeric_limits<std::size_t>::max()));
      limit_.store(n);
    }
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  /// Closes every mapping, finishes what the deferred frees can and removes this process's
  /// segment (at exit).
  void shutdown() {
    {
      std::lock_guard lock(im_);
      while (!entries_.empty()) {
        auto it = entries_.begin();
        it->second.refs = 0;
        evict_locked(it);
      }
      opened_.clear();
    }
    std::lock_guard lock(ex_);
    (void)poll_exports_locked(true);
    if (seg_) {
      at(seg_->owner_alive).store(0);
      munmap(seg_, sizeof(segment));
      shm_unlink(seg_name_.c_str());
      seg_ = nullptr;
    }
  }

  /// The state a fork() child inherited, before this one (see g_inherited).
  state* older = nullptr;

  // --- export ----------------------------------------------------------------------------------

  ipc::handle export_handle(const void* ptr) {
    if (!ptr) throw error(errc::invalid_value, "export_handle: pointer is NULL");
    auto r = allocations().find(ptr);
    if (!r)
      throw error(errc::invalid_value,
                  fmt::format("export_handle: {} is not in a memarea allocation", ptr));
    if (r->area_device == kShareableSentinel || r->area_device == kShareableImportedSentinel)
      throw error(errc::not_supported,
                  fmt::format("export_handle: {} is shareable (VMM) memory, which legacy IPC "
                              "cannot share; use ipc::export_fd",
                              ptr));
    if (r->kind != MEMAREA_MEMORY_DEVICE)
      throw error(errc::not_supported,
                  fmt::format("export_handle: {} is {} memory; legacy IPC shares device "
                              "memory only (managed memory is not supported by the drivers)",
                              ptr, to_string(static_cast<memory_kind>(r->kind))));
    wire w{};
    bool created = false;
    {
      std::lock_guard lock(ex_);
      poll_exports_locked(false);
      auto it = exports_.find(r->id);
      if (it == exports_.end()) {
        it = add_export_locked(*r);
        created = true;
      }
      const exported& e = it->second;
      w.magic = kHandleMagic;
      w.version = kHandleVersion;
      std::memcpy(w.native, e.native.bytes, sizeof w.native);
      w.offset = static_cast<std::uint64_t>(static_cast<const char*>(ptr) -
                                            static_cast<const char*>(e.driver_base));
      w.nonce = nonce_;
      w.device = e.device;
      w.pid = pid_;
      w.buffer_id = r->id;
      w.token = token_;
      w.slot = e.slot;
      w.backend = backend_tag();
      w.checksum = checksum(w);
    }
    // A free racing with the first export may have run its hook before the entry existed; then
    // the record is gone now and the entry must not outlive it (it would name freed memory).
    // An entry that existed before is the hook's to remove.
    auto again = created ? allocations().find(ptr) : r;
    if (!again || again->id != r->id) {
      std::lock_guard lock(ex_);
      drop_export_locked(r->id);
      throw error(errc::invalid_value,
                  fmt::format("export_handle: {} was freed while being exported", ptr));
    }
    ipc::handle h;
    std::memcpy(h.bytes.data(), &w, sizeof w);
    return h;
  }

  /// free_record's hook (under the registry's lock).
  bool on_free(const record& r) {
    if (!tracking_.load()) return false;
    std::lock_guard lock(ex_);
    poll_exports_locked(false);
    ipc::free_policy policy = policy_.load();
    if (auto p = policies_.find(r.id); p != policies_.end()) policy = p->second;
    auto it = exports_.find(r.id);
    if (it == exports_.end()) {
      policies_.erase(r.id);
      return false;
    }
    buffer_slot& b = seg_->slot[it->second.slot];
    purge_dead(b);
    if (policy == ipc::free_policy::refuse && importers_of(b) > 0)
      throw error(errc::busy,
                  fmt::format("{} is open in {} other process(es) and its free policy is "
                              "refuse; free it after they close it",
                              r.base, importers_of(b)));
    policies_.erase(r.id);
    // Before the record goes: no thread may serve a cached handle of this allocation again.
    // (Only exported allocations can be in a thread's cache: an export racing with this free
    // made its entry after this check, sees the record gone and caches nothing.)
    g_export_generation.fetch_add(1);
    // Stale from now on; an importer registering concurrently sees this store or is counted
    // below (both sides store, then load, sequentially consistent).
    at(b.live).store(0);
    const std::uint32_t slot = it->second.slot;
    exports_.erase(it);
    if (importers_of(b) == 0) {
      release_slot_locked(slot);
      return false;
    }
    deferred_.push_back({r, slot});
    deferred_count_.store(deferred_.size());
    return true;
  }

  void set_policy(const void* ptr, ipc::free_policy p) {
    if (!ptr) throw error(errc::invalid_value, "set_free_policy: pointer is NULL");
    auto r = allocations().find(ptr);
    if (!r || r->area_device <= kImportedSentinel)
      throw error(errc::invalid_value,
                  fmt::format("set_free_policy: {} is not memory this process allocated", ptr));
    std::lock_guard lock(ex_);
    policies_[r->id] = p;
    tracking_.store(true);
  }
  void set_policy(ipc::free_policy p) { policy_.store(p); }
  ipc::free_policy policy() const { return policy_.load(); }

  int importers(const void* ptr) {
    auto r = allocations().find(ptr);
    if (!r) return 0;
    std::lock_guard lock(ex_);
    auto it = exports_.find(r->id);
    if (it == exports_.end()) return 0;
    buffer_slot& b = seg_->slot[it->second.slot];
    purge_dead(b);
    return static_cast<int>(importers_of(b));
  }

  std::size_t deferred() const { return deferred_count_.load(); }

  /// Finishes deferred frees (and drops stale cached mappings); returns the frees finished.
  std::size_t collect(bool force) {
    std::size_t done = 0;
    if (force || deferred_count_.load() > 0) {
      std::lock_guard lock(ex_);
      done = poll_exports_locked(force);
    }
    if (force || clock_type::now() - last_sweep_.load() > kPurgeInterval) {
      last_sweep_.store(clock_type::now());
      std::lock_guard lock(im_);
      sweep_cache_locked();
    }
    return done;
  }

  // --- import ----------------------------------------------------------------------------------

  void* open(const ipc::handle& h, int device, unsigned flags) {
    const wire w = parse(h);
    if (flags & ~unsigned{MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS})
      throw error(errc::invalid_value,
                  fmt::format("ipc open: flags {:#x}: only 0 and "
                              "MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS (0x1) are allowed",
                              flags));
    auto& sys = system::get();
    if (device < 0) device = current_device();
    sys.check_device(device, "ipc open");
    (void)collect(false);
    if (w.pid == pid_ && w.token == token_ && w.nonce == nonce_) return open_own(w);

    const key k{w.pid, w.token, w.buffer_id};
    std::lock_guard lock(im_);
    auto it = entries_.find(k);
    if (it != entries_.end()) {
      entry& e = it->second;
      if (!owner_alive_locked(*e.from)) {
        if (e.refs == 0) evict_locked(it);
        throw error(errc::invalid_handle,
                    fmt::format("ipc open: the exporting process {} has exited", w.pid));
      }
      if (e.digest != native_digest(w.native) || w.offset >= e.size) throw mismatch(w);
      if (e.refs == 0) {
        if (!register_locked(e, w)) {
          evict_locked(it);
          throw stale(w);
        }
        lru_.erase(e.lru);
        e.cached = false;
      } else if (!buffer_live(*e.from, w)) {
        throw stale(w);
      }
      return hand_out_locked(k, e, w.offset);
    }

    owner& o = owner_locked(w);  // throws invalid_handle for exited owners
    entry e;
    e.device = device;
    e.slot = w.slot;
    e.from = &o;
    ++o.entries;
    if (!register_locked(e, w)) {
      release_owner_locked(o);
      throw stale(w);
    }
    // Against what the exporter really shared (read once registered: the slot is this buffer's
    // and cannot be reused under us): the driver handle and the allocation's size it recorded.
    {
      buffer_slot& b = o.seg->slot[w.slot];
      e.size = at(b.size).load();
      e.digest = at(b.digest).load();
      if (e.digest != native_digest(w.native) || e.size == 0 || w.offset >= e.size) {
        unregister_locked(e);
        release_owner_locked(o);
        throw mismatch(w);
      }
    }
    ipc_native_handle native;
    std::memcpy(native.bytes, w.native, sizeof native.bytes);
    void* base = nullptr;
    // CUDA and HIP refuse 0 ("must be specified as ..._LAZY_ENABLE_PEER_ACCESS", seen as
    // CUDA_ERROR_INVALID_VALUE on an H200): lazy enabling costs nothing on the memory's own
    // device, so memarea's 0 and LAZY both reach the driver as LAZY.
    (void)flags;
    dstatus s = sys.gpu().ipc_open_handle(device, native, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS,
                                          &base);
    if (!s.ok()) {
      unregister_locked(e);
      release_owner_locked(o);
      if (s.code == errc::invalid_context || s.code == errc::invalid_value)
        s.code = errc::invalid_handle;  // the driver rejects the handle's bytes
      throw_status(s, fmt::format("ipc open of buffer {} of process {} on device {}",
                                  w.buffer_id, w.pid, device));
    }
    // The driver's own word on what it mapped bounds the offset too; and a mapping that is
    // already open under another handle (a handle carrying another buffer's driver handle) is
    // refused: two entries must never share one mapping.
    pointer_info pi;
    if (sys.gpu().pointer_query(base, &pi).ok() && pi.base == base && pi.size != 0)
      e.size = std::min<std::size_t>(e.size, pi.size);
    const bool shared_mapping = std::any_of(entries_.begin(), entries_.end(),
                                            [&](const auto& kv) { return kv.second.base == base; });
    if (w.offset >= e.size || shared_mapping) {
      (void)sys.gpu().ipc_close_handle(base);  // drops the reference this open took
      unregister_locked(e);
      release_owner_locked(o);
      throw mismatch(w);
    }
    e.base = base;
    try {
      record r = ipc_record(base, e.size, MEMAREA_MEMORY_IPC_IMPORTED, device, kImportedSentinel);
      allocations().insert(r);
      e.record_id = r.id;
      auto [pos, inserted] = entries_.emplace(k, e);
      (void)inserted;
      return hand_out_locked(k, pos->second, w.offset);
    } catch (...) {
      if (e.record_id) erase_record(base, e.record_id);
      entries_.erase(k);
      (void)sys.gpu().ipc_close_handle(base);
      unregister_locked(e);
      release_owner_locked(o);
      throw;
    }
  }

  void close(void* ptr) {
    if (!ptr) throw error(errc::invalid_value, "ipc close: pointer is NULL");
    (void)collect(false);
    {
      std::lock_guard lock(ex_);
      if (auto it = self_opened_.find(ptr); it != self_opened_.end()) {
        if (--it->second == 0) self_opened_.erase(it);
        return;
      }
    }
    std::lock_guard lock(im_);
    auto it = opened_.find(ptr);
    if (it == opened_.end())
      throw error(errc::invalid_value,
                  fmt::format("ipc close: {} is not a pointer returned by ipc open (or it was "
                              "closed as many times as it was opened)",
                              ptr));
    const key k = it->second.k;
    auto e_it = entries_.find(k);
    if (e_it == entries_.end())  // never: every opened pointer's entry lives while it is open
      throw error(errc::unknown, fmt::format("ipc close: {} has no mapping entry", ptr));
    if (--it->second.count == 0) opened_.erase(it);
    entry& e = e_it->second;
    if (--e.refs > 0) return;
    // Last close: the owner may free the memory now; the mapping itself stays cached.
    unregister_locked(e);
    const bool stale_now = !at(e.from->seg->slot[e.slot].live).load() ||
                           at(e.from->seg->slot[e.slot].id).load() != k.buffer ||
                           !at(e.from->seg->owner_alive).load();
    if (stale_now || limit_.load() == 0) {
      evict_locked(e_it);
      return;
    }
    lru_.push_front(k);
    e.lru = lru_.begin();
    e.cached = true;
    trim_locked();
  }

  void set_limit(std::size_t n) {
    limit_.store(n);
    std::lock_guard lock(im_);
    trim_locked();
  }
  std::size_t limit() const { return limit_.load(); }
  std::size_t cached() {
    std::lock_guard lock(im_);
    return lru_.size();
  }
  /// (owner pid, buffer id) of the cached mappings, most recently used first.
  std::vector<std::pair<std::int32_t, std::uint64_t>> cached_keys() {
    std::lock_guard lock(im_);
    std::vector<std::pair<std::int32_t, std::uint64_t>> v;
    for (const key& k : lru_) v.emplace_back(k.pid, k.buffer);
    return v;
  }

 private:
  // --- export internals (ex_ held) ---------------------------------------------------------------

  void ensure_segment_locked() {
    if (seg_) return;
    remove_dead_segments();
    // A name that exists already is not ours (another user may have made it to block us): a
    // fresh random part is drawn, and the object is never opened or removed.
    std::string name;
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
      nonce_ = random_u64();
      name = segment_name(pid_, token_, nonce_);
      fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
      throw error(errc::unknown, fmt::format("ipc export: shm_open({}) failed: {}", name,
                                             std::strerror(errno)));
    if (ftruncate(fd, sizeof(segment)) != 0) {
      int e = errno;
      ::close(fd);
      shm_unlink(name.c_str());
      throw error(e == ENOSPC || e == ENOMEM ? errc::out_of_memory : errc::unknown,
                  fmt::format("ipc export: sizing {} failed: {}", name, std::strerror(e)));
    }
    void* p = fresh_mmap(nullptr, sizeof(segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      shm_unlink(name.c_str());
      throw error(errc::out_of_memory,
                  fmt::format("ipc export: mapping {} failed: {}", name, std::strerror(e)));
    }
    seg_ = static_cast<segment*>(p);
    seg_->buffers = kBuffers;
    seg_->owner_pid = pid_;
    seg_->owner_token = token_;
    seg_->version = kSegmentVersion;
    at(seg_->owner_alive).store(1);
    at(seg_->magic).store(kSegmentMagic);  // last: importers check it first
    seg_name_ = name;
  }

  std::unordered_map<std::uint64_t, exported>::iterator add_export_locked(const record& r) {
    ensure_segment_locked();
    auto& gpu = system::get().gpu();
    // The driver's allocation may start before memarea's record (cudaMalloc packs small
    // allocations): the handle names the driver's base and the offset is taken from it.
    exported e;
    e.driver_base = r.base;
    e.driver_size = r.size;
    e.device = r.device;
    pointer_info pi;
    if (gpu.pointer_query(r.base, &pi).ok() && pi.base && pi.size &&
        static_cast<char*>(pi.base) <= static_cast<char*>(r.base) &&
        static_cast<char*>(r.base) + r.size <= static_cast<char*>(pi.base) + pi.size) {
      e.driver_base = pi.base;
      e.driver_size = pi.size;
    }
    check(gpu.ipc_get_handle(e.driver_base, &e.native),
          fmt::format("ipc export of {} (device {})", r.base, r.device).c_str());
    e.slot = claim_slot_locked(r.id, e.driver_size, native_digest(e.native.bytes));
    tracking_.store(true);
    return exports_.emplace(r.id, e).first;
  }

  /// A free slot, filled with what importers check handles against; the id last, since an
  /// importer checks it first.
  std::uint32_t claim_slot_locked(std::uint64_t id, std::uint64_t size, std::uint64_t digest) {
    for (std::uint32_t n = 0; n < kBuffers; ++n) {
      const std::uint32_t i = (hint_ + n) % kBuffers;
      buffer_slot& b = seg_->slot[i];
      if (at(b.id).load() != 0 || importers_of(b) != 0) continue;
      at(b.size).store(size);
      at(b.digest).store(digest);
      at(b.live).store(1);
      at(b.id).store(id);
      hint_ = i + 1;
      return i;
    }
    throw error(errc::out_of_memory,
                fmt::format("ipc export: {} buffers of this process are exported or still "
                            "open elsewhere; free some first",
                            kBuffers));
  }

  void release_slot_locked(std::uint32_t i) {
    at(seg_->slot[i].live).store(0);
    at(seg_->slot[i].id).store(0);
  }

  void drop_export_locked(std::uint64_t id) {
    auto it = exports_.find(id);
    if (it == exports_.end()) return;
    buffer_slot& b = seg_->slot[it->second.slot];
    at(b.live).store(0);
    if (importers_of(b) == 0) release_slot_locked(it->second.slot);
    exports_.erase(it);
  }

  /// Gives deferred memory back to the driver once no importer holds it; dead importers are
  /// purged at most every kPurgeInterval (a /proc read each), or now when forced.
  std::size_t poll_exports_locked(bool force) {
    if (deferred_.empty()) return 0;
    const auto now = clock_type::now();
    const bool purge = force || now - last_purge_ > kPurgeInterval;
    if (purge) last_purge_ = now;
    std::size_t done = 0;
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      buffer_slot& b = seg_->slot[it->slot];
      if (purge) purge_dead(b);
      if (importers_of(b) != 0) {
        ++it;
        continue;
      }
      // A failed driver free cannot be reported to anyone now; the memory stays allocated
      // (as it would have without IPC), and the slot is freed either way.
      (void)release(it->r);
      release_slot_locked(it->slot);
      it = deferred_.erase(it);
      ++done;
    }
    deferred_count_.store(deferred_.size());
    return done;
  }

  void* open_own(const wire& w) {
    std::lock_guard lock(ex_);
    auto it = exports_.find(w.buffer_id);
    if (it == exports_.end() || it->second.slot != w.slot)
      throw error(errc::invalid_handle,
                  fmt::format("ipc open: the handle names buffer {} of this process, which was "
                              "freed (stale handle)",
                              w.buffer_id));
    if (std::memcmp(it->second.native.bytes, w.native, sizeof w.native) != 0 ||
        w.offset >= it->second.driver_size)
      throw mismatch(w);
    void* p = static_cast<char*>(it->second.driver_base) + w.offset;
    ++self_opened_[p];
    return p;
  }

  // --- import internals (im_ held) ---------------------------------------------------------------

  static error mismatch(const wire& w) {
    return error(errc::invalid_handle,
                 fmt::format("ipc open: the handle does not match what process {} exported as "
                             "buffer {} (its driver handle, or an offset outside the allocation)",
                             w.pid, w.buffer_id));
  }

  static error stale(const wire& w) {
    return error(errc::invalid_handle,
                 fmt::format("ipc open: buffer {} of process {} was freed (stale handle)",
                             w.buffer_id, w.pid));
  }

  static bool buffer_live(const owner& o, const wire& w) {
    buffer_slot& b = o.seg->slot[w.slot];
    return at(b.id).load() == w.buffer_id && at(b.live).load() == 1;
  }

  /// Takes an importer slot for this process, then checks the buffer is still live (after the
  /// slot is visible, so the owner's free either sees us or we see its free).
  bool register_locked(entry& e, const wire& w) {
    buffer_slot& b = e.from->seg->slot[w.slot];
    if (at(b.id).load() != w.buffer_id || at(b.live).load() != 1) return false;
    importer_slot* mine = nullptr;
    for (int round = 0; round < 2 && !mine; ++round) {
      for (auto& s : b.who) {
        std::int32_t expected = 0;
        if (at(s.pid).compare_exchange_strong(expected, pid_)) {
          mine = &s;
          break;
        }
      }
      if (!mine && round == 0) purge_dead(b);  // dead importers may be holding every slot
    }
    if (!mine)
      throw error(errc::busy, fmt::format("ipc open: {} processes already have buffer {} of "
                                          "process {} open",
                                          kImporterSlots, w.buffer_id, w.pid));
    at(mine->token).store(token_);
    e.who = mine;
    e.registered = true;
    if (at(b.id).load() != w.buffer_id || at(b.live).load() != 1) {
      unregister_locked(e);
      return false;
    }
    return true;
  }

  void unregister_locked(entry& e) {
    if (!e.registered) return;
    e.registered = false;
    buffer_slot& b = e.from->seg->slot[e.slot];
    std::int32_t expected = pid_;
    (void)b;
    // The owner may have purged us meanwhile (it thought us dead), and another importer may
    // hold the slot now: clear it only while it is still ours.
    (void)at(e.who->pid).compare_exchange_strong(expected, 0);
    e.who = nullptr;
  }

  void* hand_out_locked(const key& k, entry& e, std::uint64_t offset) {
    void* p = static_cast<char*>(e.base) + offset;
    auto& o = opened_[p];
    o.k = k;
    ++o.count;
    ++e.refs;
    return p;
  }

  bool owner_alive_locked(owner& o) {
    if (!at(o.seg->owner_alive).load()) return false;
    const auto now = clock_type::now();
    if (now - o.checked < kOwnerCheckInterval) return true;
    o.checked = now;
    return process_alive(o.pid, o.token);
  }

  /// The owner's segment, mapped once per owner.
  owner& owner_locked(const wire& w) {
    for (auto& o : owners_)
      if (o.pid == w.pid && o.token == w.token) {
        if (!owner_alive_locked(o))
          throw error(errc::invalid_handle,
                      fmt::format("ipc open: the exporting process {} has exited", w.pid));
        return o;
      }
    const std::string name = segment_name(w.pid, w.token, w.nonce);
    int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      int e = errno;
      if (e == ENOENT)
        throw error(errc::invalid_handle,
                    fmt::format("ipc open: process {} has exited or never exported memory", w.pid));
      throw error(errc::invalid_handle, fmt::format("ipc open: cannot open {}: {}", name,
                                                    std::strerror(e)));
    }
    struct stat sb {};
    if (fstat(fd, &sb) != 0 || static_cast<std::size_t>(sb.st_size) < sizeof(segment)) {
      ::close(fd);
      throw error(errc::invalid_handle, fmt::format("ipc open: {} is not a memarea segment", name));
    }
    void* p = fresh_mmap(nullptr, sizeof(segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED)
      throw error(errc::out_of_memory,
                  fmt::format("ipc open: mapping {} failed: {}", name, std::strerror(e)));
    auto* seg = static_cast<segment*>(p);
    if (at(seg->magic).load() != kSegmentMagic || seg->version != kSegmentVersion ||
        seg->owner_pid != w.pid || seg->owner_token != w.token) {
      munmap(p, sizeof(segment));
      throw error(errc::invalid_handle, fmt::format("ipc open: {} is not a memarea segment "
                                                    "(or of another version)", name));
    }
    if (!at(seg->owner_alive).load() || !process_alive(w.pid, w.token)) {
      munmap(p, sizeof(segment));
      // Killed without cleaning up: remove its segment so it does not linger.
      shm_unlink(name.c_str());
      throw error(errc::invalid_handle,
                  fmt::format("ipc open: the exporting process {} has exited", w.pid));
    }
    owners_.push_back(owner{seg, w.pid, w.token, 0, clock_type::now()});
    return owners_.back();
  }

  void release_owner_locked(owner& o) {
    if (--o.entries > 0) return;
    munmap(o.seg, sizeof(segment));
    owners_.remove_if([&](const owner& x) { return &x == &o; });
  }

  /// Closes a mapping for real (refs == 0).
  void evict_locked(std::unordered_map<key, entry, key_hash>::iterator it) {
    entry& e = it->second;
    if (e.cached) lru_.erase(e.lru);
    unregister_locked(e);
    erase_record(e.base, e.record_id);
    // The owner may have freed the memory already; a failing close changes nothing we track.
    (void)system::get().gpu().ipc_close_handle(e.base);
    owner& o = *e.from;
    entries_.erase(it);
    release_owner_locked(o);
  }

  void evict_cached_locked(std::list<key>::iterator l) { evict_locked(entries_.find(*l)); }

  void trim_locked() {
    while (lru_.size() > limit_.load()) evict_cached_locked(std::prev(lru_.end()));
  }

  /// Drops cached mappings whose owner freed the buffer or exited.
  void sweep_cache_locked() {
    for (auto l = lru_.begin(); l != lru_.end();) {
      auto cur = l++;
      entry& e = entries_.at(*cur);
      buffer_slot& b = e.from->seg->slot[e.slot];
      const bool dead = at(b.id).load() != cur->buffer || !at(b.live).load() ||
                        !owner_alive_locked(*e.from);
      if (dead) evict_cached_locked(cur);
    }
  }

  static state& make();

  const std::int32_t pid_;
  const std::uint64_t token_;
  /// The random part of this process's segment name (drawn when the segment is made, under
  /// ex_; 0 until then, and no handle carries 0).
  std::uint64_t nonce_ = 0;

  ranked_mutex ex_{lock_rank::ipc_export};
  segment* seg_ = nullptr;
  std::string seg_name_;
  std::uint32_t hint_ = 0;
  std::unordered_map<std::uint64_t, exported> exports_;
  std::unordered_map<std::uint64_t, ipc::free_policy> policies_;
  std::vector<deferred_free> deferred_;
  std::atomic<std::size_t> deferred_count_{0};
  std::unordered_map<void*, int> self_opened_;
  std::atomic<bool> tracking_{false};  // anything exported or a per-buffer policy set
  std::atomic<ipc::free_policy> policy_{ipc::free_policy::defer};
  clock_type::time_point last_purge_{};

  ranked_mutex im_{lock_rank::ipc_import};
  std::list<owner> owners_;
  std::unordered_map<key, entry, key_hash> entries_;
  std::unordered_map<void*, opened_ptr> opened_;
  std::list<key> lru_;  // cached (closed) mappings, most recent first
  std::atomic<std::size_t> limit_{64};
  std::atomic<clock_type::time_point> last_sweep_{clock_type::now()};
};

/// Shuts the state down at exit. A function-local static made after the system and the
/// registry, so destroyed before them: the state still has a driver to close mappings and free
/// deferred memory with.
struct exit_guard {
  exit_guard() = default;
  exit_guard(const exit_guard&) = delete;
  exit_guard& operator=(const exit_guard&) = delete;
  ~exit_guard() {
    g_exited.store(true);
    g_export_generation.fetch_add(1);
    state* s = g_state.exchange(nullptr);
    if (!s) return;
    try {
      s->shutdown();
    } catch (...) {
      // Exit path: the process's death releases whatever is left.
    }
    // Not deleted: a thread still running at exit may have loaded s a moment ago (ipc_on_free,
    // export). Leaked on purpose, as the staging pool and a fork child's inherited states are,
    // and kept reachable so that leak checkers stay quiet.
    g_retired = s;
  }
};

state& state::make() {
  auto& sys = system::get();
  (void)allocations();
  {
    fork_init_guard init;
    static exit_guard guard;
  }
  if (g_exited.load())
    throw error(errc::not_supported, "memarea IPC was called after it shut down at exit");
  if (sys.creator_pid() != static_cast<int>(getpid()) && !sys.gpu().survives_fork())
    throw error(errc::not_supported,
                fmt::format("memarea IPC cannot be used in a child of fork() (without exec) whose "
                            "parent had started the {} backend: its driver is not fork-safe. "
                            "exec a new program, or fork before the first memarea call",
                            sys.gpu().name()));
  // Under fork_init_guard: its locks are fork participants, and a fork() must never find one
  // half-registered (fork_safety.hpp).
  fork_init_guard init;
  if (state* made = g_state.load(std::memory_order_acquire)) return *made;
  auto* fresh = new state();  // throws for a malformed MEMAREA_IPC_CACHE_LIMIT
  g_state.store(fresh, std::memory_order_release);
  return *fresh;
}

void on_fork_child() {
  // Single-threaded here. The parent's state (its segment, exports, imports, locks that other
  // threads may have held) is not the child's: keep it untouched and start a new one on the
  // first IPC call, with the child's pid. Every thread-cached handle is the parent's.
  if (state* s = g_state.exchange(nullptr)) {
    s->older = g_inherited;
    g_inherited = s;
  }
  g_export_generation.fetch_add(1);
}

/// export_handle through the calling thread's cache of recent exports.
ipc::handle export_cached(const void* ptr) {
  // Read before the slow path: a free racing with it bumps the generation, so what the slow
  // path returns is cached under an old one and never served again.
  const std::uint64_t generation = g_export_generation.load(std::memory_order_acquire);
  export_cache& c = t_exports;
  ipc::handle h;
  for (const auto& slot : c.slots) {
    if (slot.ptr == ptr && slot.generation == generation) {
      std::memcpy(h.bytes.data(), slot.bytes, sizeof slot.bytes);
      return h;
    }
  }
  h = state::get().export_handle(ptr);
  auto& slot = c.slots[c.next++ % export_cache::kSlots];
  slot.ptr = ptr;
  slot.generation = generation;
  std::memcpy(slot.bytes, h.bytes.data(), sizeof slot.bytes);
  return h;
}

}  // namespace

namespace ipc_internal {
std::vector<std::pair<std::int32_t, std::uint64_t>> cached_mapping_keys() {
  return state::get().cached_keys();
}
}  // namespace ipc_internal

bool ipc_on_free(const record& r) {
  if (r.area_device == kImportedSentinel)
    throw error(errc::invalid_value,
                fmt::format("{} is memory of another process opened through IPC; close it with "
                            "memarea_ipc_close_mem_handle / ipc::close",
                            r.base));
  if (r.area_device == kShareableSentinel || r.area_device == kShareableImportedSentinel)
    throw error(errc::invalid_value,
                fmt::format("{} is shareable memory; release it with memarea_shareable_release "
                            "/ ipc::release_shareable",
                            r.base));
  // Frees never create the IPC state: a process that exported nothing pays one atomic load.
  state* s = g_state.load(std::memory_order_acquire);
  return s ? s->on_free(r) : false;
}

}  // namespace memarea::detail

// --- C++ API -------------------------------------------------------------------------------------

namespace memarea::ipc {
using detail::state;

namespace {
constexpr char kHex[] = "0123456789abcdef";
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

handle::handle(const memarea_ipc_handle_t& h) noexcept {
  std::memcpy(bytes.data(), h.bytes, bytes.size());
}

memarea_ipc_handle_t handle::c() const noexcept {
  memarea_ipc_handle_t h;
  std::memcpy(h.bytes, bytes.data(), bytes.size());
  return h;
}

std::string handle::to_hex() const {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

handle handle::from_hex(std::string_view hex) {
  if (hex.size() != 256)
    throw error(errc::invalid_value,
                fmt::format("handle::from_hex: {} characters, not 256", hex.size()));
  handle h;
  for (std::size_t i = 0; i < 128; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw error(errc::invalid_value,
                  fmt::format("handle::from_hex: character {} is not a hex digit", 2 * i));
    h.bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return h;
}

handle export_handle(const void* ptr) { return detail::export_cached(ptr); }

void* open(const handle& h, int device, unsigned flags) {
  return state::get().open(h, device, flags);
}

void close(void* ptr) { state::get().close(ptr); }

mapping::mapping(const handle& h, int device, unsigned flags) : ptr_(open(h, device, flags)) {}

mapping& mapping::operator=(mapping&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    o.ptr_ = nullptr;
  }
  return *this;
}

void mapping::reset() noexcept {
  if (!ptr_) return;
  try {
    close(ptr_);
  } catch (...) {
    // A mapping only holds what open gave it; close cannot be refused.
  }
  ptr_ = nullptr;
}

void set_free_policy(free_policy p) {
  if (p != free_policy::defer && p != free_policy::refuse)
    throw error(errc::invalid_value, "set_free_policy: unknown policy");
  state::get().set_policy(p);
}
free_policy get_free_policy() { return state::get().policy(); }
void set_free_policy(const void* ptr, free_policy p) {
  if (p != free_policy::defer && p != free_policy::refuse)
    throw error(errc::invalid_value, "set_free_policy: unknown policy");
  state::get().set_policy(ptr, p);
}

void set_cache_limit(std::size_t n) { state::get().set_limit(n); }
std::size_t cache_limit() { return state::get().limit(); }
std::size_t cached_mappings() { return state::get().cached(); }
int importers(const void* ptr) { return state::get().importers(ptr); }
std::size_t deferred_frees() { return state::get().deferred(); }
std::size_t collect() { return state::get().collect(true); }

}  // namespace memarea::ipc
