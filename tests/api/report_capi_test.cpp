// The C API of the reports (memarea/report.h): memarea_info_json and memarea_topo_json give the
// documents `memarea info --json` and `memarea topo --json` print.
#include "api/common.hpp"

#include <memarea/report.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// Takes a string the C API returned, frees it, and parses it.
nlohmann::json take(char* s) {
  EXPECT_NE(s, nullptr);
  std::string text = s ? s : "";
  memarea_string_free(s);
  return nlohmann::json::parse(text);
}

}  // namespace

TEST(ReportCapi, InfoJsonDescribesTheBackendAndEveryDevice) {
  char* s = nullptr;
  ASSERT_EQ(memarea_info_json(&s), MEMAREA_SUCCESS) << memarea_last_error_message();
  const auto j = take(s);
  EXPECT_EQ(j["backend"], memarea::backend_name());
  EXPECT_FALSE(j["memarea_version"].get<std::string>().empty());
  const int n = memarea::test::devices();
  ASSERT_EQ(j["devices"].size(), static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    const auto p = memarea::get_device_properties(d);
    EXPECT_EQ(j["devices"][d]["ordinal"], d);
    EXPECT_EQ(j["devices"][d]["name"], p.name);
    EXPECT_EQ(j["devices"][d]["total_memory"], p.total_memory);
  }
  EXPECT_FALSE(j["backends"].empty());
  EXPECT_FALSE(j["host"]["numa_nodes"].empty());
}

// (Built without the measurement: the report's refusal, saying why.)
TEST(ReportCapi, TopoJsonMeasuresEveryOrderedPair) {
  char* s = nullptr;
  if (!memarea::test::topo_built())
    return memarea::test::expect_topo_compiled_out(memarea_topo_json(&s, 1 << 16, 1), s);
  if (memarea::backend_name() != "sim")
    GTEST_SKIP() << "measures seconds on a GPU (the GPU suite runs `memarea topo`)";
  ASSERT_EQ(memarea_topo_json(&s, 1 << 16, 1), MEMAREA_SUCCESS) << memarea_last_error_message();
  const auto j = take(s);
  const int n = memarea::test::devices();
  EXPECT_EQ(j["backend"], "sim");
  EXPECT_EQ(j["size"], 1 << 16);
  EXPECT_EQ(j["reps"], 1);
  ASSERT_EQ(j["access"].size(), static_cast<std::size_t>(n));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) {
        EXPECT_TRUE(j["unidirectional_gbps"][a][b].is_null());
      } else {
        EXPECT_GT(j["unidirectional_gbps"][a][b].get<double>(), 0.0) << a << "->" << b;
        EXPECT_EQ(j["link"][a][b], "sim");
      }
    }
  EXPECT_EQ(j["all_pairs_at_once_total_gbps"].is_null(), n < 2);
}

TEST(ReportCapi, TopoJsonExMeasuresTheBaselineAndReportsProgress) {
  char* s = nullptr;
  EXPECT_EQ(memarea_topo_json_ex(&s, 1 << 16, 1, 0x80u, nullptr, nullptr),
            MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::strstr(memarea_last_error_message(), "flags"), nullptr);
  EXPECT_EQ(s, nullptr);
  std::vector<std::string> heard;
  const auto progress = [](const char* what, void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back(what);
  };
  if (!memarea::test::topo_built()) {
    memarea::test::expect_topo_compiled_out(
        memarea_topo_json_ex(&s, 1 << 16, 1, MEMAREA_TOPO_BASELINE, progress, &heard), s);
    EXPECT_TRUE(heard.empty()) << "progress reported by a library that measures nothing";
    return;
  }
  if (memarea::backend_name() != "sim")
    GTEST_SKIP() << "measures seconds on a GPU (the GPU suite runs `memarea topo --baseline`)";
  ASSERT_EQ(memarea_topo_json_ex(&s, 1 << 16, 1, MEMAREA_TOPO_BASELINE, progress, &heard),
            MEMAREA_SUCCESS)
      << memarea_last_error_message();
  const auto j = take(s);
  const int n = memarea::test::devices();
  ASSERT_EQ(j["host_to_device_gbps"].size(), static_cast<std::size_t>(n));
  ASSERT_TRUE(j.contains("raw"));
  for (int d = 0; d < n; ++d) {
    EXPECT_GT(j["host_to_device_gbps"][d].get<double>(), 0.0);
    EXPECT_GT(j["raw"]["device_to_host_gbps"][d].get<double>(), 0.0);
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        EXPECT_GT(j["raw"]["unidirectional_gbps"][a][b].get<double>(), 0.0);
        EXPECT_GT(j["latency_4k_us"][a][b].get<double>(), 0.0);
      }
  EXPECT_TRUE(j["methods"].contains("latency_4k_us"));
  // One step per device (host <-> device), per ordered pair, and all pairs at once.
  const std::size_t steps =
      static_cast<std::size_t>(n + n * (n - 1)) + (n >= 2 ? 1u : 0u);
  EXPECT_EQ(heard.size(), steps);
  if (n >= 2) {
    EXPECT_NE(std::find(heard.begin(), heard.end(), "measuring 0 -> 1"), heard.end());
  }
}
