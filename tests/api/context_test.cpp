// User contexts (seed 003's peer access between contexts): every call of memarea::context and
// memarea_context_*, and every status the seed names, on any backend that has contexts. Each
// test runs its body on a fresh thread, whose context stack starts empty on every backend.
#include "api/common.hpp"

#include <memarea/area.hpp>
#include <memarea/context.hpp>
#include <memarea/copy.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>
#include <memarea/pointer.hpp>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

/// Runs fn on a new thread and waits for it (gtest's EXPECTs work from any thread).
void on_fresh_thread(const std::function<void()>& fn) { std::thread(fn).join(); }

/// Skips where the backend has no user contexts (or no devices).
#define REQUIRE_CONTEXTS()                                                                \
  do {                                                                                    \
    MEMAREA_REQUIRE_DEVICES(1);                                                           \
    memarea_context_t probe_ = nullptr;                                                   \
    memarea_status st_ = MEMAREA_SUCCESS;                                                 \
    std::string why_; /* the probe thread's message: the last error is per thread */      \
    std::thread([&] {                                                                     \
      st_ = memarea_context_create(&probe_, 0, 0);                                        \
      if (st_ == MEMAREA_SUCCESS) memarea_context_destroy(probe_);                        \
      else why_ = memarea_last_error_message();                                           \
    }).join();                                                                            \
    if (st_ == MEMAREA_ERROR_NOT_SUPPORTED)                                               \
      GTEST_SKIP() << "no user contexts on " << backend_name() << ": " << why_;           \
    ASSERT_EQ(st_, MEMAREA_SUCCESS) << why_;                                              \
  } while (0)

}  // namespace

