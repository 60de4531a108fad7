// The ownership contract (memarea/owner.hpp), written once and run for every owning type:
// buffer, pool_buffer, ipc::mapping, managed::managed_buffer and host::host_buffer. Moves,
// self-moves, release, reset and try_reset mean the same on each; a free that fails is reported
// by try_reset and kept, recorded by reset and let go. And stream_view, what every
// stream-ordered call takes.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/memarea.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

/// Starts and ends a test with an empty release-failure record and no handler.
struct clean_record {
  clean_record() {
    set_release_failure_handler({});
    (void)take_release_failures();
  }
  ~clean_record() {
    set_release_failure_handler({});
    (void)take_release_failures();
  }
};

// Each kind says whether it can run here, makes one of its type owning `size` bytes, tells
// whether the memory at p is still held (allocated, or open), and gives released memory back
// by hand as the type's documentation says.

struct buffer_kind {
  using type = buffer;
  static const char* unavailable() { return devices() > 0 ? nullptr : "needs a device"; }
  type make(std::size_t n) { return area(0).allocate(n); }
  bool held(void* p) { return find(p).has_value(); }
  void give_back(void* p, std::size_t n) { area(0).munmap(p, n); }
};

struct pool_buffer_kind {
  using type = pool_buffer;
  static const char* unavailable() { return nullptr; }
  // Device memory where there is a device, pageable host memory elsewhere.
  pool p = devices() > 0 ? pool(area(0)) : pool::host();
  type make(std::size_t n) { return pool_buffer(p, n); }
  bool held(void* ptr) {
    auto info = find(ptr);
    return info && info->base == ptr;
  }
  void give_back(void* ptr, std::size_t) { p.deallocate(ptr); }
};

struct mapping_kind {
  using type = ipc::mapping;
  static const char* unavailable() {
    if (devices() == 0) return "needs a device";
    return get_device_properties(0).ipc ? nullptr : "device 0 has no IPC";
  }
  // Each mapping opens (in this process, the exporter's: open returns the exported pointer) a
  // buffer of its own, exported once.
  std::vector<buffer> exported;
  type make(std::size_t n) {
    exported.push_back(area(0).allocate(n));
    return ipc::mapping(ipc::export_handle(exported.back().data()));
  }
  /// Whether p is open: a close succeeds only then (and is undone by opening again).
  bool held(void* p) {
    try {
      ipc::close(p);
    } catch (const error& e) {
      EXPECT_EQ(e.status(), errc::invalid_value) << e.what();
      return false;
    }
    EXPECT_EQ(ipc::open(ipc::export_handle(p)), p);
    return true;
  }
  void give_back(void* p, std::size_t) { ipc::close(p); }
};

struct managed_buffer_kind {
  using type = managed::managed_buffer;
  static const char* unavailable() { return has_managed() ? nullptr : "no managed memory"; }
  type make(std::size_t n) { return type(n); }
  bool held(void* p) { return find(p).has_value(); }
  void give_back(void* p, std::size_t) { managed::free(p); }
};

struct host_buffer_kind {
  using type = host::host_buffer;
  static const char* unavailable() { return nullptr; }
  type make(std::size_t n) { return type(n); }
  bool held(void* p) { return find(p).has_value(); }
  void give_back(void* p, std::size_t) { host::free(p); }
};

template <class Kind>
class OwnerContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = Kind::unavailable()) GTEST_SKIP() << why;
    kind_ = std::make_unique<Kind>();
  }
  void TearDown() override { kind_.reset(); }
  Kind& kind() { return *kind_; }
  clean_record clean_;

 private:
  std::unique_ptr<Kind> kind_;
};

using kinds = ::testing::Types<buffer_kind, pool_buffer_kind, mapping_kind, managed_buffer_kind,
                               host_buffer_kind>;
class kind_names {
 public:
  template <class Kind>
  static std::string GetName(int) {
    if (std::is_same_v<Kind, buffer_kind>) return "buffer";
    if (std::is_same_v<Kind, pool_buffer_kind>) return "pool_buffer";
    if (std::is_same_v<Kind, mapping_kind>) return "mapping";
    if (std::is_same_v<Kind, managed_buffer_kind>) return "managed_buffer";
    return "host_buffer";
  }
};
TYPED_TEST_SUITE(OwnerContract, kinds, kind_names);

