// `memarea bench`: each case measures memarea and the raw driver call side by side in one run
// and reports the ratio. Cases register themselves from their own files (bench_*.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace memarea::cli::bench {

/// Smallest, median and largest of a set of timings (all 0: not measured).
struct spread {
  double min = 0;
  double median = 0;
  double max = 0;
};
/// The spread of t; t must not be empty.
spread spread_of(std::vector<double> t);

/// One measured pair.
struct row {
  std::string group;     ///< e.g. "area mmap+munmap"
  std::string variant;   ///< e.g. "device 1 MiB"
  std::string unit;      ///< "us" (lower is better) or "GB/s" (higher is better)
  double memarea = 0;    ///< memarea's figure (median)
  double raw = 0;        ///< the raw driver call's figure (median), 0 when there is none
  std::string raw_name;  ///< what the raw figure is, e.g. "cuMemAlloc+cuMemFree"
  std::string target;    ///< the issue's target, e.g. ">= 0.98x raw", checked in `met`
  bool met = true;       ///< whether the target is met
  std::string note;      ///< anything else
  spread memarea_spread; ///< memarea's min-median-max, when the case kept them
  spread raw_spread;     ///< the raw call's min-median-max, when the case kept them
};

/// What a case gets.
struct context {
  int repetitions = 20;      ///< timed repetitions per measurement (median taken)
  bool quick = false;        ///< smaller sizes (sim, CI smoke runs)
  std::vector<row>* rows = nullptr;
  void add(row r) const { rows->push_back(std::move(r)); }
};

using case_fn = std::function<void(context&)>;

/// Registers a case under a name (static registrars in bench_*.cpp).
struct registrar {
  registrar(const char* name, case_fn fn);
};

/// The median (the upper middle for an even count) of t; t must not be empty.
double median(std::vector<double> t);

/// The median of `reps` timings of fn, in microseconds (fn does one operation).
double median_us(int reps, const std::function<void()>& fn);

/// Timings of two operations taken in turns (microseconds).
struct paired_times {
  double a = 0;            ///< median time of a
  double b = 0;            ///< median time of b
  double block_ratio = 0;  ///< median over blocks of 10 turns of (a's median / b's median)
};

/// Times a and b `reps` times each, in turns (a b, b a, a b, ...), so that a driver whose speed
/// drifts during the run (an H200's allocation took 55 us in one run, 75-83 us in others)
/// slows both alike. Its times can also be bimodal (64 MiB: 84 or 132 us), which makes a median
/// of per-turn differences jump; the ratio of medians within short blocks, then the median
/// over the blocks, stays put under both.
paired_times paired_median_us(int reps, const std::function<void()>& a,
                              const std::function<void()>& b);

/// When this process is a child that a bench started (MEMAREA_BENCH_IPC_ROLE set: an exporter,
/// or a fresh process timing its first IPC call), runs that role and returns its exit status;
/// otherwise -1. main() calls it first.
int run_child_role();

/// Runs the cases whose name contains `filter`; prints a table and writes JSON to json_path
/// when not empty. Returns 0, or 1 when a target was missed and strict is set.
int run(const std::string& filter, int repetitions, bool quick, const std::string& json_path,
        bool strict);

}  // namespace memarea::cli::bench
