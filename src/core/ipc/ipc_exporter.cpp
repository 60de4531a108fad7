#include "core/ipc/ipc_exporter.hpp"

#include "base/fault_guard.hpp"
#include "base/fresh_mmap.hpp"
#include "base/lease.hpp"
#include "base/random_name.hpp"
#include "core/memory/area_impl.hpp"
#include "core/memory/usage_counters.hpp"
#include "core/ipc/ipc_liveness.hpp"
#include "core/system.hpp"

#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

namespace memarea::detail::ipc_internal {

error mismatch(const wire& w) {
  return error(errc::invalid_handle,
               fmt::format("ipc open: the handle does not match what process {} exported as "
                           "buffer {} (its driver handle, or an offset outside the allocation)",
                           w.pid, w.buffer_id));
}

error stale(const wire& w) {
  return error(errc::invalid_handle,
               fmt::format("ipc open: buffer {} of process {} was freed (stale handle)",
                           w.buffer_id, w.pid));
}

wire exporter::export_handle(const void* ptr, const record& r) {
  std::lock_guard lock(m_);
  ensure_segment_locked();  // and that nobody cut it short
  auto it = exports_.find(r.id);
  if (it == exports_.end()) {
    it = add_export_locked(r);
    forget_if_cut_short_locked(it);
  }
  return make_wire_locked(ptr, r.id, it->second);
}

void exporter::forget_if_cut_short_locked(
    std::unordered_map<std::uint64_t, exported>::iterator it) {
  // Filling its slot was the first write to the segment since another process cut it short
  // (fault_guard repaired the fault with zeros): importers cannot read the record.
  if (!fault_guard::damaged(seg_guard_)) return;
  release_slot_locked(it->second.slot);
  exports_.erase(it);
  throw cut_short();
}

error exporter::cut_short() const {
  return error(errc::not_permitted,
               fmt::format("ipc export: another process cut this process's segment {} short "
                           "(ftruncate); importers can no longer check its handles, so this "
                           "process exports nothing more",
                           seg_name_));
}

wire exporter::export_pooled(const void* ptr, const record& r, const pool_piece& piece) {
  std::lock_guard lock(m_);
  ensure_segment_locked();  // and that nobody cut it short
  auto it = exports_.find(piece.export_id);
  if (it == exports_.end()) {
    exports_.reserve(exports_.size() + 1);  // what may throw, first
    block_natives_.reserve(block_natives_.size() + 1);
    exported e;
    // The block came from an area (one driver allocation each): its record is the driver's.
    e.driver_base = r.base;
    e.driver_size = r.size;
    e.begin = static_cast<std::uint64_t>(static_cast<const char*>(piece.base) -
                                         static_cast<const char*>(r.base));
    // What the allocation asked for: the rest of the piece is no one's to share.
    e.end = e.begin + (piece.requested ? piece.requested : piece.size);
    e.device = r.device;
    // One driver call per block: its sub-allocations share the handle (and importers open
    // the block once for all of them).
    auto known = block_natives_.find(r.id);
    if (known == block_natives_.end()) {
      ipc_native_handle native;
      check(system::get().gpu().ipc_get_handle(r.base, &native), [&] {
        return fmt::format("ipc export of pool memory {} (device {})", piece.base, r.device);
      });
      known = block_natives_.emplace(r.id, native).first;
    }
    e.native = known->second;
    e.slot = claim_slot_locked(piece.export_id, e.begin, e.end, native_digest(e.native.bytes),
                               e.device);
    tracking_.store(true);
    it = exports_.emplace(piece.export_id, e).first;
    forget_if_cut_short_locked(it);
  }
  const auto offset = static_cast<std::uint64_t>(static_cast<const char*>(ptr) -
                                                 static_cast<const char*>(it->second.driver_base));
  if (offset >= it->second.end)
    throw error(errc::invalid_value,
                fmt::format("ipc export: {} lies past the {} bytes its pool allocation asked for",
                            ptr, it->second.end - it->second.begin));
  return make_wire_locked(ptr, piece.export_id, it->second);
}

wire exporter::make_wire_locked(const void* ptr, std::uint64_t id, const exported& e) const {
  wire w{};
  w.magic = kHandleMagic;
  w.version = kHandleVersion;
  std::memcpy(w.native, e.native.bytes, sizeof w.native);
  w.offset = static_cast<std::uint64_t>(static_cast<const char*>(ptr) -
                                        static_cast<const char*>(e.driver_base));
  w.owner = owner_.load();
  w.device = e.device;
  w.pid = pid_;
  w.buffer_id = id;
  w.segment = segment_id_;
  w.slot = e.slot;
  w.backend = backend_tag();
  w.checksum = checksum(w);
  return w;
}

void exporter::drop(std::uint64_t id) {
  std::lock_guard lock(m_);
  auto it = exports_.find(id);
  if (it == exports_.end()) return;
  buffer_slot& b = seg_->slot[it->second.slot];
  at(b.live).store(0);
  if (importers_of(b) == 0) release_slot_locked(it->second.slot);
  exports_.erase(it);
}

exporter::free_outcome exporter::on_free(const record& r) {
  if (!tracking_.load()) return free_outcome::not_exported;
  std::lock_guard lock(m_);
  deferred_free d;
  d.r = r;
  return end_export_locked(r.id, r.base, false, std::move(d));
}

exporter::free_outcome exporter::on_pool_free(const pool_piece& piece, bool force_defer) {
  if (!tracking_.load()) return free_outcome::not_exported;
  std::lock_guard lock(m_);
  deferred_free d;
  d.piece = piece;  // its pool keeps the memory from reuse until finish_deferred gives it back
  return end_export_locked(piece.export_id, piece.base, force_defer, std::move(d));
}

exporter::free_outcome exporter::end_export_locked(std::uint64_t id, const void* base,
                                                   bool force_defer, deferred_free d) {
  ipc::free_policy policy = policy_.load();
  if (auto p = policies_.find(id); p != policies_.end()) policy = p->second;
  auto it = exports_.find(id);
  if (it == exports_.end()) {
    policies_.erase(id);
    return free_outcome::not_exported;
  }
  buffer_slot& b = seg_->slot[it->second.slot];
  if (!force_defer && policy == ipc::free_policy::refuse && importers_of(b) > 0 &&
      (purge_gone_importers(b), importers_of(b) > 0))
    throw error(errc::busy,
                fmt::format("{} is open in {} other process(es) and its free policy is "
                            "refuse; free it after they close it",
                            base, importers_of(b)));
  deferred_.reserve(deferred_.size() + 1);  // what may throw, first
  policies_.erase(id);
  // Stale from now on; an importer registering concurrently sees this store or is counted
  // below (both sides store, then load, sequentially consistent).
  at(b.live).store(0);
  const std::uint32_t slot = it->second.slot;
  exports_.erase(it);
  if (importers_of(b) == 0) {
    release_slot_locked(slot);
    return free_outcome::released;
  }
  // Importers that died holding it are purged by the background thread, which then frees it.
  d.slot = slot;
  deferred_.push_back(std::move(d));
  deferred_count_.store(deferred_.size());
  return free_outcome::deferred;
}

bool exporter::adopt_block(const record& r, const std::vector<std::uint64_t>& export_ids) {
  std::lock_guard lock(m_);
  block_natives_.erase(r.id);  // the pool is gone: nothing exports from the block again
  auto wait = std::make_shared<block_wait>();
  wait->r = r;
  for (auto& d : deferred_) {
    if (!d.piece.pool || std::find(export_ids.begin(), export_ids.end(), d.piece.export_id) ==
                             export_ids.end())
      continue;
    d.piece.pool = nullptr;  // no pool to give it back to: the block goes as a whole
    d.block = wait;
    ++wait->pending;
  }
  return wait->pending != 0;
}

void exporter::device_uses(int device, detail::device_uses& out) {
  std::lock_guard lock(m_);
  for (const deferred_free& d : deferred_) {
    if (d.block) {
      if (d.block->r.context_device != device) continue;
      out.add([&] {
        return fmt::format("pool piece at {} ({} bytes) of a destroyed pool, freed but open in "
                           "another process (IPC)",
                           d.piece.base, d.piece.size);
      });
    } else if (!d.piece.pool && d.r.context_device == device) {
      out.add([&] {
        return fmt::format("{} memory at {} ({} bytes), freed but open in another process (IPC)",
                           to_string(static_cast<memory_kind>(d.r.kind)), d.r.base, d.r.size);
      });
    }
  }
}

void exporter::forget_block(std::uint64_t id) {
  if (!tracking_.load()) return;
  std::lock_guard lock(m_);
  block_natives_.erase(id);
}

void exporter::set_policy(std::uint64_t id, ipc::free_policy p) {
  std::lock_guard lock(m_);
  policies_[id] = p;
  tracking_.store(true);
}

int exporter::importers(std::uint64_t id) {
  std::lock_guard lock(m_);
  auto it = exports_.find(id);
  if (it == exports_.end()) return 0;
  buffer_slot& b = seg_->slot[it->second.slot];
  purge_gone_importers(b);
  return static_cast<int>(importers_of(b));
}

std::size_t exporter::finish_deferred() {
  if (deferred_count_.load() == 0) return 0;
  std::vector<pool_piece> to_pools;
  std::size_t done = 0;
  {
    std::lock_guard lock(m_);
    done = finish_deferred_locked(to_pools);
  }
  // Pools' locks rank below the exporter's: they are taken with it released.
  for (const pool_piece& piece : to_pools) {
    try {
      pool_release_held(piece);
    } catch (...) {
      // Out of memory past the pool's release threshold: the piece is the pool's again, the
      // empty blocks stay reserved until a later free or trim. The other pieces go on.
    }
  }
  return done;
}

std::size_t exporter::finish_deferred_locked(std::vector<pool_piece>& to_pools) {
  std::size_t done = 0;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    buffer_slot& b = seg_->slot[it->slot];
    if (importers_of(b) != 0) purge_gone_importers(b);
    if (importers_of(b) != 0) {
      ++it;
      continue;
    }
    if (it->piece.pool) {
      try {
        to_pools.push_back(it->piece);
      } catch (...) {
        ++it;  // out of memory: the next tick tries again
        continue;
      }
    }
    // A failed driver free cannot be reported to anyone now; the memory stays allocated (as
    // it would have without IPC), and the slot is freed either way.
    if (it->r.base) (void)release(it->r);
    if (it->block && --it->block->pending == 0) (void)release(it->block->r);
    release_slot_locked(it->slot);
    it = deferred_.erase(it);
    ++done;
  }
  deferred_count_.store(deferred_.size());
  return done;
}

