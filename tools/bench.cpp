#include "tools/bench.hpp"
#include "tools/output_file.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <map>

namespace memarea::cli::bench {
namespace {
std::map<std::string, case_fn>& cases() {
  static std::map<std::string, case_fn> all;
  return all;
}
}  // namespace

registrar::registrar(const char* name, case_fn fn) { cases()[name] = std::move(fn); }

double median(std::vector<double> t) {
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

spread spread_of(std::vector<double> t) {
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  return {*lo, median(t), *hi};
}

double median_us(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(reps));
  fn();  // warm-up
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    fn();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  return median(std::move(t));
}

paired_times paired_median_us(int reps, const std::function<void()>& a,
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
  return {median(ta), median(tb), ratios.empty() ? 0.0 : median(ratios)};
}

int run(const std::string& filter, int repetitions, bool quick, const std::string& json_path,
        bool strict) {
  std::vector<row> rows;
  context ctx{repetitions, quick, &rows};
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
  for (auto& [name, fn] : cases()) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    std::cerr << "bench: " << name << "...\n";
    try {
      fn(ctx);
    } catch (const memarea::error& e) {
      failed.push_back(name + ": " + e.what());
      std::cerr << "bench: " << name << " failed: " << e.what() << "\n";
    }
  }
  // Which way a row leans is said in words ("N.NNx faster"), never as a bare ratio: time is
  // better lower and bandwidth higher, so one ratio column read both ways (issue 20). The JSON
  // keeps the ratio (memarea / raw) beside the verdict.
  std::cout << fmt::format("{:<28} {:<30} {:>26} {:>26} {:<16} {:<24} {}\n", "benchmark",
                           "variant", "memarea (min-median-max)", "raw (min-median-max)",
                           "memarea is", "target", "raw call");
  // "min-median-max unit" where the case kept the spread, else the median alone.
  auto figure = [](double median, const spread& s, const std::string& unit) {
    if (s.max > 0) return fmt::format("{:.3f}-{:.3f}-{:.3f} {}", s.min, s.median, s.max, unit);
    return fmt::format("{:.3f} {}", median, unit);
  };
  auto spread_json = [](const spread& s) {
    return s.max > 0 ? nlohmann::json{{"min", s.min}, {"median", s.median}, {"max", s.max}}
                     : nlohmann::json(nullptr);
  };
  bool all_met = true;
  nlohmann::json j = nlohmann::json::array();
  for (auto& r : rows) {
    const double ratio = r.raw > 0 ? r.memarea / r.raw : 0;
    // Which way is better: time is better lower, bandwidth higher.
    const bool higher_better = r.unit == "GB/s" || r.unit == "Mop/s";
    std::string verdict = "-";
    if (ratio > 0 && r.memarea > 0) {
      const double speedup = higher_better ? ratio : 1 / ratio;
      verdict = speedup >= 1 ? fmt::format("{:.2f}x faster", speedup)
                             : fmt::format("{:.2f}x slower", 1 / speedup);
    }
    all_met &= r.met;
    std::cout << fmt::format("{:<28} {:<30} {:>26} {:>26} {:<16} {:<24} {}{}\n", r.group,
                             r.variant, figure(r.memarea, r.memarea_spread, r.unit),
                             r.raw > 0 ? figure(r.raw, r.raw_spread, r.unit) : "-", verdict,
                             r.target.empty() ? "-" : r.target + (r.met ? " ok" : " MISSED"),
                             r.raw_name, r.note.empty() ? "" : "  (" + r.note + ")");
    j.push_back({{"group", r.group}, {"variant", r.variant}, {"unit", r.unit},
                 {"memarea", r.memarea}, {"raw", r.raw}, {"ratio", ratio},
                 {"memarea_spread", spread_json(r.memarea_spread)},
                 {"raw_spread", spread_json(r.raw_spread)}, {"verdict", verdict},
                 {"raw_call", r.raw_name}, {"target", r.target}, {"met", r.met},
                 {"note", r.note}});
  }
  for (auto& f : failed) std::cout << "FAILED " << f << "\n";
  if (!json_path.empty()) {
    nlohmann::json doc{{"backend", backend_name()}, {"devices", device_count()}, {"rows", j},
                       {"failed", failed}};
    write_file(json_path, doc.dump(2) + "\n", "bench --json");
  }
  if (!failed.empty()) return 1;
  return (strict && !all_met) ? 1 : 0;
}

}  // namespace memarea::cli::bench
