// The sim backend: CUDA/HIP runtime semantics on host memory (emulated devices for CI).
//
// Device memory is POSIX shared memory so that another process can map it through IPC handles;
// managed and pinned host memory are anonymous mappings; streams are worker threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/fork_safety.hpp"
#include "driver/sim/sim_config.hpp"
#include "driver/page_attributes.hpp"
#include "driver/sim/sim_stream.hpp"

namespace memarea::detail::testing {
struct sim_access;  // the testing interface's way in (src/testing/sim.cpp)
}  // namespace memarea::detail::testing

namespace memarea::detail::sim {

/// The granularity of managed-memory attributes, shareable memory and mappings.
inline constexpr size_t kPage = 4096;
/// The most devices a sim configuration may have (the accessed-by sets are 64-bit masks).
inline constexpr int kMaxDevices = 64;

/// What made an allocation; decides which free call accepts it.
enum class origin {
  device,              ///< malloc_device (a shm object)
  host,                ///< malloc_host
  registered,          ///< host_register (not ours to unmap)
  managed,             ///< malloc_managed
  ipc_imported,        ///< ipc_open_handle
  shareable,           ///< shareable_create (a memfd)
  shareable_imported,  ///< shareable_import_fd
};

/// One entry of the allocation table.
struct allocation {
  origin from = origin::device;
  size_t size = 0;       ///< what the caller asked for (reported by pointer_query)
  size_t map_len = 0;    ///< what is mapped (size rounded to pages)
  size_t accounted = 0;  ///< bytes charged to `device` (0 for host memory and imports)
  int device = MEMAREA_CPU_DEVICE_ID;
  unsigned flags = 0;             ///< host_flags, or the managed attach flags
  std::string shm_name;           ///< device memory and IPC imports
  int fd = -1;                    ///< shareable memory
  /// fault_guard's watch of a shm object's mapping (device memory, IPC imports): another
  /// process that cuts the object short makes copies of it fail instead of killing us.
  int guard = -1;
  std::uint64_t id = 0;           ///< unique, so queued tasks can tell a reused address from theirs
  int refs = 1;                   ///< IPC imports: opens in this process
  bool inherited = false;  ///< device memory of the parent before fork(): never unlinked here
  page_attributes pages;          ///< managed memory only: one entry per kPage
};

/// The sim driver. Streams follow the legacy default-stream rules (nullptr orders against the
/// device's other streams). Tests reach what the driver interface does not show (attach flags,
/// a task queued on a stream, a failure injected once) through testing/memarea_testing.hpp,
/// whose sim_access is a friend.
class sim_driver final : public driver {
 public:
  struct fork_hooks;  ///< its fork() handlers (sim_fork.cpp)
  explicit sim_driver(const sim_config& config);
  ~sim_driver() override;
  sim_driver(const sim_driver&) = delete;
  sim_driver& operator=(const sim_driver&) = delete;

  const char* name() const noexcept override { return "sim"; }
  /// This driver's process-wide unique id (several may live in one test process).
  std::uint64_t instance() const noexcept { return instance_; }
  std::string unavailable_reason() const override { return reason_; }
  std::string version() const override { return "memarea sim 1"; }
  int device_count() const noexcept override { return devices_; }
  bool survives_fork() const noexcept override { return true; }
  dstatus get_properties(int device, memarea_device_properties* props) override;
  dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) override;

  dstatus set_current_device(int device) override;
  dstatus get_current_device(int* device) override;