void* exporter::open_own(const wire& w, std::size_t* size) {
  std::lock_guard lock(m_);
  auto it = exports_.find(w.buffer_id);
  if (it == exports_.end() || it->second.slot != w.slot)
    throw error(errc::invalid_handle,
                fmt::format("ipc open: the handle names buffer {} of this process, which was "
                            "freed (stale handle)",
                            w.buffer_id));
  if (std::memcmp(it->second.native.bytes, w.native, sizeof w.native) != 0 ||
      w.offset < it->second.begin || w.offset >= it->second.end)
    throw mismatch(w);
  void* p = static_cast<char*>(it->second.driver_base) + w.offset;
  ++self_opened_[p];
  if (size) *size = it->second.end - w.offset;
  return p;
}

bool exporter::close_own(void* ptr) {
  std::lock_guard lock(m_);
  auto it = self_opened_.find(ptr);
  if (it == self_opened_.end()) return false;
  if (--it->second == 0) self_opened_.erase(it);
  return true;
}

void exporter::prepare() {
  std::lock_guard lock(m_);
  ensure_segment_locked();
}

void exporter::shutdown() {
  std::lock_guard lock(m_);
  if (!deferred_.empty()) {
    std::vector<pool_piece> to_pools;  // at exit, pools' memory goes with the process
    (void)finish_deferred_locked(to_pools);
  }
  if (seg_) {
    // Every buffer still shared reads as freed from now on (importers' re-opens read the
    // slot, not the header), then the whole segment as its owner's exit.
    for (const auto& [id, e] : exports_) at(seg_->slot[e.slot].live).store(0);
    at(seg_->owner_alive).store(0);
    fault_guard::unwatch(std::exchange(seg_guard_, -1));
    munmap(seg_, sizeof(segment));
    shm_unlink(seg_name_.c_str());
    seg_ = nullptr;
  }
}

