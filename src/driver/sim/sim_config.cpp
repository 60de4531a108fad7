// The sim backend's settings: parsing of the MEMAREA_SIM_* environment variables.
//
// Every parser is strict (no signs, no trailing junk, no silent clamping) because a typo in CI
// should fail loudly with the variable's name rather than quietly run a different topology.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "driver/sim/sim_config.hpp"

namespace memarea::detail {
namespace {

constexpr int kMaxSimDevices = 64;

/// The exception every parser throws: it names the variable and quotes the bad text so the user
/// can find the typo without reading the source.
[[noreturn]] void bad_value(const char* what, std::string_view text, std::string_view why) {
  throw error(errc::invalid_value, fmt::format("{}: bad value \"{}\": {}", what, text, why));
}

/// Strips blanks at both ends; peer-group lists are often written as "0, 1; 2, 3".
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Parses a whole decimal integer in [lo, hi]; `whole` is the full variable text for messages.
long long parse_int(std::string_view token, const char* what, std::string_view whole, long long lo,
                    long long hi) {
  if (token.empty()) bad_value(what, whole, "expected a number");
  if (token.front() == '-') bad_value(what, whole, "must not be negative");
  if (token.front() < '0' || token.front() > '9') bad_value(what, whole, "not a number");
  long long v = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec == std::errc::result_out_of_range) bad_value(what, whole, "number too large");
  if (ec != std::errc{}) bad_value(what, whole, "not a number");
  if (end != token.data() + token.size()) bad_value(what, whole, "trailing characters");
  if (v < lo || v > hi) {
    bad_value(what, whole, fmt::format("must be between {} and {}", lo, hi));
  }
  return v;
}

/// A 0/1 switch; anything else ("yes", "true", "01") is refused rather than guessed at.
bool parse_switch(std::string_view text, const char* what) {
  if (text == "1") return true;
  if (text != "0") bad_value(what, text, "must be 0 or 1");
  return false;
}

/// The variable's value, or nullptr when it is unset or empty (empty counts as unset so that
/// `MEMAREA_SIM_X= cmd` can switch a setting off in a shell).
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

size_t parse_size(const std::string& text, const char* what) {
  std::string_view s = text;
  if (s.empty()) bad_value(what, text, "expected a size such as 256M");
  if (s.front() == '-') bad_value(what, text, "must not be negative");
  if (s.front() < '0' || s.front() > '9') bad_value(what, text, "not a size");
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) bad_value(what, text, "size too large");
  if (ec != std::errc{}) bad_value(what, text, "not a size");
  std::string_view unit = s.substr(static_cast<size_t>(end - s.data()));
  unsigned shift = 0;
  if (!unit.empty()) {
    switch (unit.front()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      case 'b':
      case 'B':
        shift = 0;
        break;
      default:
        if (unit.front() == '.') bad_value(what, text, "fractions are not supported");
        bad_value(what, text, "unknown unit (use K, M, G or T)");
    }
    // "B" alone is the unit; after K/M/G/T an optional "B" or "iB" may follow.
    std::string_view rest = unit.substr(1);
    bool bare_b = unit.front() == 'b' || unit.front() == 'B';
    if (bare_b) {
      if (!rest.empty()) bad_value(what, text, "trailing characters");
    } else if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib")) {
      bad_value(what, text, "trailing characters");
    }
  }
  if (shift && v > (std::numeric_limits<size_t>::max() >> shift)) {
    bad_value(what, text, "size too large");
  }
  if (v > std::numeric_limits<size_t>::max()) bad_value(what, text, "size too large");
  return static_cast<size_t>(v) << shift;
}

std::vector<std::vector<int>> parse_peer_groups(const std::string& text, int devices) {
  static constexpr const char* what = "MEMAREA_SIM_PEER_GROUPS";
  std::vector<std::vector<int>> groups;
  if (trim(text).empty()) return groups;
  std::vector<bool> seen(static_cast<size_t>(devices > 0 ? devices : 0), false);
  std::string_view rest = text;
  while (true) {
    size_t semi = rest.find(';');
    std::string_view group_text = trim(rest.substr(0, semi));
    if (group_text.empty()) bad_value(what, text, "empty group");
    std::vector<int> group;
    std::string_view members = group_text;
    while (true) {
      size_t comma = members.find(',');
      std::string_view tok = trim(members.substr(0, comma));
      if (tok.empty()) bad_value(what, text, "empty device ordinal");
      int d = static_cast<int>(parse_int(tok, what, text, 0, std::numeric_limits<int>::max()));
      if (d >= devices) {
        bad_value(what, text,
                  fmt::format("device {} does not exist (MEMAREA_SIM_DEVICES is {})", d, devices));
      }
      if (seen[static_cast<size_t>(d)]) {
        bad_value(what, text, fmt::format("device {} appears twice", d));
      }
      seen[static_cast<size_t>(d)] = true;
      group.push_back(d);
      if (comma == std::string_view::npos) break;
      members.remove_prefix(comma + 1);
    }
    groups.push_back(std::move(group));
    if (semi == std::string_view::npos) break;
    rest.remove_prefix(semi + 1);
  }
  return groups;
}

std::vector<int> parse_device_list(const std::string& text, int devices, const char* what) {
  std::vector<int> out;
  if (trim(text).empty()) return out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view tok = trim(rest.substr(0, comma));
    if (tok.empty()) bad_value(what, text, "empty device ordinal");
    int d = static_cast<int>(parse_int(tok, what, text, 0, std::numeric_limits<int>::max()));
    if (d >= devices) {
      bad_value(what, text,
                fmt::format("device {} does not exist (MEMAREA_SIM_DEVICES is {})", d, devices));
    }
    for (int seen : out)
      if (seen == d) bad_value(what, text, fmt::format("device {} appears twice", d));
    out.push_back(d);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

sim_config sim_config_from_env() {
  sim_config c;
  if (const char* v = env("MEMAREA_SIM_DEVICES")) {
    c.devices = static_cast<int>(parse_int(v, "MEMAREA_SIM_DEVICES", v, 0, kMaxSimDevices));
  }
  if (const char* v = env("MEMAREA_SIM_DEVICE_MEMORY")) {
    c.device_memory = parse_size(v, "MEMAREA_SIM_DEVICE_MEMORY");
    if (c.device_memory == 0) {
      bad_value("MEMAREA_SIM_DEVICE_MEMORY", v, "a device needs some memory");
    }
  }
  if (const char* v = env("MEMAREA_SIM_PEER_GROUPS")) {
    c.peer_groups = parse_peer_groups(v, c.devices);
  }
  if (const char* v = env("MEMAREA_SIM_MAX_PEERS")) {
    c.max_peers = static_cast<int>(
        parse_int(v, "MEMAREA_SIM_MAX_PEERS", v, 0, std::numeric_limits<int>::max()));
  }
  if (const char* v = env("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS")) {
    c.concurrent_managed_access = parse_switch(v, "MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS");
  }
  if (const char* v = env("MEMAREA_SIM_MANAGED_MEMORY")) {
    c.managed_memory = parse_switch(v, "MEMAREA_SIM_MANAGED_MEMORY");
  }
  if (const char* v = env("MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS")) {
    c.pageable_devices = parse_device_list(v, c.devices, "MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS");
  }
  return c;
}

}  // namespace memarea::detail
