// memarea::error's category, in base (the lowest layer) rather than in core: the driver layer
// throws memarea::error (driver.cpp's throw_status, the sim's settings) and must not depend on
// core, while the error type itself is public (include/memarea/error.hpp) and header-only but
// for this one function. What core adds to errors (the release-failure record) stays in core.
// The status names are here too (the C API's memarea_status_name): the category's messages.
#include <memarea/error.hpp>
#include <memarea/memarea.h>

extern "C" const char* memarea_status_name(memarea_status s) {
  switch (s) {
    case MEMAREA_SUCCESS: return "MEMAREA_SUCCESS";
    case MEMAREA_ERROR_INVALID_VALUE: return "MEMAREA_ERROR_INVALID_VALUE";
    case MEMAREA_ERROR_INVALID_DEVICE: return "MEMAREA_ERROR_INVALID_DEVICE";
    case MEMAREA_ERROR_OUT_OF_MEMORY: return "MEMAREA_ERROR_OUT_OF_MEMORY";
    case MEMAREA_ERROR_NOT_SUPPORTED: return "MEMAREA_ERROR_NOT_SUPPORTED";
    case MEMAREA_ERROR_NO_DEVICE: return "MEMAREA_ERROR_NO_DEVICE";
    case MEMAREA_ERROR_NOT_FOUND: return "MEMAREA_ERROR_NOT_FOUND";
    case MEMAREA_ERROR_BUSY: return "MEMAREA_ERROR_BUSY";
    case MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED: return "MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED";
    case MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
      return "MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED: return "MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED";
    case MEMAREA_ERROR_TOO_MANY_PEERS: return "MEMAREA_ERROR_TOO_MANY_PEERS";
    case MEMAREA_ERROR_INVALID_HANDLE: return "MEMAREA_ERROR_INVALID_HANDLE";
    case MEMAREA_ERROR_INVALID_CONTEXT: return "MEMAREA_ERROR_INVALID_CONTEXT";
    case MEMAREA_ERROR_NOT_PERMITTED: return "MEMAREA_ERROR_NOT_PERMITTED";
    case MEMAREA_ERROR_INITIALIZATION: return "MEMAREA_ERROR_INITIALIZATION";
    case MEMAREA_ERROR_UNKNOWN: break;
  }
  return "MEMAREA_ERROR_UNKNOWN";
}

namespace memarea {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "memarea"; }
  std::string message(int code) const override {
    return memarea_status_name(static_cast<memarea_status>(code));
  }
};

}  // namespace

const std::error_category& memarea_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace memarea