TEST(Context, CreateFlagsAndQueries) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    const unsigned good[] = {MEMAREA_CONTEXT_SCHED_AUTO, MEMAREA_CONTEXT_SCHED_SPIN,
                             MEMAREA_CONTEXT_SCHED_YIELD, MEMAREA_CONTEXT_SCHED_BLOCKING_SYNC,
                             MEMAREA_CONTEXT_MAP_HOST, MEMAREA_CONTEXT_LMEM_RESIZE_TO_MAX,
                             MEMAREA_CONTEXT_SCHED_BLOCKING_SYNC | MEMAREA_CONTEXT_MAP_HOST};
    for (int d = 0; d < devices(); ++d) {
      for (unsigned f : good) {
        memarea_context_t c = nullptr;
        ASSERT_EQ(memarea_context_create(&c, f, d), MEMAREA_SUCCESS)
            << f << ": " << memarea_last_error_message();
        ASSERT_NE(c, nullptr);
        memarea_context_t cur = nullptr;
        EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
        EXPECT_EQ(cur, c) << "a new context is current";
        int dev = -5;
        unsigned got = 0;
        EXPECT_STATUS(memarea_context_get_device(&dev, c), MEMAREA_SUCCESS);
        EXPECT_EQ(dev, d);
        EXPECT_STATUS(memarea_context_get_flags(&got, c), MEMAREA_SUCCESS);
        // The driver may add bits of its own (CUDA sets MAP_HOST always); the asked ones stay.
        EXPECT_EQ(got & f, f);
        EXPECT_STATUS(memarea_context_synchronize(c), MEMAREA_SUCCESS);
        EXPECT_STATUS(memarea_context_destroy(c), MEMAREA_SUCCESS);
        EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
        EXPECT_EQ(cur, nullptr) << "destroying the current context pops it";
      }
    }
    memarea_context_t c = nullptr;
    for (unsigned bad : {0x20u, 0x3u, 0x5u, 0x6u, 0x7u, 0x80000000u})
      EXPECT_STATUS(memarea_context_create(&c, bad, 0), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_context_create(nullptr, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
    for (int bad : {devices(), -2, 1000})
      EXPECT_STATUS(memarea_context_create(&c, 0, bad), MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_STATUS(memarea_context_get_device(nullptr, c), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_context_get_flags(nullptr, c), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_context_get_current(nullptr), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_context_wrap(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_MEMAREA_ERROR((void)context::create(0, 0x20), errc::invalid_value);
    EXPECT_MEMAREA_ERROR((void)context::create(devices(), 0), errc::invalid_device);
  });
}

TEST(Context, StackPushPopSetCurrent) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    memarea_context_t a = nullptr, b = nullptr, cur = nullptr, popped = nullptr;
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, nullptr) << "a fresh thread has no context";
    EXPECT_STATUS(memarea_context_pop(&popped), MEMAREA_ERROR_INVALID_CONTEXT);
    ASSERT_EQ(memarea_context_create(&a, 0, 0), MEMAREA_SUCCESS);
    ASSERT_EQ(memarea_context_create(&b, 0, devices() - 1), MEMAREA_SUCCESS);  // stack: a b
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, b);
    EXPECT_STATUS(memarea_context_pop(&popped), MEMAREA_SUCCESS);  // stack: a
    EXPECT_EQ(popped, b);
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, a);
    EXPECT_STATUS(memarea_context_push(b), MEMAREA_SUCCESS);  // stack: a b
    EXPECT_STATUS(memarea_context_set_current(a), MEMAREA_SUCCESS);  // stack: a a
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, a);
    EXPECT_STATUS(memarea_context_set_current(nullptr), MEMAREA_SUCCESS);  // pops: stack a
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, a);
    EXPECT_STATUS(memarea_context_pop(nullptr), MEMAREA_SUCCESS);  // stack empty
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, nullptr);
    EXPECT_STATUS(memarea_context_set_current(nullptr), MEMAREA_SUCCESS);  // no-op on empty
    EXPECT_STATUS(memarea_context_set_current(b), MEMAREA_SUCCESS);  // empty: pushes
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, b);
    // The C++ view of the same stack.
    EXPECT_EQ(context::current().native(), static_cast<void*>(b));
    EXPECT_FALSE(context::current().owns());
    EXPECT_EQ(context::pop().native(), static_cast<void*>(b));
    EXPECT_FALSE(context::current());
    EXPECT_MEMAREA_ERROR((void)context::pop(), errc::invalid_context);
    EXPECT_STATUS(memarea_context_destroy(a), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_context_destroy(b), MEMAREA_SUCCESS);
  });
}

TEST(Context, StackIsPerThread) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    memarea_context_t a = nullptr;
    ASSERT_EQ(memarea_context_create(&a, 0, 0), MEMAREA_SUCCESS);
    std::thread([a] {
      memarea_context_t cur = a;
      EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
      EXPECT_EQ(cur, nullptr) << "another thread's context is not current here";
      EXPECT_STATUS(memarea_context_push(a), MEMAREA_SUCCESS);  // one context, two threads
      EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
      EXPECT_EQ(cur, a);
      EXPECT_STATUS(memarea_context_pop(nullptr), MEMAREA_SUCCESS);
    }).join();
    memarea_context_t cur = nullptr;
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, a) << "the other thread's pop left this thread's stack alone";
    EXPECT_STATUS(memarea_context_destroy(a), MEMAREA_SUCCESS);
  });
}

