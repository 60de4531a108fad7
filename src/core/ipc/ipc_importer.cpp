// The import half of legacy IPC (ipc_importer.hpp): open and close, the cache of closed
// mappings, the exporters' liveness, and lookup of an imported pointer. A first import from an
// exporter new here maps its segment first (ipc_first_import.cpp).
#include "core/ipc/ipc_importer.hpp"

#include "base/fault_guard.hpp"
#include "base/housekeeper.hpp"
#include "base/lease.hpp"
#include "core/memory/area_impl.hpp"
#include "core/ipc/ipc_exporter.hpp"
#include "core/ipc/ipc_impl.hpp"
#include "core/ipc/ipc_observer.hpp"
#include "core/memory/registry.hpp"
#include "core/system.hpp"
#include "testing/memarea_testing.hpp"

#include <fmt/format.h>

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

namespace memarea::detail::ipc_internal {

error segment_damaged(const wire& w) {
  return error(errc::invalid_handle,
               fmt::format("ipc open: the segment of exporting process {} was cut short by "
                           "another process (ftruncate): its handles can no longer be checked",
                           w.pid));
}

error exporter_exited(const wire& w) {
  return error(errc::invalid_handle,
               fmt::format("ipc open: the exporting process {} has exited", w.pid));
}

namespace {

/// The registry record of memory IPC mapped (no area frees it: see the sentinels).
record imported_record(void* base, std::size_t size, int device) {
  record r;
  r.base = base;
  r.size = size;
  r.requested = size;
  r.kind = MEMAREA_MEMORY_IPC_IMPORTED;
  r.device = device;
  r.context_device = device;
  r.made_by = origin::area;
  r.area_flags = kNoAreaFlags;
  r.area_device = kImportedSentinel;
  r.owner = observer_tag();  // lookup() asks IPC which buffer of the mapping holds a pointer
  r.id = allocations().next_id();
  return r;
}

void erase_record(void* base, std::uint64_t id) {
  allocations().erase_if(base, [id](const record& r) { return r.id == id; });
}

}  // namespace

importer::importer() : pid_(static_cast<std::int32_t>(getpid())) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  several_cpus_ = sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) > 1;
  spare_opened_.reserve(kSpareNodes);
  // The tables' first buckets now (the background thread makes the importer ahead of the
  // first import), not inside a first import.
  entries_.reserve(kSpareNodes);
  mappings_.reserve(kSpareNodes);
  by_digest_.reserve(kSpareNodes);
  opened_.reserve(kSpareNodes);
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
  if (const char* v = std::getenv("MEMAREA_IPC_TIMING"); v && *v) {
    if (std::strcmp(v, "1") != 0 && std::strcmp(v, "0") != 0)
      throw error(errc::invalid_value,
                  fmt::format("MEMAREA_IPC_TIMING='{}' is neither 1 (print the phases of each "
                              "first IPC open to stderr) nor 0; fix it or unset it",
                              v));
    timing_ = v[0] == '1';
  }
  if (const char* v = std::getenv("MEMAREA_IPC_OVERLAP"); v && *v) {
    if (std::strcmp(v, "1") != 0 && std::strcmp(v, "0") != 0)
      throw error(errc::invalid_value,
                  fmt::format("MEMAREA_IPC_OVERLAP='{}' is neither 1 (a first import from an "
                              "exporter opens the driver handle while the background thread "
                              "maps the exporter's segment) nor 0 (it maps and checks first); "
                              "fix it or unset it",
                              v));
    overlap_ = v[0] == '1';
  }
}

void importer::phase_times::stamp(phase p) noexcept {
  ns[p] = std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count();
}

