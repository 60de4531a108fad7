# ctest hip_shim_info (label hip-shim): `memarea info --json` with MEMAREA_BACKEND=hip and the shim
# first on the library path. Passes when the HIP backend loaded the shim (all of its symbols
# resolved, its version is the NVIDIA platform's) and either has devices (a GPU machine) or has
# none for a reason the runtime gave: hipGetDeviceCount's error, never "not found" or a missing
# symbol.
#   cmake -DCLI=<memarea> -DSHIM_DIR=<dir of libamdhip64.so.5> -P check_info.cmake
foreach(var CLI SHIM_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_info.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${SHIM_DIR}/libamdhip64.so.5")
  message(FATAL_ERROR "no ${SHIM_DIR}/libamdhip64.so.5: the shim was not built")
endif()

set(library_path "${SHIM_DIR}")
if(DEFINED ENV{LD_LIBRARY_PATH} AND NOT "$ENV{LD_LIBRARY_PATH}" STREQUAL "")
  string(APPEND library_path ":$ENV{LD_LIBRARY_PATH}")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env MEMAREA_BACKEND=hip "LD_LIBRARY_PATH=${library_path}"
          "${CLI}" info --json
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "memarea info --json exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()

string(JSON active GET "${out}" backend)
if(NOT active STREQUAL "hip")
  message(FATAL_ERROR "active backend is '${active}', not hip (MEMAREA_BACKEND=hip):\n${out}")
endif()

string(JSON count LENGTH "${out}" backends)
math(EXPR last "${count} - 1")
set(found OFF)
foreach(i RANGE ${last})
  string(JSON name GET "${out}" backends ${i} name)
  if(name STREQUAL "hip")
    set(found ON)
    string(JSON devices GET "${out}" backends ${i} devices)
    string(JSON reason GET "${out}" backends ${i} reason)
    string(JSON version GET "${out}" backends ${i} version)
  endif()
endforeach()
if(NOT found)
  message(FATAL_ERROR "no hip backend in the report:\n${out}")
endif()

# Loaded, and loaded the shim: the version names the NVIDIA platform and the file.
if(NOT version MATCHES "HIP's NVIDIA platform")
  message(FATAL_ERROR "the hip backend did not load HIP's NVIDIA platform; version '${version}', "
                      "reason '${reason}'")
endif()
if(NOT version MATCHES "${SHIM_DIR}/libamdhip64.so.5")
  message(FATAL_ERROR "the hip backend loaded another library: '${version}'")
endif()

if(devices GREATER 0)
  if(NOT reason STREQUAL "")
    message(FATAL_ERROR "${devices} devices but a reason: '${reason}'")
  endif()
  message(STATUS "hip backend over the shim: ${devices} devices (${version})")
  return()
endif()
if(reason MATCHES "not found" OR reason MATCHES "missing symbol")
  message(FATAL_ERROR "the shim did not load as a HIP runtime: '${reason}'")
endif()
if(NOT reason MATCHES "^hipGetDeviceCount: hipError")
  message(FATAL_ERROR "zero devices without the runtime's reason: '${reason}'")
endif()
message(STATUS "hip backend over the shim: 0 devices because ${reason} (${version})")
