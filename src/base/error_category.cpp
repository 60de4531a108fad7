// memarea::error's category, in base (the lowest layer) rather than in core: the driver layer
// throws memarea::error (driver.cpp's throw_status, the sim's settings) and must not depend on
// core, while the error type itself is public (include/memarea/error.hpp) and header-only but
// for this one function. What core adds to errors (the release-failure record) stays in core.
// The status names are here too (the C API's memarea_status_name): the category's messages.
// The C++ headers spell errc's values without memarea.h; here they are checked against it.
#include <memarea/error.hpp>
#include <memarea/memarea.h>

namespace {
using memarea::errc;
constexpr bool same(errc e, memarea_status s) { return static_cast<int>(e) == static_cast<int>(s); }
static_assert(same(errc::success, MEMAREA_SUCCESS));
static_assert(same(errc::invalid_value, MEMAREA_ERROR_INVALID_VALUE));
static_assert(same(errc::invalid_device, MEMAREA_ERROR_INVALID_DEVICE));
static_assert(same(errc::out_of_memory, MEMAREA_ERROR_OUT_OF_MEMORY));
static_assert(same(errc::not_supported, MEMAREA_ERROR_NOT_SUPPORTED));
static_assert(same(errc::no_device, MEMAREA_ERROR_NO_DEVICE));
static_assert(same(errc::not_found, MEMAREA_ERROR_NOT_FOUND));
static_assert(same(errc::busy, MEMAREA_ERROR_BUSY));
static_assert(same(errc::peer_access_unsupported, MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED));
static_assert(same(errc::peer_access_already_enabled, MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED));
static_assert(same(errc::peer_access_not_enabled, MEMAREA_ERROR_PEER_ACCESS_NOT_ENABLED));
static_assert(same(errc::too_many_peers, MEMAREA_ERROR_TOO_MANY_PEERS));
static_assert(same(errc::invalid_handle, MEMAREA_ERROR_INVALID_HANDLE));
static_assert(same(errc::invalid_context, MEMAREA_ERROR_INVALID_CONTEXT));
static_assert(same(errc::not_permitted, MEMAREA_ERROR_NOT_PERMITTED));
static_assert(same(errc::initialization, MEMAREA_ERROR_INITIALIZATION));
static_assert(same(errc::unknown, MEMAREA_ERROR_UNKNOWN));
}  // namespace

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

const char* to_string(errc e) noexcept {
  return memarea_status_name(static_cast<memarea_status>(e));
}

const std::error_category& memarea_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace memarea
