// The CUDA backend's context scope (cuda_driver.cpp): a context made current for one scope,
// the thread's previous one put back on every path.
#pragma once

#include "driver/cuda/cuda_api.hpp"

namespace memarea::detail::cuda {

/// Makes a context current for one scope and puts the thread's previous one back on every path,
/// so helper code never leaks a current device. Does nothing when the context is already current.
class ctx_scope {
 public:
  explicit ctx_scope(const cuda::api& cu) noexcept : cu_(cu) {}
  ctx_scope(const ctx_scope&) = delete;
  ctx_scope& operator=(const ctx_scope&) = delete;
  ~ctx_scope() {
    if (switched_) cu_.CtxSetCurrent(previous_);  // nothing useful to do if this fails
  }

  /// Reads the current context (needed before switching, and by enter_any).
  CUresult read_current(CUcontext* current) noexcept {
    CUresult r = cu_.CtxGetCurrent(&previous_);
    if (r == CUDA_SUCCESS) {
      have_previous_ = true;
      *current = previous_;
    }
    return r;
  }

  /// Makes `target` current; the first call remembers what to restore.
  CUresult enter(CUcontext target) noexcept {
    if (!have_previous_) {
      CUcontext ignored;
      CUresult r = read_current(&ignored);
      if (r != CUDA_SUCCESS) return r;
    }
    if (previous_ == target) return CUDA_SUCCESS;
    CUresult r = cu_.CtxSetCurrent(target);
    if (r == CUDA_SUCCESS) switched_ = true;
    return r;
  }

 private:
  const cuda::api& cu_;
  CUcontext previous_ = nullptr;
  bool have_previous_ = false;
  bool switched_ = false;
};

}  // namespace memarea::detail::cuda