void exporter::ensure_segment_locked() {
  if (seg_) {
    if (fault_guard::damaged(seg_guard_)) throw cut_short();
    return;
  }
  int lease_error = 0;
  const std::uint64_t owner = lease::own(&lease_error);
  if (owner == 0)
    throw error(lease_error == ENOSPC || lease_error == ENOMEM ? errc::out_of_memory
                                                              : errc::unknown,
                fmt::format("ipc export: cannot make this process's lease in /dev/shm: {}",
                            std::strerror(lease_error)));
  // A name that exists already is not ours (another user may have made it to block us): a
  // fresh random part is drawn, and the object is never opened or removed.
  std::string name;
  std::uint64_t id = 0;
  int fd = -1;
  // Made with its stamp (what the sweep asks before it removes anything).
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    id = random_u64();
    name = segment_name(owner, id);
    fd = lease::create_object(name, sizeof(segment));
    if (fd != -EEXIST) break;
  }
  if (fd < 0) {
    const int e = -fd;
    throw error(e == ENOSPC || e == ENOMEM ? errc::out_of_memory : errc::unknown,
                fmt::format("ipc export: making {} failed: {}", name, std::strerror(e)));
  }
  void* p = fresh_mmap(nullptr, sizeof(segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw error(errc::out_of_memory,
                fmt::format("ipc export: mapping {} failed: {}", name, std::strerror(e)));
  }
  const int guard = fault_guard::watch(p, sizeof(segment));
  try {
    if (guard < 0) throw std::bad_alloc();
    free_slots_.reserve(kBuffers);
    slot_used_.assign(kBuffers, 0);
    slot_bytes_.assign(kBuffers, {});
  } catch (...) {
    fault_guard::unwatch(guard);
    munmap(p, sizeof(segment));
    shm_unlink(name.c_str());
    throw error(errc::out_of_memory,
                "ipc export: no memory for the list of free slots or the segment's guard");
  }
  seg_guard_ = guard;
  pid_ = static_cast<std::int32_t>(getpid());
  seg_ = static_cast<segment*>(p);
  seg_->buffers = kBuffers;
  seg_->owner_pid = pid_;
  seg_->owner = owner;
  seg_->version = kSegmentVersion;
  at(seg_->owner_alive).store(1);
  at(seg_->magic).store(kSegmentMagic);  // last: importers check it first
  seg_name_ = name;
  segment_id_ = id;
  owner_.store(owner, std::memory_order_release);
}

