// Our NCCL declarations (cp/nccl_api.h) against the installed nccl.h. Built only where one exists; the
// library itself never includes nccl.h.
#include <gtest/gtest.h>
#include <nccl.h>

#include <type_traits>

#include "cp/nccl_api.h"

namespace c = flexattn::cp;

#define SAME_VALUE(name) static_assert(int(c::name) == int(::name), #name)
SAME_VALUE(ncclSuccess);
SAME_VALUE(ncclInProgress);
SAME_VALUE(ncclInt8);
SAME_VALUE(ncclUint8);
SAME_VALUE(ncclInt32);
SAME_VALUE(ncclFloat16);
SAME_VALUE(ncclFloat32);
SAME_VALUE(ncclFloat64);
SAME_VALUE(ncclBfloat16);
#undef SAME_VALUE
static_assert(c::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(c::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(sizeof(c::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(sizeof(c::ncclDataType_t) == sizeof(::ncclDataType_t));
static_assert(sizeof(c::ncclComm_t) == sizeof(::ncclComm_t));
static_assert(sizeof(c::cudaStream_t) == sizeof(::cudaStream_t));

// Each bound entry point has nccl.h's signature up to our spelling of the enums and opaque pointers:
// same arity and the same size for every parameter and for the result.
template <class A, class B>
struct same_abi : std::false_type {};
template <class RA, class... A, class RB, class... B>
struct same_abi<RA (*)(A...), RB (*)(B...)>
    : std::bool_constant<sizeof...(A) == sizeof...(B) && sizeof(RA) == sizeof(RB) &&
                         ((sizeof(A) == sizeof(B)) && ...)> {};
#define SAME_SIGNATURE(name) static_assert(same_abi<decltype(c::NcclApi::name), decltype(&::name)>::value, #name)
SAME_SIGNATURE(ncclGetVersion);
SAME_SIGNATURE(ncclGetUniqueId);
SAME_SIGNATURE(ncclCommInitRank);
SAME_SIGNATURE(ncclCommDestroy);
SAME_SIGNATURE(ncclCommAbort);
SAME_SIGNATURE(ncclCommGetAsyncError);
SAME_SIGNATURE(ncclGetErrorString);
SAME_SIGNATURE(ncclGroupStart);
SAME_SIGNATURE(ncclGroupEnd);
SAME_SIGNATURE(ncclSend);
SAME_SIGNATURE(ncclRecv);
#undef SAME_SIGNATURE

TEST(NcclAbi, MatchesNcclH) { SUCCEED() << "checked at compile time against NCCL " << NCCL_VERSION_CODE; }
