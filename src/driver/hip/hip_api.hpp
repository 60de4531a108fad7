// The HIP runtime headers, for declarations only: every function is reached through dlsym, never
// linked. Wrapped so that a newer header's extensions cannot break -Wpedantic -Werror builds.
#pragma once

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <hip/hip_runtime_api.h>
#pragma GCC diagnostic pop
