// The library as MEMAREA_WITH_TOPO=OFF builds it (src/CMakeLists.txt): this test links the
// layers' objects with src/topo/topo_unavailable.cpp's instead of the measurement's. The
// topology report answers not_supported and says how to get it; the rest of the library works.
#include <memarea/memarea.h>
#include <memarea/report.h>

#include <gtest/gtest.h>

#include <string>

namespace {

void expect_unavailable(memarea_status st, char* json) {
  EXPECT_EQ(st, MEMAREA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(json, nullptr);
  const std::string message = memarea_last_error_message();
  EXPECT_NE(message.find("built without the topology measurement"), std::string::npos)
      << message;
  EXPECT_NE(message.find("MEMAREA_WITH_TOPO=ON"), std::string::npos) << message;
}

}  // namespace

TEST(TopoUnavailable, TheReportAnswersNotSupportedSayingWhy) {
  char* json = reinterpret_cast<char*>(1);  // must be reset to NULL
  memarea_status st = memarea_topo_json(&json, 0, 0);
  expect_unavailable(st, json);
  json = reinterpret_cast<char*>(1);
  st = memarea_topo_json_ex(&json, 4096, 1, MEMAREA_TOPO_BASELINE, nullptr, nullptr);
  expect_unavailable(st, json);
  // Argument checks come first, as in the full library.
  EXPECT_EQ(memarea_topo_json(nullptr, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
}

TEST(TopoUnavailable, TheRestOfTheLibraryWorks) {
  char* json = nullptr;
  ASSERT_EQ(memarea_info_json(&json), MEMAREA_SUCCESS) << memarea_last_error_message();
  ASSERT_NE(json, nullptr);
  EXPECT_NE(std::string(json).find("\"backend\""), std::string::npos) << json;
  memarea_string_free(json);
  int n = -1;
  ASSERT_EQ(memarea_get_device_count(&n), MEMAREA_SUCCESS);
  EXPECT_EQ(n, 2);
}
