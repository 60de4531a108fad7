// warm_own_code: memarea's code is mapped into this process's page tables afterwards (the
// mapping's resident set in /proc/self/smaps covers it), and it can run again.
#include "base/warm_code.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct text_mapping {
  std::uintptr_t begin = 0, end = 0;
  std::uint64_t rss_kib = 0;
};

/// The smaps entry of the mapping that holds address a.
text_mapping mapping_of(std::uintptr_t a) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  text_mapping m;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long b = 0, e = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &b, &e) == 2 && line.find(' ') != std::string::npos &&
        line.find(':') > line.find(' ')) {
      inside = a >= b && a < e;
      if (inside) m.begin = b, m.end = e;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) {
      std::istringstream(line.substr(4)) >> m.rss_kib;
      return m;
    }
  }
  return m;
}

}  // namespace

TEST(WarmCode, MapsTheWholeCodeMappingAndCanRunAgain) {
  const auto here = reinterpret_cast<std::uintptr_t>(&memarea::detail::warm_own_code);
  const unsigned long warmed = memarea::detail::warm_own_code();
  ASSERT_GT(warmed, 0u) << "nothing warmed";
  const text_mapping m = mapping_of(here);
  ASSERT_GT(m.end, m.begin) << "no mapping holds memarea's code";
  const std::uint64_t size_kib = (m.end - m.begin) / 1024;
  EXPECT_GE(warmed / 1024, size_kib) << "the segment is at least the mapping that holds it";
  // Every page of the mapping is in the page tables now (Rss counts exactly those).
  EXPECT_GE(m.rss_kib, size_kib) << "resident " << m.rss_kib << " KiB of " << size_kib;
  EXPECT_EQ(memarea::detail::warm_own_code(), warmed);
}
