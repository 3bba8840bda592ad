#pragma once
// The slice of NCCL that the ring uses, declared here so the build needs no nccl.h (checked against it
// by tests/unit/cp/test_nccl_abi.cc where one is installed). libnccl is opened at run time by
// nccl_api(), like libcuda by jit::driver(): a machine without NCCL builds and runs everything else.
#include <cstddef>
#include <string>

#include "jit/driver_api.h"

namespace flexattn::cp {

using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;
using cudaStream_t = jit::CUstream;  // nccl.h: struct CUstream_st*, the driver stream

constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInProgress = 7;

// ncclDataType_t values. The ring moves raw bytes (ncclUint8), the rest document the enum's layout.
enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

constexpr size_t kNcclUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

// Every pointer is non-null in a loaded NcclApi.
struct NcclApi {
  std::string path;  // the file actually loaded
  ncclResult_t (*ncclGetVersion)(int*);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclGroupStart)();
  ncclResult_t (*ncclGroupEnd)();
  ncclResult_t (*ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
};

// The library named by FLEXATTN_LIBNCCL (default libnccl.so.2), opened and bound once per path.
// Throws flexattn::Error "NCCL not found (<path>): <dlerror>; context parallelism over NCCL needs
// libnccl ..." or "NCCL library <path> lacks entry points flexattn needs (<names>) ...".
const NcclApi& nccl_api();
// Like nccl_api() but never throws: nullptr and *error set when the library is unusable.
const NcclApi* try_nccl_api(std::string* error);

// "ncclInvalidUsage (invalid usage)": the enum name and the library's own text when it is loaded.
std::string nccl_error_text(ncclResult_t r);
// Throws flexattn::Error "<what> failed: <nccl_error_text>" unless r is ncclSuccess.
void nccl_check(ncclResult_t r, const std::string& what);

}  // namespace flexattn::cp
