// libmemarea_mpi's test-only settings, read from the environment (test_hooks.hpp).
#include "test_hooks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace memarea::mpi::detail {
namespace {

/// A decimal environment value in [lo, hi]; `fallback` when unset or empty. Anything else is a
/// mistake in a test's settings, described in *bad (the first one kept).
long env_number(const char* name, long lo, long hi, long fallback, std::string* bad) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < lo || n > hi || !(*v >= '0' && *v <= '9')) {
    if (bad->empty()) *bad = fmt::format("{}='{}' is not a number from {} to {}", name, v, lo, hi);
    return fallback;
  }
  return n;
}

}  // namespace

test_hooks test_hooks::parse() {
  test_hooks h;
  std::string bad;
  h.nodes = env_number("MEMAREA_MPI_TEST_NODES", 1, 1L << 20, 1, &bad);
  h.kill_rank = env_number("MEMAREA_MPI_TEST_KILL_RANK", 0, 1L << 30, -1, &bad);
  h.fail_open_rank = env_number("MEMAREA_MPI_TEST_FAIL_OPEN_RANK", 0, 1L << 30, -1, &bad);
  h.bad_record_rank = env_number("MEMAREA_MPI_TEST_BAD_RECORD_RANK", 0, 1L << 30, -1, &bad);
  h.version_rank = env_number("MEMAREA_MPI_TEST_VERSION_RANK", 0, 1L << 30, -1, &bad);
  static constexpr const char* names[] = {"arrive", "exchange", "open", "fence", "destroy"};
  const char* at = std::getenv("MEMAREA_MPI_TEST_KILL_AT");
  if (at && *at) {
    auto it = std::find_if(std::begin(names), std::end(names),
                           [&](const char* n) { return std::strcmp(n, at) == 0; });
    if (it == std::end(names)) {
      if (bad.empty()) {
        bad = fmt::format("MEMAREA_MPI_TEST_KILL_AT='{}' is none of arrive, exchange, open, "
                          "fence, destroy", at);
      }
    } else {
      h.kill_at = static_cast<phase>(it - std::begin(names));
    }
  }
  if (!bad.empty()) {
    test_hooks none;
    none.error = std::move(bad);
    return none;
  }
  return h;
}

}  // namespace memarea::mpi::detail
