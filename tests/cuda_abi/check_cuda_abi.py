"""Every CUDA entry point memarea loads (src/driver/cuda/cuda_api.hpp, X(name, pfn, request)) is
called through the ABI the driver hands back for that request: cuGetProcAddress gives the newest
version of the name that is not newer than the request, so `pfn` must be the newest
PFN_cu<name>_v<N> of cudaTypedefs.h with N <= request. A pair that names an older ABI calls the
function with the wrong arguments (cuCtxCreate asked as of 12.0 is _v3, with execution-affinity
parameters before the flags). Usage: check_cuda_abi.py CUDA_API_HPP CUDA_TYPEDEFS_H"""

import re
import sys


def pairs(api_text):
    for m in re.finditer(r"\bX\((\w+),\s*(\d+),\s*(\d+)\)", api_text):
        yield m.group(1), int(m.group(2)), int(m.group(3))


def versions(typedefs_text):
    out = {}
    for m in re.finditer(r"\bPFN_cu(\w+?)_v(\d+)\)", typedefs_text):
        out.setdefault(m.group(1), set()).add(int(m.group(2)))
    return out


def main(api_path, typedefs_path):
    with open(api_path) as f:
        api = f.read()
    with open(typedefs_path) as f:
        known = versions(f.read())
    problems, checked = [], 0
    for name, pfn, request in pairs(api):
        have = sorted(v for v in known.get(name, ()) if v <= request)
        if not have:
            problems.append(f"cu{name}: no PFN_cu{name}_v<N> with N <= {request} in cudaTypedefs.h")
            continue
        checked += 1
        if have[-1] != pfn:
            problems.append(f"cu{name} asked as of {request} is the v{have[-1]} ABI, "
                            f"but cuda_api.hpp calls it as v{pfn}")
    for p in problems:
        print("check_cuda_abi:", p)
    print(f"check_cuda_abi: {checked} entry points checked, {len(problems)} problems")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