/// Expects t to own nothing.
template <class T>
void expect_empty(const T& t) {
  EXPECT_FALSE(t);
  EXPECT_EQ(t.data(), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace

TYPED_TEST(OwnerContract, IsMoveOnly) {
  using T = typename TypeParam::type;
  static_assert(!std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T>);
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>);
  static_assert(std::is_nothrow_destructible_v<T>);
  static_assert(!std::is_convertible_v<T, bool>, "operator bool is explicit");
  T empty;
  expect_empty(empty);
  EXPECT_EQ(empty.try_reset(), errc::success) << "empty";
  empty.reset();
  EXPECT_EQ(empty.release(), nullptr);
  expect_empty(empty);
}

TYPED_TEST(OwnerContract, OwnsWhatItWasMadeWith) {
  auto& k = this->kind();
  auto t = k.make(5000);
  ASSERT_TRUE(t);
  EXPECT_NE(t.data(), nullptr);
  EXPECT_EQ(t.size(), 5000u);
  EXPECT_TRUE(k.held(t.data()));
}

TYPED_TEST(OwnerContract, MovesLeaveTheSourceEmpty) {
  auto& k = this->kind();
  auto a = k.make(4096);
  void* const p = a.data();
  typename TypeParam::type b(std::move(a));
  expect_empty(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 4096u);
  // Assignment gives the target's own memory back first.
  auto c = k.make(64);
  void* const q = c.data();
  c = std::move(b);
  expect_empty(b);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 4096u);
  EXPECT_TRUE(k.held(p));
  EXPECT_FALSE(k.held(q)) << "the assigned-to object's memory was given back";
  // Into an empty one.
  typename TypeParam::type d;
  d = std::move(c);
  expect_empty(c);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(d.data(), p);
  EXPECT_TRUE(take_release_failures().empty());
}

TYPED_TEST(OwnerContract, SelfMoveChangesNothing) {
  auto& k = this->kind();
  auto a = k.make(4096);
  void* const p = a.data();
  auto& alias = a;  // through a reference: the compiler's self-move warning stays quiet
  a = std::move(alias);
  EXPECT_EQ(a.data(), p);
  EXPECT_EQ(a.size(), 4096u);
  EXPECT_TRUE(k.held(p));
  typename TypeParam::type empty;
  auto& empty_alias = empty;
  empty = std::move(empty_alias);
  expect_empty(empty);
}

TYPED_TEST(OwnerContract, ReleaseThenResetLeavesTheMemoryToTheCaller) {
  auto& k = this->kind();
  auto a = k.make(4096);
  void* const p = a.data();
  void* const r = a.release();
  EXPECT_EQ(r, p);
  expect_empty(a);
  a.reset();  // owns nothing: gives nothing back
  EXPECT_EQ(a.try_reset(), errc::success);
  EXPECT_TRUE(k.held(p)) << "released memory stays the caller's";
  k.give_back(p, 4096);
  EXPECT_FALSE(k.held(p));
  EXPECT_TRUE(take_release_failures().empty());
}

TYPED_TEST(OwnerContract, ResetTwiceGivesBackOnce) {
  auto& k = this->kind();
  auto a = k.make(4096);
  void* const p = a.data();
  a.reset();
  expect_empty(a);
  EXPECT_FALSE(k.held(p));
  a.reset();
  expect_empty(a);
  // try_reset frees and empties alike.
  auto b = k.make(100);
  void* const q = b.data();
  EXPECT_EQ(b.try_reset(), errc::success);
  expect_empty(b);
  EXPECT_FALSE(k.held(q));
  EXPECT_EQ(b.try_reset(), errc::success);
  EXPECT_TRUE(take_release_failures().empty()) << "nothing failed";
}