TEST(Context, UseAfterDestroyIsInvalidContext) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    memarea_context_t keep = nullptr, gone = nullptr;
    ASSERT_EQ(memarea_context_create(&keep, 0, 0), MEMAREA_SUCCESS);
    ASSERT_EQ(memarea_context_create(&gone, 0, 0), MEMAREA_SUCCESS);
    memarea_context_pop(nullptr);  // gone is not current: destroyed from elsewhere in the stack
    EXPECT_STATUS(memarea_context_destroy(gone), MEMAREA_SUCCESS);
    memarea_context_t cur = nullptr;
    EXPECT_STATUS(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, keep);
    int d = 0;
    unsigned f = 0;
    EXPECT_STATUS(memarea_context_get_device(&d, gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_get_flags(&f, gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_synchronize(gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_push(gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_set_current(gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_destroy(gone), MEMAREA_ERROR_INVALID_CONTEXT);
    memarea_context_t w = nullptr;
    EXPECT_STATUS(memarea_context_wrap(&w, gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_enable_peer_access(gone, 0), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_disable_peer_access(gone), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(memarea_context_get_current(&cur), MEMAREA_SUCCESS);
    EXPECT_EQ(cur, keep) << "failed calls left the stack alone";
    EXPECT_STATUS(memarea_context_destroy(keep), MEMAREA_SUCCESS);
  });
}

TEST(Context, WrapAndRaii) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    void* native = nullptr;
    {
      context c = context::create(0, MEMAREA_CONTEXT_SCHED_YIELD);
      EXPECT_TRUE(c.owns());
      native = c.native();
      context w = context::wrap(native);
      EXPECT_FALSE(w.owns());
      EXPECT_EQ(w.device(), 0);
      EXPECT_EQ(w.flags() & MEMAREA_CONTEXT_SCHED_YIELD, unsigned{MEMAREA_CONTEXT_SCHED_YIELD});
      memarea_context_t cw = nullptr;
      EXPECT_STATUS(memarea_context_wrap(&cw, native), MEMAREA_SUCCESS);
      EXPECT_EQ(static_cast<void*>(cw), native);
      context moved = std::move(c);
      EXPECT_FALSE(c.owns());
      EXPECT_EQ(c.native(), nullptr);
      EXPECT_TRUE(moved.owns());
    }  // moved destroys it; w does not
    EXPECT_MEMAREA_ERROR((void)context::wrap(native), errc::invalid_context);
    EXPECT_FALSE(context::current()) << "the owner's destroy popped it";
    context r = context::create(0);
    void* h = r.release();
    EXPECT_FALSE(r.owns());
    context again = context::wrap(h);
    again.destroy();
    EXPECT_EQ(again.native(), nullptr);
    EXPECT_MEMAREA_ERROR((void)context::wrap(h), errc::invalid_context);
  });
}

TEST(Context, PeerAccessStatuses) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    memarea_context_t a = nullptr, same = nullptr;
    // No context current.
    ASSERT_EQ(memarea_context_create(&a, 0, 0), MEMAREA_SUCCESS);
    memarea_context_pop(nullptr);
    EXPECT_STATUS(memarea_context_enable_peer_access(a, 0), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_disable_peer_access(a), MEMAREA_ERROR_INVALID_CONTEXT);
    // The current context itself; a NULL peer.
    EXPECT_STATUS(memarea_context_push(a), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_context_enable_peer_access(a, 0), MEMAREA_ERROR_INVALID_CONTEXT);
    EXPECT_STATUS(memarea_context_enable_peer_access(nullptr, 0), MEMAREA_ERROR_INVALID_CONTEXT);
    // Two contexts of one device: a device is not its own peer.
    ASSERT_EQ(memarea_context_create(&same, 0, 0), MEMAREA_SUCCESS);  // current: same
    EXPECT_STATUS(memarea_context_enable_peer_access(a, 0), MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED);
    EXPECT_STATUS(memarea_context_disable_peer_access(a), MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED);
    EXPECT_STATUS(memarea_context_destroy(same), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_context_destroy(a), MEMAREA_SUCCESS);
  });
}

