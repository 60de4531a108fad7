// The C API of the reports (memarea/report.h), where the registry must show that a refused
// measurement left nothing behind. The rest is api/report_capi_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/report.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <string>

namespace {

/// Takes a string the C API returned, frees it, and parses it.
nlohmann::json take(char* s) {
  EXPECT_NE(s, nullptr);
  std::string text = s ? s : "";
  memarea_string_free(s);
  return nlohmann::json::parse(text);
}

}  // namespace

TEST(ReportCapi, DefaultsAndRefusals) {
  EXPECT_EQ(memarea_info_json(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::strstr(memarea_last_error_message(), "json"), nullptr);
  EXPECT_EQ(memarea_topo_json(nullptr, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
  memarea_string_free(nullptr);  // does nothing
  char* s = nullptr;  // size 0 and reps 0: the CLI's defaults for sim
  if (!memarea::test::topo_built()) {
    const std::size_t before = memarea::test::live_allocations();
    memarea::test::expect_topo_compiled_out(memarea_topo_json(&s, 0, 0), s);
    EXPECT_EQ(memarea::test::live_allocations(), before);
    return;
  }
  if (memarea::backend_name() != "sim") return;
  // The all-pairs measurement holds, on each device, a 4 MiB source and destination per other
  // device: a configuration with smaller devices (sim10_budget8: 64 MiB each) cannot hold them,
  // and must say so, leaving nothing behind.
  const int n = memarea::test::devices();
  const std::size_t needed =
      std::size_t{2} * static_cast<std::size_t>(n > 1 ? n - 1 : 0) * (std::size_t{4} << 20);
  if (n > 1 && memarea::get_device_properties(0).total_memory < needed) {
    const std::size_t before = memarea::test::live_allocations();
    EXPECT_EQ(memarea_topo_json(&s, 0, 0), MEMAREA_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(std::strstr(memarea_last_error_message(), "free"), nullptr)
        << memarea_last_error_message();
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(memarea::test::live_allocations(), before);
    return;
  }
  ASSERT_EQ(memarea_topo_json(&s, 0, 0), MEMAREA_SUCCESS) << memarea_last_error_message();
  const auto j = take(s);
  EXPECT_EQ(j["size"], 4 << 20);
  EXPECT_EQ(j["reps"], 3);
}
