// Our hand-written driver declarations (jit/driver_api.h) against the toolkit's cuda.h. Built only
// where a toolkit is installed; the library itself never includes cuda.h.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "jit/driver_api.h"

namespace j = flexattn::jit;

#define SAME_VALUE(name) static_assert(int(j::name) == int(::name), #name)
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
SAME_VALUE(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
SAME_VALUE(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
SAME_VALUE(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
SAME_VALUE(CU_FUNC_ATTRIBUTE_NUM_REGS);
SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
SAME_VALUE(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
SAME_VALUE(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
SAME_VALUE(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
SAME_VALUE(CUDA_SUCCESS);
SAME_VALUE(CUDA_ERROR_NOT_READY);
#undef SAME_VALUE

#define SAME_LAYOUT(ours, theirs, field) \
  static_assert(offsetof(j::ours, field) == offsetof(::theirs, field), #ours "." #field)
static_assert(sizeof(j::CUlaunchConfig) == sizeof(::CUlaunchConfig));
SAME_LAYOUT(CUlaunchConfig, CUlaunchConfig, sharedMemBytes);
SAME_LAYOUT(CUlaunchConfig, CUlaunchConfig, hStream);
SAME_LAYOUT(CUlaunchConfig, CUlaunchConfig, attrs);
SAME_LAYOUT(CUlaunchConfig, CUlaunchConfig, numAttrs);
static_assert(sizeof(j::CUlaunchAttribute) == sizeof(::CUlaunchAttribute));
SAME_LAYOUT(CUlaunchAttribute, CUlaunchAttribute, value);
static_assert(sizeof(j::CUlaunchAttributeValue) == sizeof(::CUlaunchAttributeValue));
static_assert(sizeof(j::CUtensorMap) == sizeof(::CUtensorMap));
static_assert(alignof(j::CUtensorMap) == alignof(::CUtensorMap));
static_assert(sizeof(j::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(j::CUdevice) == sizeof(::CUdevice));
#undef SAME_LAYOUT

TEST(DriverAbi, MatchesCudaH) { SUCCEED() << "checked at compile time against CUDA " << CUDA_VERSION; }