TEST(Context, PeerAccessBetweenDevices) {
  REQUIRE_CONTEXTS();
  MEMAREA_REQUIRE_DEVICES(2);
  on_fresh_thread([] {
    for (int d = 0; d < devices(); ++d) {
      for (int p = 0; p < devices(); ++p) {
        if (p == d) continue;
        context peer = context::create(p);
        context::pop();
        context self = context::create(d);  // current
        if (!memarea::peer::can_access(d, p)) {
          EXPECT_MEMAREA_ERROR(peer.enable_peer_access(), errc::peer_access_unsupported);
          continue;
        }
        EXPECT_MEMAREA_ERROR(peer.enable_peer_access(1), errc::invalid_value);
        EXPECT_MEMAREA_ERROR(peer.disable_peer_access(), errc::peer_access_not_enabled);
        peer.enable_peer_access();
        EXPECT_MEMAREA_ERROR(peer.enable_peer_access(), errc::peer_access_already_enabled);
        // One direction only: from the peer's context, access to self is still off.
        peer.push();
        EXPECT_MEMAREA_ERROR(self.disable_peer_access(), errc::peer_access_not_enabled);
        context::pop();
        peer.disable_peer_access();
        EXPECT_MEMAREA_ERROR(peer.disable_peer_access(), errc::peer_access_not_enabled);
        peer.enable_peer_access();
        void* gone = peer.native();
        peer.destroy();  // access to it goes with it
        EXPECT_STATUS(memarea_context_disable_peer_access(static_cast<memarea_context_t>(gone)),
                      MEMAREA_ERROR_INVALID_CONTEXT);
        self.synchronize();
      }
    }
  });
}

TEST(Context, TooManyPeersOnSim) {
  REQUIRE_CONTEXTS();
  MEMAREA_REQUIRE_DEVICES(2);
  if (std::string(backend_name()) != "sim" || !memarea::peer::can_access(0, 1))
    GTEST_SKIP() << "the peer budget is modelled on the sim (MEMAREA_SIM_MAX_PEERS, 8)";
  on_fresh_thread([] {
    std::vector<context> peers;
    for (int i = 0; i < 9; ++i) {
      peers.push_back(context::create(1));
      context::pop();
    }
    context self = context::create(0);
    for (int i = 0; i < 8; ++i) peers[static_cast<size_t>(i)].enable_peer_access();
    EXPECT_MEMAREA_ERROR(peers[8].enable_peer_access(), errc::too_many_peers);
    peers[0].disable_peer_access();
    peers[8].enable_peer_access();  // the budget is per context: one freed, one taken
    for (int i = 1; i < 9; ++i) peers[static_cast<size_t>(i)].disable_peer_access();
  });
}

// memarea's own calls act on the primary context of the device they name, and leave the
// user's context current.
TEST(Context, MemareaCallsKeepTheUsersContext) {
  REQUIRE_CONTEXTS();
  on_fresh_thread([] {
    const int last = devices() - 1;
    context user = context::create(0, MEMAREA_CONTEXT_SCHED_BLOCKING_SYNC);
    {
      area dev(last);
      buffer b = dev.allocate(1 << 16);
      std::vector<unsigned char> host(1 << 16, 0x5a), back(1 << 16, 0);
      copy(b.data(), host.data(), host.size());
      copy(back.data(), b.data(), back.size());
      EXPECT_EQ(std::memcmp(host.data(), back.data(), host.size()), 0);
      allocation_info info = lookup(b.data());
      EXPECT_EQ(info.device, last) << "the memory is the named device's";
      EXPECT_EQ(context::current().native(), user.native());
      memarea_area_t ca = nullptr;
      void* x = nullptr;
      ASSERT_EQ(memarea_area_create(&ca, last, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
      ASSERT_EQ(memarea_area_mmap(ca, &x, 4096, NULL), MEMAREA_SUCCESS)
          << memarea_last_error_message();
      EXPECT_STATUS(memarea_area_munmap(ca, x, 4096), MEMAREA_SUCCESS);
      EXPECT_STATUS(memarea_area_destroy(ca), MEMAREA_SUCCESS);
    }
    EXPECT_EQ(context::current().native(), user.native()) << "memarea's calls left it current";
    EXPECT_EQ(user.device(), 0);
    user.synchronize();
  });
}
