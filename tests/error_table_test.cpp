// The one error table (src/driver/error_table.hpp) against the vendors' headers and against
// itself: every code the installed cuda.h and hip_runtime_api.h define is covered; both backends'
// lookups answer what the table says; CUDA and HIP agree on every meaning they share, including
// codes the table might have left unpaired though their names say they are the same error.
// Nothing here restates the table: the headers and the table's own rows are the inputs.
#include "driver/error_table.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifdef MEMAREA_HAVE_CUDA
#include "driver/cuda/cuda_errors.hpp"
#endif
#ifdef MEMAREA_HAVE_HIP
#include "driver/hip/hip_errors.hpp"
#endif

namespace memarea::detail {
namespace {

/// The enumerators of the enum that follows `marker` in the header at `path`, in order, with
/// their values (explicit, another enumerator's, or the previous one's plus one). Empty when the
/// file or the enum is not there.
std::vector<std::pair<std::string, int>> enumerators(const std::string& path,
                                                     const std::string& marker) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  const auto at = text.find(marker);
  if (at == std::string::npos) return {};
  const auto open = text.find('{', at);
  const auto close = text.find('}', open);
  std::string body = text.substr(open + 1, close - open - 1);
  std::string clean;  // without comments
  for (size_t i = 0; i < body.size(); ++i) {
    if (body.compare(i, 2, "//") == 0) {
      i = body.find('\n', i);
      if (i == std::string::npos) break;
    } else if (body.compare(i, 2, "/*") == 0) {
      i = body.find("*/", i) + 1;
    } else {
      clean += body[i];
    }
  }
  std::vector<std::pair<std::string, int>> out;
  std::map<std::string, int> seen;
  int next = 0;
  std::stringstream items(clean);
  for (std::string item; std::getline(items, item, ',');) {
    std::string name, value;
    const auto eq = item.find('=');
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\r\n"));
      s.erase(s.find_last_not_of(" \t\r\n") + 1);
      return s;
    };
    name = trim(item.substr(0, eq));
    if (name.empty()) continue;
    if (eq != std::string::npos) {
      value = trim(item.substr(eq + 1));
      next = seen.count(value) ? seen[value] : std::stoi(value, nullptr, 0);
    }
    seen[name] = next;
    out.emplace_back(name, next);
    ++next;
  }
  return out;
}

