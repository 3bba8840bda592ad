// A stand-in libnccl for the loader tests: the entry points flexattn binds, with the C signatures of
// nccl.h, doing nothing useful. Built twice: complete, and with FAKE_NCCL_OLD (no ncclSend/ncclRecv,
// like NCCL before 2.7) for the missing-entry-point message.
#include <cstddef>
#include <cstring>

extern "C" {

struct ncclComm {
  int rank;
};
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

static ncclComm fake_comm{0};

int ncclGetVersion(int* version) {
  *version = 99999;  // no real NCCL reports 9.99.99, so a test sees which library it bound
  return 0;
}
int ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < 128; ++i) id->internal[i] = char(i * 7 + 1);
  return 0;
}
int ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  if (rank < 0 || rank >= nranks) return 4;  // ncclInvalidArgument
  *comm = &fake_comm;
  return 0;
}
int ncclCommDestroy(ncclComm_t) { return 0; }
int ncclCommAbort(ncclComm_t) { return 0; }
int ncclCommGetAsyncError(ncclComm_t, int* async_error) {
  *async_error = 0;
  return 0;
}
const char* ncclGetErrorString(int r) { return r == 4 ? "fake: invalid argument" : "fake: other"; }
int ncclGroupStart() { return 0; }
int ncclGroupEnd() { return 0; }
#ifndef FAKE_NCCL_OLD
int ncclSend(const void*, size_t, int, int, ncclComm_t, void*) { return 0; }
int ncclRecv(void*, size_t, int, int, ncclComm_t, void*) { return 0; }
#endif
}
