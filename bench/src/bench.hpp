// `memarea-bench`: each case measures memarea, through its public API only, and what a user
// could do instead (the raw vendor call, the runtime's pool, a user-side cache) side by side in
// one run, and says which is faster and by how much. Cases register themselves from their own
// files (bench_*.cpp); how each one measures is fixed in docs/bench.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
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

/// One measured pair. Every figure is the median of its side's samples, beside their spread;
/// the verdict compares the two medians (docs/bench.md).
struct row {
  std::string group;     ///< e.g. "area mmap+munmap"
  std::string variant;   ///< e.g. "device 1 MiB"
  std::string unit;      ///< "us"/"ns" (lower is better) or "GB/s"/"Mop/s" (higher is better)
  double memarea = 0;    ///< memarea's figure (median of memarea_spread)
  double raw = 0;        ///< the baseline's figure (median of raw_spread), 0 when there is none
  std::string raw_name;  ///< what the raw figure is, e.g. "cuMemAlloc+cuMemFree"; or why none
  std::string target;    ///< the row's target, e.g. ">= 0.98x raw", checked in `met`
  bool met = true;       ///< whether the target is met
  std::string note;      ///< anything else
  spread memarea_spread; ///< memarea's min-median-max over its repetitions
  spread raw_spread;     ///< the baseline's min-median-max over its repetitions
};

/// A row of two sets of samples in `unit` (raw empty: no baseline; raw_name then says why).
row measured_row(std::string group, std::string variant, std::string unit,
                 const std::vector<double>& memarea, const std::vector<double>& raw,
                 std::string raw_name);

/// Bytes per microsecond as GB/s for each of the times (us) of an n-byte operation.
std::vector<double> gbps_of(std::size_t n, const std::vector<double>& times_us);

/// Whether higher figures are better in `unit` (bandwidth, rates) or lower (times).
bool higher_is_better(const std::string& unit);

/// What a case gets.
struct context {
  int repetitions = 20;      ///< timed repetitions per measurement (docs/bench.md)
  bool quick = false;        ///< smaller sizes (sim, CI smoke runs)
  std::vector<row>* rows = nullptr;
  std::chrono::steady_clock::time_point case_start{};  ///< when the running case began
  /// Whether targets are judged: they are set for GPUs, so a sim run's rows say "not judged".
  bool judge = true;
  /// Keeps r and prints it on stdout now, so that a person sees each row as it finishes; where
  /// stdout is not a terminal, also says on stderr which row is done and when, into its case
  /// (what tells where a run that stalls had got to when stdout goes to a file).
  void add(row r) const;
};

using case_fn = std::function<void(context&)>;

/// Registers a case under a name (static registrars in bench_*.cpp), with the rows it makes
/// in words (one line per group of rows), for `memarea-bench --list`.
struct registrar {
  registrar(const char* name, case_fn fn, std::vector<std::string> rows = {});
};

/// Prints the cases whose name contains `filter` and the rows each makes, measuring nothing.
int list(const std::string& filter);

/// The median (the upper middle for an even count) of t; t must not be empty.
double median(std::vector<double> t);

/// Timings of two operations taken in turns (microseconds).
struct paired_times {
  std::vector<double> a;   ///< each time of a
  std::vector<double> b;   ///< each time of b, in the same turns
  double block_ratio = 0;  ///< median over blocks of 10 turns of (a's median / b's median)
};

/// Times a and b `reps` times each after one untimed call of each, in turns (a b, b a, ...), so that a driver whose speed
/// drifts during the run (one allocation's time can move by a third from one run to another)
/// slows both alike. Its times can also be bimodal (a large allocation taking one of two quite
/// different times), which makes a median of per-turn differences jump; the ratio of medians
/// within short blocks, then the median over the blocks, stays put under both.
paired_times paired_times_us(int reps, const std::function<void()>& a,
                              const std::function<void()>& b);

/// Copies n bytes between host memory and the memory a side measured (which way: by the
/// pointers), completing before it returns: memarea::copy for memarea's side, the baseline's
/// own calls for its side, so that neither side's check rests on the other's copies.
using host_copy = std::function<void(void* dst, const void* src, std::size_t n)>;
/// memarea::copy as a host_copy.
host_copy memarea_host_copy();

/// Fills [p, p+n) with pseudo-random bytes of `seed` (byte i depends only on seed and i, so
/// the check needs no copy of them), through put, in chunks of at most 64 MiB.
void fill_random(void* p, std::size_t n, std::uint64_t seed, const host_copy& put);

/// Reads [p, p+n) back through get and compares it byte for byte with fill_random's bytes of
/// `seed`; throws memarea::error naming `what` and the first differing offset when they
/// differ. Runs after the timed repetitions, never inside them. MEMAREA_BENCH_TEST_CORRUPT=1
/// (for tests of the bench only) flips one byte of what is read back, so that the failure
/// path runs.
void expect_random(const void* p, std::size_t n, std::uint64_t seed, const host_copy& get,
                   const std::string& what);

/// Whether MEMAREA_BENCH_TEST_CORRUPT=1 asks every byte check to see one byte flipped (set only
/// by the bench's own CLI tests, to prove that a mismatch fails the run).
bool corrupt_for_test();

/// When this process is a child that a bench started (MEMAREA_BENCH_IPC_ROLE set: an exporter,
/// or a fresh process timing its first IPC call), runs that role and returns its exit status;
/// otherwise -1. main() calls it first.
int run_child_role();

/// Runs the cases whose name contains `filter`; prints each row as it finishes, then a summary
/// of the targets, and writes JSON to json_path when not empty. Returns 0; 1 when a case failed
/// (a call failed, or the bytes a copy moved differ), or when a judged target was missed and
/// strict is set.
int run(const std::string& filter, int repetitions, bool quick, const std::string& json_path,
        bool strict);

}  // namespace memarea::cli::bench
