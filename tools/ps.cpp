// `memarea ps`: the processes on this machine that use memarea, their memory per device, and what
// they share with one another (memarea_ps_json, include/memarea/report.h; docs/usage.md).
#include "tools/commands.hpp"

#include <memarea/error.hpp>
#include <memarea/report.h>

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

namespace memarea::cli {

namespace {

/// bytes as a short figure (binary units, 1 decimal above KiB).
std::string human(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string device_name(int d) { return d == -1 ? "host" : d < -1 ? "?" : std::to_string(d); }

/// A process as the text names it: by the pid that holds its lease here, or, where none was
/// found, by the pid its table claims, said to be a claim (a table is the writer's word).
std::string process_name(const nlohmann::json& who) {
  const std::string owner = who.at("owner").get<std::string>().substr(0, 8);
  if (who.contains("pid_here") && !who.at("pid_here").is_null())
    return fmt::format("pid {} ({})", who.at("pid_here").get<long>(), owner);
  return fmt::format("{} (claims pid {})", owner, who.at("pid").get<long>());
}

}  // namespace

nlohmann::json ps_json(const int* device) {
  char* text = nullptr;
  const memarea_status s = memarea_ps_json(&text, device);
  if (s != MEMAREA_SUCCESS)
    throw error(static_cast<errc>(s), memarea_last_error_message());
  std::unique_ptr<char, void (*)(char*)> owned(text, memarea_string_free);
  return nlohmann::json::parse(text);
}

int run_ps(bool json, const int* device) {
  const nlohmann::json j = ps_json(device);
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:>8} {:>8} {:<16} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "PID",
                           "PID HERE", "COMMAND", "DEVICE", "LIVE", "CACHED", "RESERVED",
                           "EXPORTED", "IMPORTED");
  for (const auto& p : j.at("processes")) {
    const std::string here = p.at("pid_here").is_null()
                                 ? std::string("?")
                                 : std::to_string(p.at("pid_here").get<long>());
    bool first = true;
    for (const auto& d : p.at("devices")) {
      std::cout << fmt::format(
          "{:>8} {:>8} {:<16} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
          first ? std::to_string(p.at("pid").get<long>()) : "", first ? here : "",
          first ? p.at("command").get<std::string>() : "", device_name(d.at("device").get<int>()),
          human(d.at("live")), human(d.at("cached")), human(d.at("reserved")),
          human(d.at("exported")), human(d.at("imported")));
      first = false;
    }
    if (first)
      std::cout << fmt::format("{:>8} {:>8} {:<16} (nothing held)\n", p.at("pid").get<long>(),
                               here, p.at("command").get<std::string>());
    for (const auto& e : p.at("exports")) {
      std::string to;
      for (const auto& w : e.at("open_in")) to += (to.empty() ? "" : ", ") + process_name(w);
      std::cout << fmt::format("{:>18}exports {} on device {}{}, open in {}\n", "",
                               human(e.at("bytes")), device_name(e.at("device").get<int>()),
                               e.at("freed").get<bool>() ? " (freed)" : "",
                               to.empty() ? "no other process" : to);
    }
    for (const auto& i : p.at("imports"))
      std::cout << fmt::format("{:>18}imports {} of device {} from {}\n", "", human(i.at("bytes")),
                               device_name(i.at("device").get<int>()), process_name(i.at("from")));
  }
  for (const auto& s : j.at("skipped"))
    std::cout << fmt::format("skipped {}: {}\n",
                             s.contains("owner") ? "lease " + s.at("owner").get<std::string>()
                                                 : "segment " + s.at("segment").get<std::string>(),
                             s.at("why").get<std::string>());
  return 0;
}

}  // namespace memarea::cli
