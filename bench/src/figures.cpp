#include "bench/src/figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace memarea::cli {

std::string three_significant(double x) {
  if (x == 0 || !std::isfinite(x)) return fmt::format("{}", x);
  int digits = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  // Rounding can carry into the next decade (0.9996 -> 1.00, not 1.000): count the digits of
  // the rounded value.
  const double step = std::pow(10.0, digits - 2);
  if (std::fabs(std::round(x / step) * step) >= std::pow(10.0, digits + 1)) ++digits;
  return fmt::format("{:.{}f}", x, std::max(0, 2 - digits));
}

}  // namespace memarea::cli
