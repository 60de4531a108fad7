// `memarea ps` (memarea_ps_json, include/memarea/report.h; docs/usage.md) over three real
// processes that export to and import from one another: each one's figures and the sharing
// between them, exactly, in the C API's document and in `memarea ps --json`; then one killed
// with SIGKILL, gone from both.
#include "api/process_util.hpp"

#include <memarea/report.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

using namespace memarea;
using namespace memarea::test;
using nlohmann::json;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

json ps_document() {
  char* text = nullptr;
  const memarea_status s = memarea_ps_json(&text, nullptr);
  if (s != MEMAREA_SUCCESS) throw std::runtime_error(memarea_last_error_message());
  json j = json::parse(text);
  memarea_string_free(text);
  return j;
}

#ifdef MEMAREA_TEST_CLI
/// The memarea tool: $MEMAREA_TEST_CLI (a copied build tree), else the one CMake built.
std::string cli_path() {
  const char* e = std::getenv("MEMAREA_TEST_CLI");
  return e && *e ? e : MEMAREA_TEST_CLI;
}

std::string output_of_the_cli(const std::string& args) {
  FILE* f = popen((cli_path() + " " + args).c_str(), "r");
  if (!f) throw std::runtime_error("popen");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  if (pclose(f) != 0) throw std::runtime_error("memarea " + args + " failed: " + out);
  return out;
}

json ps_of_the_cli() { return json::parse(output_of_the_cli("ps --json")); }
#endif

/// The processes of `owners` in a ps document, by owner, with what a test can know of them:
/// pid, figures, exports (open_in sorted) and imports (sorted); the others left out.
std::map<std::string, json> of_owners(const json& doc, const std::set<std::string>& owners) {
  std::map<std::string, json> out;
  auto by_pid = [](const json& a, const json& b) { return a.at("pid") < b.at("pid"); };
  for (const json& p : doc.at("processes")) {
    const std::string o = p.at("owner");
    if (!owners.count(o)) continue;
    json exports = json::array();
    for (json e : p.at("exports")) {
      std::vector<json> open_in(e.at("open_in").begin(), e.at("open_in").end());
      std::sort(open_in.begin(), open_in.end(), by_pid);
      e["open_in"] = open_in;
      exports.push_back(e);
    }
    std::vector<json> imports(p.at("imports").begin(), p.at("imports").end());
    std::sort(imports.begin(), imports.end(), [](const json& a, const json& b) {
      return a.at("from").at("pid") < b.at("from").at("pid");
    });
    out[o] = {{"pid", p.at("pid")},
              {"pid_here", p.at("pid_here")},
              {"devices", p.at("devices")},
              {"exports", exports},
              {"imports", imports}};
  }
  return out;
}

/// What the helper's "usage" command prints.
std::string fmt_usage_line(std::size_t live, std::size_t reserved, std::size_t exported,
                           std::size_t imported) {
  return "live=" + std::to_string(live) + " reserved=" + std::to_string(reserved) +
         " exported=" + std::to_string(exported) + " imported=" + std::to_string(imported);
}

json figures(std::size_t live, std::size_t exported, std::size_t imported) {
  return {{"device", 0},
          {"live", live},
          {"cached", 0},
          {"reserved", live},
          {"exported", exported},
          {"imported", imported},
          {"peak_live", live},
          {"peak_cached", 0},
          {"peak_reserved", live},
          {"peak_exported", exported},
          {"peak_imported", imported}};
}

}  // namespace

