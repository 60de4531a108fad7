// A native stream made outside memarea, as PyTorch, CuPy or NCCL make theirs: on sim through
// memarea::sim; on CUDA through libcuda's own cuStreamCreate, and on HIP through the runtime's
// hipStreamCreate, each from the library memarea loaded (dlopen with RTLD_NOLOAD), as a user
// program would call them. For the tests of stream_view::wrap, events and record_stream.
#pragma once

#include "common.hpp"

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <utility>

namespace memarea::test {

/// A foreign native stream of one device, destroyed at scope end (after a synchronize through
/// memarea, its lifetime rule: forget_stream first).
class foreign_stream {
 public:
  /// A stream of device d; native() is null (and reason() says why) where this backend has no
  /// way to make one here.
  explicit foreign_stream(int d) : device_(d) { make(d); }
  ~foreign_stream() { destroy(); }
  foreign_stream(const foreign_stream&) = delete;
  foreign_stream& operator=(const foreign_stream&) = delete;

  void* native() const { return native_; }
  int device() const { return device_; }
  const std::string& reason() const { return reason_; }
  /// memarea's view of it.
  stream_view view() const { return stream_view::wrap(native_, device_); }

  /// Forgets it in memarea, then destroys it as its owner would (once).
  void destroy() {
    if (!native_) return;
    void* n = std::exchange(native_, nullptr);
    forget_stream(stream_view::wrap(n, device_));
    if (destroy_) {
      device_guard g(device_);
      (void)destroy_(n);
    } else {
      sim::destroy_native_stream(n, device_);
    }
  }

 private:
  void make(int d) {
    const std::string b = backend_name();
    if (b == "sim") {
      native_ = sim::create_native_stream(d);
    } else if (b == "cuda") {
      lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (!lib_) return fail("libcuda.so.1 is not loaded");
      create_ = reinterpret_cast<int (*)(void**, unsigned)>(dlsym(lib_, "cuStreamCreate"));
      destroy_ = reinterpret_cast<int (*)(void*)>(dlsym(lib_, "cuStreamDestroy_v2"));
      if (!create_ || !destroy_) return fail("libcuda lacks cuStreamCreate / cuStreamDestroy_v2");
      device_guard g(d);  // memarea makes device d's primary context current
      if (create_(&native_, 1u /* CU_STREAM_NON_BLOCKING */) != 0) return fail("cuStreamCreate failed");
    } else if (b == "hip") {
      for (const char* name : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
        if ((lib_ = dlopen(name, RTLD_NOW | RTLD_NOLOAD))) break;
      if (!lib_) return fail("no libamdhip64 is loaded");
      create_ = reinterpret_cast<int (*)(void**, unsigned)>(dlsym(lib_, "hipStreamCreateWithFlags"));
      destroy_ = reinterpret_cast<int (*)(void*)>(dlsym(lib_, "hipStreamDestroy"));
      if (!create_ || !destroy_) return fail("the HIP runtime lacks hipStreamCreateWithFlags");
      device_guard g(d);  // hipSetDevice(d)
      if (create_(&native_, 1u /* hipStreamNonBlocking */) != 0) return fail("hipStreamCreate failed");
    } else {
      fail("backend " + b + " has no streams");
    }
  }

  void fail(std::string why) {
    native_ = nullptr;
    reason_ = std::move(why);
  }

  int device_;
  void* native_ = nullptr;
  void* lib_ = nullptr;
  int (*create_)(void**, unsigned) = nullptr;
  int (*destroy_)(void*) = nullptr;
  std::string reason_;
};

/// Skips the test when fs could not be made.
#define REQUIRE_FOREIGN(fs) \
  do {                      \
    if (!(fs).native()) GTEST_SKIP() << "no foreign stream: " << (fs).reason(); \
  } while (0)

/// Whether the active backend is the sim (whose gates hold a stream back at will).
inline bool on_sim() { return backend_name() == "sim"; }

}  // namespace memarea::test