std::unordered_map<std::uint64_t, exporter::exported>::iterator exporter::add_export_locked(
    const record& r) {
  ensure_segment_locked();
  auto& gpu = system::get().gpu();
  // The handle names the driver's allocation and the offset is taken from its base. memarea's
  // areas allocate each buffer with its own driver call (cuMemAlloc, hipMalloc, the sim's
  // malloc_device), so there the record is the driver's allocation (its size a lower bound of
  // the driver's, which is what the segment must promise). Memory from elsewhere may sit inside
  // a larger driver allocation: the driver is asked.
  exported e;
  e.driver_base = r.base;
  e.driver_size = r.size;
  e.device = r.device;
  void* range_base = nullptr;
  std::size_t range_size = 0;
  if (r.made_by != origin::area && gpu.address_range(r.base, &range_base, &range_size).ok() &&
      range_base && range_size && static_cast<char*>(range_base) <= static_cast<char*>(r.base) &&
      static_cast<char*>(r.base) + r.size <= static_cast<char*>(range_base) + range_size) {
    e.driver_base = range_base;
    e.driver_size = range_size;
  }
  check(gpu.ipc_get_handle(e.driver_base, &e.native),
        [&] { return fmt::format("ipc export of {} (device {})", r.base, r.device); });
  e.begin = 0;
  e.end = e.driver_size;
  e.slot = claim_slot_locked(r.id, e.begin, e.end, native_digest(e.native.bytes), e.device);
  tracking_.store(true);
  return exports_.emplace(r.id, e).first;
}

std::uint32_t exporter::claim_slot_locked(std::uint64_t id, std::uint64_t begin,
                                          std::uint64_t end, std::uint64_t digest, int device) {
  // A free slot, filled with what importers check handles against; the id last, since an
  // importer checks it first.
  auto fill = [&](std::uint32_t i) {
    buffer_slot& b = seg_->slot[i];
    if (slot_used_[i]) return false;
    // A slot this process does not use has no importer: leases (or an id) found in it were
    // written by another process (to use up our slots) and are cleared. An importer registers
    // only while the id is its buffer's and checks it again after, so none of ours is ever
    // left in a free slot.
    at(b.id).store(0);
    if (importers_of(b) != 0) (void)clear_importers(b);
    slot_used_[i] = 1;
    slot_bytes_[i] = {end - begin, device};
    usage::add(device, usage::exported, static_cast<std::int64_t>(end - begin));
    at(b.device).store(static_cast<std::uint32_t>(device + 1));
    at(b.begin).store(begin);
    at(b.end).store(end);
    at(b.digest).store(digest);
    at(b.live).store(1);
    at(b.id).store(id);
    return true;
  };
  // The most recently released first: its page is mapped and its lines are likely cached.
  while (!free_slots_.empty()) {
    const std::uint32_t i = free_slots_.back();
    free_slots_.pop_back();
    if (fill(i)) return i;
  }
  for (std::uint32_t n = 0; n < kBuffers; ++n) {
    const std::uint32_t i = (hint_ + n) % kBuffers;
    if (!fill(i)) continue;
    hint_ = i + 1;
    return i;
  }
  throw error(errc::out_of_memory,
              fmt::format("ipc export: {} buffers of this process are exported or still "
                          "open elsewhere; free some first",
                          kBuffers));
}

void exporter::release_slot_locked(std::uint32_t i) {
  at(seg_->slot[i].live).store(0);
  at(seg_->slot[i].id).store(0);
  slot_used_[i] = 0;
  usage::add(slot_bytes_[i].device, usage::exported,
             -static_cast<std::int64_t>(slot_bytes_[i].bytes));
  slot_bytes_[i] = {};
  // Reserved for every slot when the segment was made: never reallocates. A slot listed twice
  // (claimed by the scan while listed) is skipped when its second turn comes.
  if (free_slots_.size() < free_slots_.capacity()) free_slots_.push_back(i);
}

}  // namespace memarea::detail::ipc_internal