void* importer::open(const wire& w, int device, std::uint64_t self, std::size_t* size) {
  const key k{w.owner, w.buffer_id};
  std::unique_lock lock(m_);
  auto it = entries_.find(k);
  if (it == entries_.end()) {
    std::string timing_line;
    void* p = open_new_locked(k, w, device, self, timing_line);
    if (size) *size = entries_.find(k)->second.end - w.offset;
    lock.unlock();
    if (!timing_line.empty()) (void)!::write(2, timing_line.data(), timing_line.size());
    return p;
  }
  // Cached or open already: no system call, whatever time passed since the last open (the
  // background thread keeps the exporter's liveness current).
  entry& e = it->second;
  if (e.from->known_gone) {
    const bool cut_short = fault_guard::damaged(e.from->guard);
    if (e.refs == 0) evict_locked(it);
    if (cut_short) throw segment_damaged(w);
    throw exporter_exited(w);
  }
  if (e.digest != native_digest(w.native) || w.offset < e.begin || w.offset >= e.end ||
      e.slot != w.slot)
    throw mismatch(w);
  void* p = static_cast<char*>(e.map->base) + w.offset;
  auto opened = opened_.find(p);
  if (opened != opened_.end() && !(opened->second.k == k)) throw mismatch(w);
  if (e.refs == 0) {
    if (!register_locked(e, w, self)) {
      const bool exporter_left = !e.from->alive();
      evict_locked(it);
      if (exporter_left) throw exporter_exited(w);
      throw stale(w);
    }
    unlink_lru_locked(e);
  } else {
    buffer_slot& b = e.from->seg->slot[w.slot];
    if (at(b.id).load() != w.buffer_id || at(b.live).load() != 1) {
      if (!e.from->alive()) throw exporter_exited(w);
      throw stale(w);
    }
  }
  if (size) *size = e.end - w.offset;
  return hand_out_locked(k, e, p, opened);
}

void* importer::open_new_locked(const key& k, const wire& w, int device, std::uint64_t self,
                                std::string& timing_line) {
  phase_times times;
  phase_times* t = timing_ ? &times : nullptr;
  if (t) t->stamp(phase_times::start);
  // Driver bytes that say whose memory they name (the sim's do) must name the exporter the
  // handle names: another process's bytes are never opened on that exporter's word.
  {
    ipc_native_handle native;
    std::memcpy(native.bytes, w.native, sizeof native.bytes);
    const std::uint64_t named = system::get().gpu().ipc_handle_owner(native);
    if (named != 0 && named != w.owner) throw mismatch(w);
  }
  early_open early;  // closed on every way out unless map_locked adopts it
  source* found = find_source_locked(w);  // throws invalid_handle for gone exporters
  if (!found) found = &first_source_locked(w, device, t, early);
  source& src = *found;
  if (t) t->stamp(phase_times::source);
  entry e;
  e.slot = w.slot;
  e.pid = w.pid;
  e.from = &src;
  ++src.entries;
  if (!register_locked(e, w, self)) {
    release_source_locked(src);
    throw stale(w);
  }
  // Against what the exporter really shared (read once registered: the slot is this buffer's
  // and cannot be reused under us): the driver handle and the range it recorded.
  {
    buffer_slot& b = src.seg->slot[w.slot];
    e.begin = at(b.begin).load();
    e.end = at(b.end).load();
    e.digest = at(b.digest).load();
    if (e.digest != native_digest(w.native) || e.begin >= e.end || w.offset < e.begin ||
        w.offset >= e.end) {
      if (early.base) note_forgery();
      unregister_locked(e);
      release_source_locked(src);
      throw mismatch(w);
    }
  }
  if (t) t->stamp(phase_times::registered);
  mapping* m = nullptr;
  try {
    m = &map_locked(src, w, device, t, early.tried ? &early : nullptr);
  } catch (const error&) {
    unregister_locked(e);
    release_source_locked(src);
    // Refused (by the driver, or a check after its open): an exporter that died (its lease not
    // tested yet) is said so.
    if (lease::test_owner(w.owner) == lease::holder::gone) throw exporter_exited(w);
    throw;
  } catch (...) {
    unregister_locked(e);
    release_source_locked(src);
    throw;
  }
  // The driver's own word on what it mapped bounds the range too.
  e.end = std::min<std::uint64_t>(e.end, m->size);
  e.map = m;
  ++m->entries;
  void* p = static_cast<char*>(m->base) + w.offset;
  auto opened = opened_.find(p);
  bool added = false;
  try {
    // A pointer open already under another buffer's handle (ranges that overlap: only a
    // segment written by someone else says so) is refused: each pointer counts for one buffer.
    if (w.offset >= e.end || opened != opened_.end()) throw mismatch(w);
    auto pos = entries_.emplace(k, e).first;
    added = true;
    void* out = hand_out_locked(k, pos->second, p, opened);
    if (t) {
      t->stamp(phase_times::end);
      timing_line = format_phases(*t, w);
    }
    return out;
  } catch (...) {
    if (added) entries_.erase(k);
    if (--m->entries == 0) unmap_locked(*m);
    unregister_locked(e);
    release_source_locked(src);
    throw;
  }
}

