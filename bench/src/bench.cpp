#include "bench/src/bench.hpp"
#include "bench/src/figures.hpp"
#include "tools/output_file.hpp"

#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>

namespace memarea::cli::bench {
namespace {
struct registered {
  case_fn fn;
  std::vector<std::string> rows;
};
std::map<std::string, registered>& cases() {
  static std::map<std::string, registered> all;
  return all;
}
}  // namespace

registrar::registrar(const char* name, case_fn fn, std::vector<std::string> rows) {
  cases()[name] = {std::move(fn), std::move(rows)};
}

double median(std::vector<double> t) {
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

spread spread_of(std::vector<double> t) {
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  return {*lo, median(t), *hi};
}

paired_times paired_times_us(int reps, const std::function<void()>& a,
                              const std::function<void()>& b) {
  auto time_us = [](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  a();  // warm-up
  b();
  std::vector<double> ta, tb;
  ta.reserve(static_cast<std::size_t>(reps));
  tb.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    // Swap which goes first every turn: the second of a pair may find caches the first warmed.
    if (i % 2 == 0) {
      ta.push_back(time_us(a));
      tb.push_back(time_us(b));
    } else {
      tb.push_back(time_us(b));
      ta.push_back(time_us(a));
    }
  }
  // Blocks of 10 turns (at least 3 blocks): each block's medians see one state of the driver.
  const std::size_t n = ta.size(), per = std::max<std::size_t>(1, std::min<std::size_t>(10, n / 3));
  std::vector<double> ratios;
  for (std::size_t from = 0; from + per <= n; from += per) {
    const auto ma = median({ta.begin() + static_cast<long>(from),
                            ta.begin() + static_cast<long>(from + per)});
    const auto mb = median({tb.begin() + static_cast<long>(from),
                            tb.begin() + static_cast<long>(from + per)});
    if (mb > 0) ratios.push_back(ma / mb);
  }
  return {std::move(ta), std::move(tb), ratios.empty() ? 0.0 : median(ratios)};
}

bool higher_is_better(const std::string& unit) { return unit == "GB/s" || unit == "Mop/s"; }

row measured_row(std::string group, std::string variant, std::string unit,
                 const std::vector<double>& memarea, const std::vector<double>& raw,
                 std::string raw_name) {
  row r;
  r.group = std::move(group);
  r.variant = std::move(variant);
  r.unit = std::move(unit);
  r.memarea_spread = spread_of(memarea);
  r.memarea = r.memarea_spread.median;
  if (!raw.empty()) {
    r.raw_spread = spread_of(raw);
    r.raw = r.raw_spread.median;
  }
  r.raw_name = std::move(raw_name);
  return r;
}

std::vector<double> gbps_of(std::size_t n, const std::vector<double>& times_us) {
  std::vector<double> g;
  g.reserve(times_us.size());
  for (double us : times_us) g.push_back(us > 0 ? static_cast<double>(n) / us / 1e3 : 0);
  return g;
}

// --- byte checks ----------------------------------------------------------------------------

namespace {
constexpr std::size_t kCheckChunk = std::size_t{64} << 20;

/// Byte i of fill_random's stream for seed: splitmix64 of the 8-byte word's index, so that any
/// chunk can be made on its own and no byte pattern repeats within a copy.
void random_bytes(std::uint64_t seed, std::size_t from, std::size_t n, unsigned char* out) {
  for (std::size_t i = 0; i < n;) {
    const std::size_t word = (from + i) / 8;
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + word + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    unsigned char w[8];
    std::memcpy(w, &z, 8);
    for (std::size_t k = (from + i) % 8; k < 8 && i < n; ++k, ++i) out[i] = w[k];
  }
}
}  // namespace

host_copy memarea_host_copy() {
  return [](void* dst, const void* src, std::size_t n) { copy(dst, src, n); };
}

void fill_random(void* p, std::size_t n, std::uint64_t seed, const host_copy& put) {
  std::vector<unsigned char> chunk(std::min(n, kCheckChunk));
  for (std::size_t at = 0; at < n; at += chunk.size()) {
    const std::size_t m = std::min(chunk.size(), n - at);
    random_bytes(seed, at, m, chunk.data());
    put(static_cast<unsigned char*>(p) + at, chunk.data(), m);
  }
}

bool corrupt_for_test() {
  const char* corrupt = std::getenv("MEMAREA_BENCH_TEST_CORRUPT");
  return corrupt && std::string(corrupt) == "1";
}

void expect_random(const void* p, std::size_t n, std::uint64_t seed, const host_copy& get,
                   const std::string& what) {
  const bool flip = corrupt_for_test();
  std::vector<unsigned char> want(std::min(n, kCheckChunk)), got(want.size());
  for (std::size_t at = 0; at < n; at += want.size()) {
    const std::size_t m = std::min(want.size(), n - at);
    random_bytes(seed, at, m, want.data());
    get(got.data(), static_cast<const unsigned char*>(p) + at, m);
    if (flip && at == 0) got[m / 2] ^= 0xff;
    if (std::memcmp(got.data(), want.data(), m) != 0) {
      std::size_t k = 0;
      while (got[k] == want[k]) ++k;
      throw error(errc::unknown,
                  fmt::format("{}: the bytes moved differ from the source's at offset {} of {} "
                              "(read {:#04x}, expected {:#04x})",
                              what, at + k, n, got[k], want[k]));
    }
  }
}

// --- text output ------------------------------------------------------------------------------

namespace {
constexpr std::size_t kVariantWidth = 50, kFigureWidth = 27, kVerdictWidth = 13;
constexpr std::size_t kLineWidth = 160;  // note lines wrap here

/// median (min-max) in a unit that fits the median: times in ns, µs, ms or s; rates as they are.
std::string figure(const spread& s, const std::string& unit) {
  double scale = 1;
  std::string shown = unit;
  if (unit == "us" || unit == "ns") {
    const double ns_per = unit == "us" ? 1e3 : 1;
    const double ns = s.median * ns_per;
    const auto pick = [&](double per, const char* name) {
      scale = ns_per / per;
      shown = name;
    };
    if (ns < 999.5) pick(1, "ns");
    else if (ns < 999.5e3) pick(1e3, "µs");
    else if (ns < 999.5e6) pick(1e6, "ms");
    else pick(1e9, "s");
  }
  return fmt::format("{} {} ({}-{})", three_significant(s.median * scale), shown,
                     three_significant(s.min * scale), three_significant(s.max * scale));
}

/// The factor and direction of memarea against the baseline (factor 0: no baseline).
struct comparison {
  double factor = 0;
  std::string direction;
};
comparison compare(const row& r) {
  if (!(r.raw > 0 && r.memarea > 0)) return {};
  // memarea's speed over the baseline's, whichever way the unit leans.
  const double speedup = higher_is_better(r.unit) ? r.memarea / r.raw : r.raw / r.memarea;
  return {speedup >= 1 ? speedup : 1 / speedup, speedup >= 1 ? "faster" : "slower"};
}

/// A row that states a target to meet ("reference" rows only show a figure).
bool has_target(const row& r) { return !r.target.empty() && r.target != "reference"; }

std::string status_of(const row& r, bool judge, const std::string& backend) {
  if (!has_target(r)) return "-";
  if (!judge) return "not judged on " + backend;
  return r.met ? "met" : "MISSED";
}

/// text wrapped at kLineWidth on spaces, each line starting with indent.
std::string wrapped(const std::string& text, const std::string& indent) {
  std::string out, line = indent;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > kLineWidth) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + word;
    at = end + 1;
  }
  return out + line + "\n";
}

std::string last_group;  // the group whose heading was printed last
std::string run_backend;

void print_row(const row& r, bool judge) {
  std::string out;
  if (r.group != last_group) {
    out += fmt::format("{}{}\n", last_group.empty() ? "" : "\n", r.group);
    last_group = r.group;
  }
  std::string variant = r.variant;
  if (variant.size() > kVariantWidth) {  // on its own line, so that the columns stay aligned
    out += "  " + variant + "\n";
    variant.clear();
  }
  const comparison c = compare(r);
  out += fmt::format("  {:<{}} {:>{}} {:>{}} {:>{}}  {}\n", variant, kVariantWidth,
                     figure(r.memarea_spread, r.unit), kFigureWidth,
                     r.raw > 0 ? figure(r.raw_spread, r.unit) : "-", kFigureWidth,
                     c.factor > 0
                         ? fmt::format("{}x {}", three_significant(c.factor), c.direction)
                         : "-",
                     kVerdictWidth, status_of(r, judge, run_backend));
  std::string note;
  if (has_target(r)) note += "target " + r.target + "; ";
  if (!r.raw_name.empty()) note += "raw: " + r.raw_name + "; ";
  note += r.note;
  while (note.ends_with(' ') || note.ends_with(';')) note.pop_back();
  if (!note.empty()) out += wrapped(note, "      ");
  std::cout << out << std::flush;
}

void print_header() {
  std::cout << fmt::format("  {:<{}} {:>{}} {:>{}} {:>{}}  {}\n\n", "variant", kVariantWidth,
                           "memarea (min-max)", kFigureWidth, "raw (min-max)", kFigureWidth,
                           "memarea is", kVerdictWidth, "target");
}
}  // namespace