  dstatus malloc_device(int device, size_t size, void** ptr) override;
  dstatus free_device(void* ptr) override;
  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) override;
  dstatus free_host(void* ptr) override;
  dstatus host_register(int device, void* ptr, size_t size, unsigned flags) override;
  dstatus host_unregister(void* ptr) override;
  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) override;
  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) override;
  dstatus free_managed(void* ptr) override;
  dstatus pointer_query(const void* ptr, pointer_info* info) override;
  dstatus address_range(const void* ptr, void** base, size_t* size) override;

  dstatus can_access_peer(int device, int peer, int* can_access) override;
  dstatus enable_peer_access(int device, int peer, unsigned flags) override;
  dstatus disable_peer_access(int device, int peer) override;
  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) override;

  dstatus memcpy_sync(void* dst, const void* src, size_t size, int device,
                      native_stream s) override;
  dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                       native_stream s) override;
  dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t size,
                            int device, native_stream s) override;
  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) override;
  dstatus memset_elements_async(void* dst, std::uint32_t value, size_t count, unsigned width,
                                int device, native_stream s) override;  // sim_fill.cpp
  dstatus memcpy_2d_async(const copy_2d_params& c, int device, native_stream s) override;

  dstatus stream_create(int device, native_stream* s) override;
  dstatus stream_destroy(int device, native_stream s) override;
  dstatus stream_synchronize(int device, native_stream s) override;
  dstatus stream_get_device(native_stream s, int* device) override;
  dstatus event_create(int device, native_event* e, event_timing timing,
                       event_sync sync = event_sync::spin) override;
  dstatus event_destroy(int device, native_event e) override;
  dstatus event_record(native_event e, int device, native_stream s) override;
  dstatus stream_wait_event(int device, native_stream s, native_event e) override;
  dstatus event_synchronize(native_event e) override;
  dstatus event_query(native_event e) override;
  dstatus stream_query(int device, native_stream s) override;
  dstatus event_elapsed_ms(float* ms, native_event start, native_event end) override;
  dstatus device_synchronize(int device) override;
  /// As a context's reset (sim_reset.cpp): peer access to and from the device ends, its
  /// streams (the default one included) finish their queued work and are dropped, so that
  /// their handles are invalid_value from then on; it counts the resets (the testing
  /// interface's sim_resets). Frees no memory: memarea refuses a reset while its own lives.
  dstatus device_reset(int device) override;

  dstatus ipc_get_handle(void* base, ipc_native_handle* handle) override;
  dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                          void** ptr) override;
  dstatus ipc_close_handle(void* ptr) override;
  std::uint64_t ipc_handle_owner(const ipc_native_handle& handle) const noexcept override;
  /// The bytes carry the allocation's shared-memory name, random per allocation.
  bool ipc_handles_name_one_allocation() const noexcept override { return true; }

  dstatus shareable_create(int device, size_t size, shareable_allocation* out) override;
  dstatus shareable_export_fd(const shareable_allocation& a, int* fd) override;
  dstatus shareable_import_fd(int device, int fd, size_t size, shareable_allocation* out) override;
  dstatus shareable_release(const shareable_allocation& a) override;

  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s) override;
  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                     location where) override;
  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count) override;
  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags) override;

  // Contexts the user makes (sim_context.cpp): a stack per thread, peer access per context
  // pair; a handle is never reused, so a destroyed one is invalid_context, never a crash.
  dstatus context_create(int device, unsigned flags, native_context* c) override;
  dstatus context_destroy(native_context c) override;
  dstatus context_set_current(native_context c) override;
  dstatus context_get_current(native_context* c) override;
  dstatus context_push(native_context c) override;
  dstatus context_pop(native_context* c) override;
  dstatus context_synchronize(native_context c) override;
  dstatus context_get_device(native_context c, int* device) override;
  dstatus context_get_flags(native_context c, unsigned* flags) override;
  dstatus context_enable_peer_access(native_context peer, unsigned flags) override;
  dstatus context_disable_peer_access(native_context peer) override;

  /// The calls whose next call may be made to fail once (testing::sim_fail_next).
  enum class injectable { stream_destroy, disable_peer_access, set_current_device, device_reset };

  /// Queues fn on stream s of device (nullptr: its default stream), in order with the stream's
  /// other work, as a host function the device runs: the sim's public API holds a stream back
  /// with one (memarea::sim::stream_gate), and tests reach states of stream order with it.
  dstatus enqueue_host_task(int device, native_stream s, std::function<void()> fn);
  /// Ends thread `id`'s per-thread default streams (their queued work completes first): called
  /// as the thread exits.
  void end_per_thread_streams(std::thread::id id);

 private:
  friend struct testing::sim_access;
  /// Whether a failure of `call` was injected; forgets it. Holds m_.
  bool take_injected_locked(injectable call);

  using table = std::map<std::uintptr_t, allocation>;

  dstatus check_device(int device) const;
  dstatus resolve_stream(int device, native_stream s, std::shared_ptr<stream>* out);
  /// The live event e, or invalid_value.
  dstatus find_event(native_event e, std::shared_ptr<event>* out);
  std::function<void()> order_with_default(const std::shared_ptr<stream>& st,
                                           std::function<void()> fn);
  dstatus enqueue(const std::shared_ptr<stream>& st, std::function<void()> fn);
  table::iterator find_locked(const void* p);
  table::const_iterator find_locked(const void* p) const;
  dstatus check_range_locked(const void* p, size_t n, const char* what);
  dstatus managed_range_locked(const void* p, size_t count, table::iterator* it, size_t* first,
                               size_t* last);
  dstatus location_id(location where, int* id) const;
  bool reachable(int device, int peer) const;
  void synchronize_all();
  dstatus charge_locked(int device, size_t bytes);
  void unmap(std::uintptr_t base, allocation& a);
  /// fork() handlers, run through fork_hooks (rank driver, after every lock of core is taken).
  /// Prepare and parent: every live driver's lock is held across fork(), so the child never
  /// inherits one that a stream worker thread held half-way. Child: sets aside what the
  /// parent's threads own (streams, events) and marks the parent's device memory as not this
  /// process's.
  static void on_fork_prepare();
  static void on_fork_parent();
  static void on_fork_child();

  int devices_ = 0;
  sim_config config_;
  std::string reason_;
  std::uint64_t instance_;     ///< keys this driver's per-thread current device
  std::vector<int> group_of_;  ///< peer group per device; -1: in none

  mutable std::mutex m_;  ///< guards everything below
  table allocations_;
  std::unordered_map<std::string, std::uintptr_t> imported_;  ///< shm name -> mapped base
  std::vector<size_t> used_;                                  ///< bytes charged per device
  std::vector<std::vector<bool>> peer_enabled_;               ///< [device][peer]
  std::vector<std::shared_ptr<stream>> default_streams_;      ///< lazily created
  std::unordered_map<void*, std::shared_ptr<stream>> streams_;
  /// The per-thread default streams (is_per_thread), one per thread and device, made on first
  /// use; each is in streams_ too (under its own address), so every wait and fork() sees it.
  std::map<std::pair<std::thread::id, int>, std::shared_ptr<stream>> per_thread_;
  std::vector<std::shared_ptr<stream>> retiring_;  ///< destroyed, worker not yet joined
  std::unordered_map<void*, std::shared_ptr<event>> events_;
  std::vector<injectable> injected_;  ///< failures a test injected, not yet taken
  std::vector<std::uint64_t> resets_;  ///< device_reset calls per device (sized at the first)
  /// One context the user made (sim_context.cpp).
  struct user_context {
    int device = 0;
    unsigned flags = 0;
    std::vector<std::uintptr_t> peers;  ///< contexts whose memory it may access
  };
  /// Whether c is a live context (invalid_context if not), with its device and flags where
  /// asked (sim_context.cpp; takes ctx_m_).
  dstatus live_context(native_context c, int* device, unsigned* flags);
  std::mutex ctx_m_;  ///< guards the two below; taken without m_
  std::map<std::uintptr_t, user_context> contexts_;
  std::uintptr_t next_context_ = 0;  ///< the last handle given out (never reused)
  /// injected_'s size, read without m_ by calls that take no lock (set_current_device).
  std::atomic<std::size_t> injected_count_{0};
};

}  // namespace memarea::detail::sim