importer::mapping& importer::map_locked(source& src, const wire& w, int device,
                                        phase_times* t, early_open* early) {
  // A mapping of this exporter's made with the same driver handle serves every buffer of that
  // allocation (a pool block's sub-allocations): one driver open per allocation. (An early
  // open's exporter is new here: it has none.)
  const std::uint64_t digest = native_digest(w.native);
  mapping* known = early ? nullptr : find_mapping_locked(src, w, digest);
  if (known && known->open_entries == 0) {
    // Only closed buffers hold it: their allocation may be gone, and a new one at the same
    // address may have the same handle bytes. The freed buffers leave first (so the mapping
    // too when none of its buffers is live); a live one vouches for the allocation. So does
    // the buffer being opened, where equal bytes name one allocation: the exporter holds it
    // live with these bytes now (checked against its segment before this call), so the
    // mapping stays for it rather than be closed and opened again (a pool's next piece).
    if (system::get().gpu().ipc_handles_name_one_allocation()) {
      ++known->entries;  // not unmapped by the sweep
      sweep_cache_locked();
      --known->entries;
    } else {
      sweep_cache_locked();
      known = find_mapping_locked(src, w, digest);
    }
  }
  if (known) {
    if (t) t->ns[phase_times::driver_open] = t->ns[phase_times::size_query] = 0;
    return *known;
  }
  if (t) t->new_mapping = true;
  auto& sys = system::get();
  // What may throw, first: nothing is open yet (an early open stays early's to close).
  mappings_.reserve(mappings_.size() + 1);
  by_digest_.reserve(by_digest_.size() + 1);
  void* base = nullptr;
  dstatus s;
  if (early) {
    s = std::move(early->status);
    base = std::exchange(early->base, nullptr);
  } else {
    s = driver_open(w, device, &base);
    if (t) t->stamp(phase_times::driver_open);
  }
  if (s.ok()) driver_opens_.fetch_add(1, std::memory_order_relaxed);
  if (!s.ok()) {
    if (s.code == errc::invalid_context || s.code == errc::invalid_value)
      s.code = errc::invalid_handle;  // the driver rejects the handle's bytes
    throw_status(s, fmt::format("ipc open of buffer {} of process {} on device {}", w.buffer_id,
                                w.pid, device));
  }
  // A mapping the driver has open already under another handle (a handle carrying bytes that
  // name an allocation open under other bytes) is refused: each mapping holds one driver
  // reference, closed once.
  if (mappings_.count(base)) {
    (void)sys.gpu().ipc_close_handle(base);  // drops the reference this open took
    if (early) note_forgery();
    throw mismatch(w);
  }
  mapping m;
  m.base = base;
  m.from = &src;
  m.device = w.device;
  m.opened_on = device;
  std::memcpy(m.native, w.native, sizeof m.native);
  // The driver's own range of the new mapping (its address-range query: a first one costs
  // about a tenth of a first pointer-attribute query, which takes tens of microseconds).
  void* range_base = nullptr;
  std::size_t range_size = 0;
  m.size = sys.gpu().address_range(base, &range_base, &range_size).ok() && range_base == base &&
                   range_size != 0
               ? range_size
               : at(src.seg->slot[w.slot].end).load();
  if (t) t->stamp(phase_times::size_query);
  try {
    record r = imported_record(base, m.size, device);
    allocations().insert(r);
    m.record_id = r.id;
    mapping& placed = mappings_.emplace(base, m).first->second;  // reserved: cannot throw
    by_digest_.emplace(digest, base);
    if (t) t->stamp(phase_times::recorded);
    return placed;
  } catch (...) {
    if (m.record_id) erase_record(base, m.record_id);
    mappings_.erase(base);
    (void)sys.gpu().ipc_close_handle(base);
    throw;
  }
}

importer::mapping* importer::find_mapping_locked(const source& src, const wire& w,
                                                 std::uint64_t digest) {
  for (auto [it, last] = by_digest_.equal_range(digest); it != last; ++it) {
    mapping& m = mappings_.at(it->second);
    if (m.from == &src && std::memcmp(m.native, w.native, sizeof m.native) == 0) return &m;
  }
  return nullptr;
}