/// "invalidvalue" from "CUDA_ERROR_INVALID_VALUE" and from "hipErrorInvalidValue": the stem that
/// says two vendors' codes name the same error.
std::string stem(std::string name) {
  for (const char* prefix : {"CUDA_ERROR_", "CUDA_", "hipError", "hip"}) {
    if (name.rfind(prefix, 0) == 0) {
      name = name.substr(std::strlen(prefix));
      break;
    }
  }
  std::string out;
  for (char c : name) {
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool has_cuda(const vendor_error_row& r) { return r.cuda_code != kNoVendorCode; }
bool has_hip(const vendor_error_row& r) { return r.hip_code != kNoVendorCode; }

TEST(ErrorTable, EveryRowNamesAVendorAndOnlySuccessIsSuccess) {
  for (const auto& r : kVendorErrors) {
    SCOPED_TRACE(std::string(r.cuda_name) + " " + r.hip_name);
    EXPECT_TRUE(has_cuda(r) || has_hip(r));
    EXPECT_EQ(r.status == errc::success, r.cuda_code == 0 || r.hip_code == 0);
    EXPECT_EQ(has_cuda(r), *r.cuda_name != '\0');
    EXPECT_EQ(has_hip(r), *r.hip_name != '\0');
  }
}

// Two codes whose names say they are the same error must be one row (one meaning), so that no
// pair can escape the agreement below by being listed as two single-vendor rows.
TEST(ErrorTable, CodesWithTheSameNameAreOneMeaning) {
  for (const auto& c : kVendorErrors) {
    if (!has_cuda(c)) continue;
    for (const auto& h : kVendorErrors) {
      if (!has_hip(h) || stem(c.cuda_name) != stem(h.hip_name)) continue;
      EXPECT_EQ(&c, &h) << c.cuda_name << " and " << h.hip_name
                        << " name the same error but are different rows";
    }
  }
}

#if defined(MEMAREA_HAVE_CUDA) && defined(MEMAREA_HAVE_HIP)
// The two backends, as built, against each other: every meaning both vendors have gets one
// status from both, and the status is the table's.
TEST(ErrorTable, CudaAndHipAgreeOnEveryMeaningTheyShare) {
  int pairs = 0;
  for (const auto& r : kVendorErrors) {
    if (!has_cuda(r) || !has_hip(r)) continue;
    ++pairs;
    SCOPED_TRACE(std::string(r.cuda_name) + " / " + r.hip_name);
    EXPECT_EQ(map_cuda_error(r.cuda_code), map_hip_error(r.hip_code));
    EXPECT_EQ(map_cuda_error(r.cuda_code), r.status);
  }
  EXPECT_GT(pairs, 60);  // most of HIP's codes are CUDA's
}
#endif

#ifdef MEMAREA_HAVE_CUDA
TEST(CudaErrors, TheLookupIsTheTable) {
  for (const auto& r : kVendorErrors) {
    if (!has_cuda(r)) continue;
    EXPECT_EQ(map_cuda_error(r.cuda_code), r.status) << r.cuda_name;
    EXPECT_STREQ(cuda_error_name(r.cuda_code), r.cuda_name);
  }
}

TEST(CudaErrors, OnlyZeroIsSuccessAndUnlistedCodesAreUnknown) {
  std::map<int, const char*> listed;
  for (const auto& r : kVendorErrors)
    if (has_cuda(r)) listed[r.cuda_code] = r.cuda_name;
  for (int v = -1000; v <= 5000; ++v) {
    if (v != 0) {
      ASSERT_NE(map_cuda_error(v), errc::success) << v;
    }
    if (!listed.count(v)) {
      ASSERT_EQ(map_cuda_error(v), errc::unknown) << v;
      ASSERT_STREQ(cuda_error_name(v), "CUDA_ERROR_UNRECOGNIZED") << v;
    }
  }
  for (int v : {INT_MAX, INT_MIN}) EXPECT_EQ(map_cuda_error(v), errc::unknown);
}

#ifdef MEMAREA_CUDA_H
// Every CUresult of the cuda.h this build used has its row, by name and value (the build also
// fails on a missing one: cuda_errors.cpp switches over CUresult with no default).
TEST(CudaErrors, EveryCodeOfTheHeaderIsInTheTable) {
  if (!std::ifstream(MEMAREA_CUDA_H))
    GTEST_SKIP() << MEMAREA_CUDA_H << " is not on this machine (checked where built)";
  const auto codes = enumerators(MEMAREA_CUDA_H, "cudaError_enum {");
  ASSERT_GT(codes.size(), 90u) << "cannot read the CUresult enum of " << MEMAREA_CUDA_H;
  for (const auto& [name, value] : codes) {
    EXPECT_STREQ(cuda_error_name(value), name.c_str()) << value;
  }
}
#endif
#endif  // MEMAREA_HAVE_CUDA

#ifdef MEMAREA_HAVE_HIP
TEST(HipErrors, TheLookupIsTheTable) {
  for (const auto& r : kVendorErrors) {
    if (!has_hip(r)) continue;
    EXPECT_EQ(map_hip_error(r.hip_code), r.status) << r.hip_name;
    EXPECT_STREQ(hip_error_name(r.hip_code), r.hip_name);
  }
}

TEST(HipErrors, OnlyZeroIsSuccessAndUnlistedCodesAreUnknown) {
  std::map<int, const char*> listed;
  for (const auto& r : kVendorErrors)
    if (has_hip(r)) listed[r.hip_code] = r.hip_name;
  for (int v = -100; v <= 4100; ++v) {
    if (v != 0) {
      ASSERT_NE(map_hip_error(v), errc::success) << v;
    }
    if (!listed.count(v)) {
      ASSERT_EQ(map_hip_error(v), errc::unknown) << v;
      ASSERT_STREQ(hip_error_name(v), "hipErrorUnrecognized") << v;
    }
  }
  for (int v : {INT_MAX, INT_MIN}) EXPECT_EQ(map_hip_error(v), errc::unknown);
}

#ifdef MEMAREA_HIP_RUNTIME_API_H
// Every hipError_t of the installed headers has its row, under its name or one of the table's
// aliases for that value (deprecated spellings; ROCm 5's hipErrorTbd marker at 1054).
TEST(HipErrors, EveryCodeOfTheHeaderIsInTheTable) {
  // The binary may run on another machine than the one it was built on (the GPU suite's has no
  // HIP headers): there the headers were checked where it was built.
  if (!std::ifstream(MEMAREA_HIP_RUNTIME_API_H))
    GTEST_SKIP() << MEMAREA_HIP_RUNTIME_API_H << " is not on this machine (checked where built)";
  const auto codes = enumerators(MEMAREA_HIP_RUNTIME_API_H, "hipError_t {");
  ASSERT_GT(codes.size(), 60u) << "cannot read the hipError_t enum of "
                               << MEMAREA_HIP_RUNTIME_API_H;
  for (const auto& [name, value] : codes) {
    bool alias = false;
    for (const auto& a : kHipErrorAliases)
      alias = alias || (a.hip_code == value && name == a.hip_name);
    if (alias) {
      EXPECT_NE(std::string(hip_error_name(value)), "hipErrorUnrecognized") << name;
      continue;
    }
    EXPECT_STREQ(hip_error_name(value), name.c_str()) << value;
  }
}
#endif
#endif  // MEMAREA_HAVE_HIP

}  // namespace
}  // namespace memarea::detail