void context::add(row r) const {
  if (!isatty(STDOUT_FILENO)) {
    const std::chrono::duration<double> into = std::chrono::steady_clock::now() - case_start;
    std::cerr << fmt::format("bench:   {}, {}: done at {:.1f} s\n", r.group, r.variant,
                             into.count());
  }
  print_row(r, judge);
  rows->push_back(std::move(r));
}

int list(const std::string& filter) {
  bool any = false;
  for (auto& [name, c] : cases()) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    any = true;
    std::cout << name << "\n";
    for (auto& line : c.rows) std::cout << wrapped(line, "  ");
  }
  if (!any) throw memarea::error(memarea::errc::invalid_value,
                                 fmt::format("bench: no case matches --filter \"{}\"", filter));
  return 0;
}

int run(const std::string& filter, int repetitions, bool quick, const std::string& json_path,
        bool strict) {
  std::vector<row> rows;
  run_backend = backend_name();
  // Targets are set for GPUs: sim's times are those of host memory and a host thread.
  context ctx{repetitions, quick, &rows, {}, run_backend != "sim"};
  std::vector<std::string> failed;
  // A result file that cannot be written fails now, not after minutes of measuring.
  if (!json_path.empty()) require_writable(json_path, "bench --json");
  // A filter that names no case is a typo, not an empty result.
  if (std::none_of(cases().begin(), cases().end(),
                   [&](const auto& c) { return c.first.find(filter) != std::string::npos; })) {
    std::string names;
    for (auto& c : cases()) names += (names.empty() ? "" : ", ") + c.first;
    throw memarea::error(memarea::errc::invalid_value,
                         fmt::format("bench: no case matches --filter \"{}\" (cases: {})",
                                     filter, names));
  }
  // Which way a row leans is said in words ("N.NNx faster"), never as a bare ratio: time is
  // better lower and bandwidth higher, so one ratio column would read both ways.
  // The factor is always >= 1 and compares the two medians (docs/bench.md).
  print_header();
  for (auto& [name, c] : cases()) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    std::cerr << "bench: " << name << "...\n";
    ctx.case_start = std::chrono::steady_clock::now();
    try {
      c.fn(ctx);
    } catch (const memarea::error& e) {
      failed.push_back(name + ": " + e.what());
      std::cerr << "bench: " << name << " failed: " << e.what() << "\n";
    }
  }
  auto spread_json = [](const spread& s) {
    return nlohmann::json{{"min", s.min}, {"median", s.median}, {"max", s.max}};
  };
  std::size_t met = 0, unjudged = 0, untargeted = 0;
  std::vector<const row*> missed;
  nlohmann::json j = nlohmann::json::array();
  for (auto& r : rows) {
    const comparison c = compare(r);
    const bool has_raw = c.factor > 0;
    const std::string verdict = has_raw ? fmt::format("{:.2f}x {}", c.factor, c.direction) : "-";
    if (!has_target(r)) ++untargeted;
    else if (!ctx.judge) ++unjudged;
    else if (r.met) ++met;
    else missed.push_back(&r);
    j.push_back({{"group", r.group},
                 {"variant", r.variant},
                 {"unit", r.unit},
                 {"higher_is_better", higher_is_better(r.unit)},
                 {"memarea", r.memarea},
                 {"raw", r.raw},
                 {"memarea_spread", spread_json(r.memarea_spread)},
                 {"raw_spread", r.raw > 0 ? spread_json(r.raw_spread) : nlohmann::json(nullptr)},
                 {"direction", has_raw ? nlohmann::json(c.direction) : nlohmann::json(nullptr)},
                 {"factor", has_raw ? nlohmann::json(c.factor) : nlohmann::json(nullptr)},
                 {"verdict", verdict},
                 {"raw_call", r.raw_name},
                 {"target", r.target},
                 {"met", r.met},
                 {"judged", ctx.judge && has_target(r)},
                 {"note", r.note}});
  }
  std::cout << fmt::format("\ntargets: {} met, {} missed, {} not judged{} ({} rows, {} without a "
                           "target)\n",
                           met, missed.size(), unjudged,
                           ctx.judge ? "" : " (sim: targets are set for GPUs)", rows.size(),
                           untargeted);
  for (const row* r : missed)
    std::cout << fmt::format("MISSED {}, {}: target {}, memarea {} vs raw {}\n", r->group,
                             r->variant, r->target, figure(r->memarea_spread, r->unit),
                             r->raw > 0 ? figure(r->raw_spread, r->unit) : "-");
  for (auto& f : failed) std::cout << "FAILED " << f << "\n";
  if (!json_path.empty()) {
    nlohmann::json doc{{"backend", backend_name()}, {"devices", device_count()}, {"rows", j},
                       {"failed", failed}};
    write_file(json_path, doc.dump(2) + "\n", "bench --json");
  }
  if (!failed.empty()) return 1;
  return (strict && !missed.empty()) ? 1 : 0;
}

}  // namespace memarea::cli::bench