void importer::unmap_locked(mapping& m) {
  void* base = m.base;
  erase_record(base, m.record_id);
  // The exporter may have freed the memory already; a failing close changes nothing we track.
  (void)system::get().gpu().ipc_close_handle(base);
  const std::uint64_t digest = native_digest(m.native);
  for (auto [it, last] = by_digest_.equal_range(digest); it != last; ++it)
    if (it->second == base) {
      by_digest_.erase(it);
      break;
    }
  mappings_.erase(base);
}

void importer::close(void* ptr) {
  std::lock_guard lock(m_);
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
  if (--it->second.count == 0) forget_opened_locked(it);
  entry& e = e_it->second;
  if (--e.refs > 0) return;
  --e.map->open_entries;
  // Last close: the exporter may free the memory now; the mapping itself stays cached.
  unregister_locked(e);
  buffer_slot& b = e.from->seg->slot[e.slot];
  const bool stale_now =
      !at(b.live).load() || at(b.id).load() != k.buffer || e.from->known_gone;
  if (stale_now || limit_.load() == 0) {
    evict_locked(e_it);
    return;
  }
  if (spare_lru_.empty()) {
    lru_.push_front(k);
  } else {
    spare_lru_.front() = k;
    lru_.splice(lru_.begin(), spare_lru_, spare_lru_.begin());
  }
  e.lru = lru_.begin();
  e.cached = true;
  trim_locked();
}

void importer::set_limit(std::size_t n) {
  limit_.store(n);
  std::lock_guard lock(m_);
  trim_locked();
}

std::size_t importer::cached() {
  std::lock_guard lock(m_);
  return lru_.size();
}

std::size_t importer::mappings() {
  std::lock_guard lock(m_);
  return mappings_.size();
}

std::vector<std::pair<std::int32_t, std::uint64_t>> importer::cached_keys() {
  std::lock_guard lock(m_);
  std::vector<std::pair<std::int32_t, std::uint64_t>> v;
  for (const key& k : lru_) v.emplace_back(entries_.at(k).pid, k.buffer);
  return v;
}

void importer::check_exporters() {
  std::lock_guard lock(m_);
  for (auto& s : sources_) {
    if (!s.watch) s.watch = std::make_unique<exporter_watch>(s.owner);  // opens and tests it
    s.known_gone = s.watch->check() || fault_guard::damaged(s.guard) ||
                   !at(s.seg->owner_alive).load();
  }
  sweep_cache_locked();
}

void importer::shutdown() {
  std::lock_guard lock(m_);
  while (!entries_.empty()) {
    auto it = entries_.begin();
    it->second.refs = 0;
    evict_locked(it);
  }
  opened_.clear();
  // Every mapping closed with its last entry.
}

/// Takes an importer slot for this process, then checks the buffer is still live (after the
/// slot is visible, so the exporter's free either sees us or we see its free).
bool importer::register_locked(entry& e, const wire& w, std::uint64_t self) {
  buffer_slot& b = e.from->seg->slot[w.slot];
  if (at(b.id).load() != w.buffer_id || at(b.live).load() != 1) return false;
  importer_slot* mine = nullptr;
  for (int round = 0; round < 2 && !mine; ++round) {
    for (auto& s : b.who) {
      std::uint64_t expected = 0;
      if (at(s.owner).compare_exchange_strong(expected, self)) {
        mine = &s;
        break;
      }
    }
    if (!mine && round == 0) purge_gone_importers(b);  // the dead may hold every slot
  }
  if (!mine)
    throw error(errc::busy, fmt::format("ipc open: {} processes already have buffer {} of "
                                        "process {} open",
                                        kImporterSlots, w.buffer_id, w.pid));
  at(mine->pid).store(pid_);
  e.who = mine;
  e.self = self;
  e.registered = true;
  if (at(b.id).load() != w.buffer_id || at(b.live).load() != 1) {
    unregister_locked(e);
    return false;
  }
  return true;
}

void importer::unregister_locked(entry& e) {
  if (!e.registered) return;
  e.registered = false;
  // The exporter may have purged us meanwhile (it thought us dead), and another importer may
  // hold the slot now: clear it only while it is still ours.
  std::uint64_t expected = e.self;
  (void)at(e.who->owner).compare_exchange_strong(expected, 0);
  e.who = nullptr;
}

void* importer::hand_out_locked(const key& k, entry& e, void* p,
                                std::unordered_map<void*, opened_ptr>::iterator it) {
  if (it == opened_.end()) {
    if (spare_opened_.empty()) {
      it = opened_.emplace(p, opened_ptr{k, 0}).first;
    } else {
      auto node = std::move(spare_opened_.back());
      spare_opened_.pop_back();
      node.key() = p;
      node.mapped() = opened_ptr{k, 0};
      it = opened_.insert(std::move(node)).position;
    }
  }
  ++it->second.count;
  if (e.refs++ == 0) ++e.map->open_entries;
  return p;
}

