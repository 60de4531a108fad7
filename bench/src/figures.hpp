// How `memarea-bench` writes a measured number: three significant figures in fixed notation.
#pragma once

#include <string>

namespace memarea::cli {

/// x with three significant figures and no exponent ("0.985", "13.4", "1.00", "1000"); the
/// caller picks a unit that keeps x small. Zero and non-finite values print as they are.
std::string three_significant(double x);

}  // namespace memarea::cli
