// The testing interface's probe of copies (memarea_testing.hpp): the library's own record of
// the calling thread's last copy, in the interface's enumeration.
#include "testing/memarea_testing.hpp"

#include "core/copy/copy_impl.hpp"

namespace memarea::detail::testing {

namespace {
// The two enumerations name the same paths by the same values.
template <detail::copy_path P, copy_path Q>
constexpr bool same = static_cast<int>(P) == static_cast<int>(Q);
static_assert(same<detail::copy_path::none, copy_path::none> &&
              same<detail::copy_path::host, copy_path::host> &&
              same<detail::copy_path::driver, copy_path::driver> &&
              same<detail::copy_path::driver_peer, copy_path::driver_peer> &&
              same<detail::copy_path::driver_staged, copy_path::driver_staged> &&
              same<detail::copy_path::staged, copy_path::staged>);
}  // namespace

copy_path last_copy_path() noexcept { return static_cast<copy_path>(detail::last_copy_path()); }

const char* to_string(copy_path p) noexcept {
  return detail::to_string(static_cast<detail::copy_path>(p));
}

}  // namespace memarea::detail::testing