importer::source* importer::find_source_locked(const wire& w) {
  for (auto& s : sources_)
    if (s.owner == w.owner && s.segment_id == w.segment) {
      if (fault_guard::damaged(s.guard)) throw segment_damaged(w);
      if (!s.alive()) throw exporter_exited(w);
      return &s;
    }
  return nullptr;
}

void importer::release_source_locked(source& s) {
  if (--s.entries > 0) return;
  fault_guard::unwatch(s.guard);
  munmap(s.seg, sizeof(segment));
  sources_.remove_if([&](const source& x) { return &x == &s; });
}

/// Forgets a buffer for real (refs == 0); its mapping closes with its last buffer.
void importer::evict_locked(entry_map::iterator it) {
  entry& e = it->second;
  if (e.cached) unlink_lru_locked(e);
  unregister_locked(e);
  mapping* m = e.map;
  source& s = *e.from;
  entries_.erase(it);
  if (--m->entries == 0) unmap_locked(*m);
  release_source_locked(s);
}

void importer::unlink_lru_locked(entry& e) {
  e.cached = false;
  if (spare_lru_.size() < kSpareNodes) spare_lru_.splice(spare_lru_.begin(), lru_, e.lru);
  else lru_.erase(e.lru);
}

void importer::forget_opened_locked(std::unordered_map<void*, opened_ptr>::iterator it) {
  if (spare_opened_.size() >= kSpareNodes) {
    opened_.erase(it);
    return;
  }
  auto node = opened_.extract(it);
  spare_opened_.push_back(std::move(node));  // reserved in the constructor: cannot throw
}

void importer::trim_locked() {
  while (lru_.size() > limit_.load()) evict_locked(entries_.find(lru_.back()));
}

/// Drops cached mappings whose exporter freed the buffer or exited.
void importer::sweep_cache_locked() {
  for (auto l = lru_.begin(); l != lru_.end();) {
    auto cur = l++;
    auto it = entries_.find(*cur);
    entry& e = it->second;
    buffer_slot& b = e.from->seg->slot[e.slot];
    if (at(b.id).load() != cur->buffer || !at(b.live).load() || !e.from->alive())
      evict_locked(it);
  }
}

std::optional<importer::buffer_range> importer::buffer_at(const void* mapping_base,
                                                          const void* p) {
  std::lock_guard lock(m_);
  auto m = mappings_.find(const_cast<void*>(mapping_base));
  if (m == mappings_.end()) return std::nullopt;
  const auto off = static_cast<std::uint64_t>(static_cast<const char*>(p) -
                                              static_cast<const char*>(mapping_base));
  // Linear in the buffers imported: lookup of imported memory is not on a copy's path.
  for (const auto& [k, e] : entries_) {
    if (e.map != &m->second || e.refs == 0 || off < e.begin || off >= e.end) continue;
    return buffer_range{static_cast<char*>(m->second.base) + e.begin, e.end - e.begin,
                        m->second.device};
  }
  // Mapped, but outside every open buffer: the whole mapping, still on the exporter's device.
  return buffer_range{m->second.base, m->second.size, m->second.device};
}

void importer::device_uses(int device, detail::device_uses& out) {
  std::lock_guard lock(m_);
  // Not a structured binding: clang before 16 cannot capture one in a lambda.
  for (const auto& entry : entries_) {
    const auto& k = entry.first;
    const auto& e = entry.second;
    if (e.refs == 0 || e.map->opened_on != device) continue;
    out.add([&] {
      return fmt::format("IPC mapping at {} ({} bytes) of buffer {} of process {}, open",
                         static_cast<const void*>(static_cast<char*>(e.map->base) + e.begin),
                         e.end - e.begin, k.buffer, e.pid);
    });
  }
}

void importer::drop_device(int device) {
  std::lock_guard lock(m_);
  for (auto l = lru_.begin(); l != lru_.end();) {
    auto cur = l++;  // evict_locked moves cur's node away
    auto it = entries_.find(*cur);
    if (it->second.map->opened_on == device) evict_locked(it);
  }
}

}  // namespace memarea::detail::ipc_internal