TEST(UsageProcess, PsReportsThreeProcessesAndTheirSharingExactlyAndForgetsAKilledOne) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  // A exports 6 MiB, B 4 MiB, C 2 MiB; A opens B's, B opens C's, C opens A's and B's.
  const std::size_t na = 6 * MiB, nb = 4 * MiB, nc = 2 * MiB;
  child a({"share", str(na)}), b({"share", str(nb)}), c({"share", str(nc)});
  const std::string ha = a.line(), hb = b.line(), hc = c.line();
  ASSERT_EQ(a.ask("open " + hb), "ok");
  ASSERT_EQ(b.ask("open " + hc), "ok");
  ASSERT_EQ(c.ask("open " + ha), "ok");
  ASSERT_EQ(c.ask("open " + hb), "ok");
  const std::string oa = a.ask("owner"), ob = b.ask("owner"), oc = c.ask("owner");
  // Each process's own figures, as it reads them.
  EXPECT_EQ(a.ask("usage"), fmt_usage_line(na, na, na, nb));
  EXPECT_EQ(b.ask("usage"), fmt_usage_line(nb, nb, nb, nc));
  EXPECT_EQ(c.ask("usage"), fmt_usage_line(nc, nc, nc, na + nb));
  auto who = [](child& p, const std::string& owner) {
    return json{{"owner", owner}, {"pid", p.pid()}, {"pid_here", p.pid()}};
  };
  auto process = [&](child& p, std::size_t n, std::size_t imported, json open_in, json imports) {
    return json{{"pid", p.pid()},
                {"pid_here", p.pid()},
                {"devices", json::array({figures(n, n, imported)})},
                {"exports", json::array({{{"device", 0},
                                          {"bytes", n},
                                          {"freed", false},
                                          {"open_in", open_in}}})},
                {"imports", imports}};
  };
  auto import_of = [](const json& from, std::size_t n) {
    return json{{"from", from}, {"device", 0}, {"bytes", n}};
  };
  std::map<std::string, json> want{
      {oa, process(a, na, nb, json::array({who(c, oc)}), json::array({import_of(who(b, ob), nb)}))},
      {ob, process(b, nb, nc, json::array({who(a, oa), who(c, oc)}),
                   json::array({import_of(who(c, oc), nc)}))},
      {oc, process(c, nc, na + nb, json::array({who(b, ob)}),
                   json::array({import_of(who(a, oa), na), import_of(who(b, ob), nb)}))}};
  // Each process publishes on its background thread's tick: poll until all three have.
  const std::set<std::string> owners{oa, ob, oc};
  auto until = [&](const std::map<std::string, json>& expected) {
    std::map<std::string, json> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
      got = of_owners(ps_document(), owners);
      if (got == expected) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return got;
  };
  auto show = [](const std::map<std::string, json>& m) { return json(m).dump(1); };
  auto got = until(want);
  ASSERT_EQ(show(got), show(want));
#ifdef MEMAREA_TEST_CLI
  EXPECT_EQ(show(of_owners(ps_of_the_cli(), owners)), show(want)) << "memarea ps --json";
  // The text names the others by the pid that holds their lease here.
  const std::string text = output_of_the_cli("ps");
  auto named = [](child& p, const std::string& owner) {
    return "pid " + std::to_string(p.pid()) + " (" + owner.substr(0, 8) + ")";
  };
  EXPECT_NE(text.find("open in " + named(c, oc)), std::string::npos) << text;
  EXPECT_NE(text.find("from " + named(b, ob)), std::string::npos) << text;
#endif

  // C killed: gone, and with it its place among the importers of A's and B's buffers; B's
  // mapping of C's memory stays (B holds it open), counted, with no exporter to name.
  c.kill_now();
  EXPECT_EQ(c.wait(), 128 + SIGKILL);
  want.erase(oc);
  want[oa]["exports"][0]["open_in"] = json::array();
  want[ob]["exports"][0]["open_in"] = json::array({who(a, oa)});
  want[ob]["imports"] = json::array();
  got = until(want);
  EXPECT_EQ(show(got), show(want));
#ifdef MEMAREA_TEST_CLI
  EXPECT_EQ(show(of_owners(ps_of_the_cli(), owners)), show(want)) << "memarea ps --json";
#endif
}

TEST(UsageProcess, PsRefusesABadDeviceAndNullOutput) {
  int bad = -2;
  char* text = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(memarea_ps_json(&text, &bad), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(memarea_ps_json(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
}