// Memory given back behind the owner's back (a bug of the program) makes its free fail:
// try_reset returns the status with a message, keeps owning the memory and changes nothing, so
// the caller may try again; reset records the failure with data() and size(), and lets go.
TYPED_TEST(OwnerContract, AFailedFreeIsReportedNeverLost) {
  auto& k = this->kind();
  auto a = k.make(4096);
  void* const p = a.data();
  k.give_back(p, 4096);
  std::string message;
  EXPECT_EQ(a.try_reset(&message), errc::invalid_value);
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(a.data(), p) << "a failed try_reset keeps the memory";
  EXPECT_EQ(a.size(), 4096u);
  EXPECT_EQ(a.try_reset(), errc::invalid_value) << "and may be tried again";
  EXPECT_TRUE(take_release_failures().empty()) << "try_reset reports to its caller alone";
  a.reset();
  expect_empty(a);
  const auto failures = take_release_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].ptr, p);
  EXPECT_EQ(failures[0].size, 4096u);
  EXPECT_EQ(failures[0].status, errc::invalid_value);
  EXPECT_FALSE(failures[0].message.empty());
  // The destructor reports the same way, to the handler when one is set.
  std::vector<release_failure> seen;
  set_release_failure_handler([&](const release_failure& f) { seen.push_back(f); });
  {
    auto b = k.make(512);
    k.give_back(b.data(), 512);
  }
  set_release_failure_handler({});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].size, 512u);
  EXPECT_EQ(seen[0].status, errc::invalid_value);
  EXPECT_TRUE(take_release_failures().empty()) << "the handler took it";
}

// A mapping's size: the bytes from its pointer to the end of the exported buffer, for an
// interior pointer too.
TEST(OwnerMapping, SizeRunsToTheEndOfTheExportedBuffer) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (!get_device_properties(0).ipc) GTEST_SKIP() << "device 0 has no IPC";
  buffer b = area(0).allocate(10000);
  void* const interior = static_cast<char*>(b.data()) + 1000;
  ipc::mapping m(ipc::export_handle(interior));
  EXPECT_EQ(m.data(), interior);
  EXPECT_EQ(m.size(), 9000u);
  pool p(area(0));
  pool_buffer piece(p, 3000);
  ipc::mapping n(ipc::export_handle(piece.data()));
  EXPECT_EQ(n.data(), piece.data());
  EXPECT_EQ(n.size(), 3000u) << "a pool piece: the size its allocation asked for";
}

// The same for another process's buffer: its first open (the driver's), an open of a buffer open
// already, and one from the import cache.
TEST(OwnerMapping, SizeOfAnotherProcesssBuffer) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 70000;
  child owner({"export", str(n), str(new_seed())});
  const auto whole_handle = ipc::handle::from_hex(owner.line());
  const auto part_handle = ipc::handle::from_hex(owner.ask("interior 1000"));
  {
    ipc::mapping whole(whole_handle);
    EXPECT_EQ(whole.size(), n);
    ipc::mapping part(part_handle);
    EXPECT_EQ(static_cast<char*>(part.data()) - static_cast<char*>(whole.data()), 1000);
    EXPECT_EQ(part.size(), n - 1000);
  }
  ipc::mapping again(whole_handle);
  EXPECT_EQ(again.size(), n);
  EXPECT_EQ(lookup(again.data()).size, n) << "as lookup says";
  again.reset();
  EXPECT_TRUE(take_release_failures().empty());
  owner.close_stdin();
  EXPECT_EQ(owner.wait(), 0);
}

// --- stream_view ---------------------------------------------------------------------------

static_assert(std::is_trivially_copyable_v<stream_view>);
static_assert(sizeof(stream_view) == sizeof(void*));
static_assert(std::is_convertible_v<const stream&, stream_view>, "implicit from a stream");
static_assert(!std::is_convertible_v<std::nullptr_t, stream_view>, "no view of a bare NULL");

TEST(StreamView, DefaultIsTheDefaultStream) {
  constexpr stream_view v;
  static_assert(v.is_default());
  EXPECT_EQ(v.device(), -1);
  EXPECT_EQ(v.native_handle(), nullptr);
  EXPECT_EQ(to_c(v), nullptr);
  EXPECT_EQ(from_c(nullptr), v);
  if (devices() == 0) return;
  EXPECT_NO_THROW(v.synchronize());
  // The default stream in stream-ordered calls: a round trip through device memory.
  buffer d = area(0).allocate(4096);
  const auto src = random_bytes(4096);
  std::vector<unsigned char> back(4096);
  copy_async(d.data(), src.data(), 4096, v);
  copy_async(back.data(), d.data(), 4096, {});
  v.synchronize();
  EXPECT_EQ(back, src);
}

