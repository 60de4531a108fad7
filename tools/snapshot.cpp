// `memarea snapshot`: the memory this process holds (memarea_snapshot_json), or a snapshot a
// program saved (--from), as JSON, a summary, or a picture (--svg; tools/snapshot_svg.hpp).
#include "tools/commands.hpp"
#include "tools/output_file.hpp"
#include "tools/snapshot_svg.hpp"

#include <memarea/error.hpp>
#include <memarea/report.h>

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace memarea::cli {

int run_snapshot(bool json, const std::string& svg_path, const std::string& colour,
                 const std::string& from, int device) {
  if (colour != "kind" && colour != "age")
    throw error(errc::invalid_value, "snapshot: --color is kind or age, not " + colour);
  if (!svg_path.empty()) require_writable(svg_path, "snapshot --svg");
  nlohmann::json j;
  if (!from.empty()) {
    std::ifstream in(from);
    if (!in) throw error(errc::invalid_value, "snapshot: cannot read " + from);
    std::stringstream text;
    text << in.rdbuf();
    try {
      j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      throw error(errc::invalid_value,
                  fmt::format("snapshot: {} is not JSON: {}", from, e.what()));
    }
  } else {
    char* text = nullptr;
    const memarea_status s = memarea_snapshot_json(&text, device);
    if (s != MEMAREA_SUCCESS) throw error(static_cast<errc>(s), memarea_last_error_message());
    std::unique_ptr<char, void (*)(char*)> owned(text, memarea_string_free);
    j = nlohmann::json::parse(text);
  }
  // A file from --from is anyone's text: whatever in it is not a snapshot's shape is named as
  // such, with the parser's words, rather than as a failure of memarea.
  try {
    if (!svg_path.empty()) {
      const auto pic = svg::snapshot_picture(
          j, colour == "age" ? svg::snapshot_colour::age : svg::snapshot_colour::kind);
      write_file(svg_path, pic.svg, "snapshot --svg");
    }
    if (json) {
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    for (const auto& d : j.at("devices")) {
      const int dev = d.at("device").get<int>();
      std::cout << fmt::format("{}: {} blocks, reserved {} B, live {} B\n",
                               dev == -1 ? std::string("host") : fmt::format("device {}", dev),
                               d.at("blocks").size(), d.at("usage").value("reserved", 0ull),
                               d.at("usage").value("live", 0ull));
    }
  } catch (const nlohmann::json::exception& e) {
    throw error(errc::invalid_value,
                fmt::format("snapshot: {} is not a memarea snapshot: {}",
                            from.empty() ? std::string("the library's snapshot") : from,
                            e.what()));
  }
  return 0;
}

}  // namespace memarea::cli