TEST(StreamView, ViewsAStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int last = devices() - 1;
  stream s(last);
  const stream_view v = s;
  EXPECT_FALSE(v.is_default());
  EXPECT_EQ(v.device(), last);
  EXPECT_EQ(v.native_handle(), s.native_handle());
  EXPECT_EQ(v, stream_view(s));
  EXPECT_NE(v, stream_view());
  // The C handle is the same stream, both ways.
  const memarea_stream_t c = to_c(v);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(from_c(c), v);
  EXPECT_EQ(memarea_stream_synchronize(c), MEMAREA_SUCCESS);
  // Stream-ordered calls through the view; the pool's piece is freed on its stream.
  pool p{area(last)};
  const auto src = random_bytes(8192);
  std::vector<unsigned char> back(8192);
  {
    pool_buffer b(p, 8192, v);
    copy_async(b.data(), src.data(), 8192, v);
    copy_async(back.data(), b.data(), 8192, s);
    v.synchronize();
  }
  EXPECT_EQ(back, src);
  EXPECT_EQ(p.stats().live_allocations, 0u);
  // A moved-from stream is viewed as the default stream.
  EXPECT_TRUE(s);
  stream t(std::move(s));
  EXPECT_FALSE(s);                           // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(stream_view(s).is_default());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(stream_view(t), v);
}

TEST(StreamView, ViewsAStreamOfTheCApi) {
  MEMAREA_REQUIRE_DEVICES(1);
  device_guard g(0);
  memarea_stream_t c = nullptr;
  ASSERT_EQ(memarea_stream_create(&c), MEMAREA_SUCCESS) << memarea_last_error_message();
  const stream_view v = from_c(c);
  EXPECT_FALSE(v.is_default());
  EXPECT_EQ(v.device(), 0);
  EXPECT_NE(v.native_handle(), nullptr);
  pool p(area(0));
  void* x = p.allocate(1000, v);
  EXPECT_EQ(memarea_pool_free(to_c(p), x, to_c(v)), MEMAREA_SUCCESS);
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_EQ(memarea_stream_destroy(c), MEMAREA_SUCCESS);
}

// The C++ values and structures are the C API's, through c_interop.hpp.
TEST(CInterop, ValuesAndStructuresMatchTheCApi) {
  EXPECT_EQ(to_c(errc::busy), MEMAREA_ERROR_BUSY);
  EXPECT_EQ(from_c(MEMAREA_ERROR_NOT_FOUND), errc::not_found);
  EXPECT_STREQ(to_string(errc::invalid_handle), "MEMAREA_ERROR_INVALID_HANDLE");
  EXPECT_EQ(to_c(memory_kind::ipc_imported), MEMAREA_MEMORY_IPC_IMPORTED);
  EXPECT_EQ(from_c(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED), peer::attribute_kind::access_supported);
  EXPECT_EQ(to_c(managed::advice::set_accessed_by), MEMAREA_MEM_ADVISE_SET_ACCESSED_BY);
  ipc::handle h;
  for (std::size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<unsigned char>(i * 7);
  const memarea_ipc_handle_t c = to_c(h);
  EXPECT_EQ(std::memcmp(c.bytes, h.bytes.data(), sizeof c.bytes), 0);
  EXPECT_EQ(from_c(c), h);
  // A pool's counters read through either API agree.
  pool p = devices() > 0 ? pool(area(0)) : pool::host();
  pool_buffer b(p, 1000);
  memarea_pool_stats cs{};
  ASSERT_EQ(memarea_pool_get_stats(to_c(p), &cs), MEMAREA_SUCCESS);
  const pool_stats s = p.stats();
  EXPECT_EQ(s.live_allocations, 1u);
  EXPECT_EQ(from_c(cs).live_allocations, s.live_allocations);
  EXPECT_EQ(from_c(cs).bytes_in_use, s.bytes_in_use);
  EXPECT_EQ(to_c(s).bytes_reserved, cs.bytes_reserved);
  // A destroyed or moved-from pool has no handle.
  pool q(std::move(p));
  EXPECT_EQ(to_c(p), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(p);              // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(q);
  b.reset();
  q.destroy();
  EXPECT_FALSE(q);
  EXPECT_EQ(to_c(q), nullptr);
}
