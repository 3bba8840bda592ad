// Communicator, nccl_init and the NCCL transport (compile-verified; docs/cp.md §4 says what ran where).
#include "cp/nccl_transport.h"

#include <cstring>
#include <string>

#include "flexattn/error.h"

namespace flexattn::cp {
namespace {

constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING

void wait_for(jit::CUevent e, jit::CUstream producer, jit::CUstream consumer, const char* what) {
  jit::cu_check(jit::driver().cuEventRecord(e, producer), std::string("cuEventRecord (") + what + ")");
  const jit::DriverApi& d = jit::driver();
  check(d.cuStreamWaitEvent != nullptr, "CUDA driver " + d.path + " lacks cuStreamWaitEvent");
  jit::cu_check(d.cuStreamWaitEvent(consumer, e, 0), std::string("cuStreamWaitEvent (") + what + ")");
}

}  // namespace

Communicator::Impl::~Impl() {
  // Destructors must not throw: a failure here leaves the communicator to process exit.
  std::string ignored;
  const jit::DriverApi* d = jit::try_driver(&ignored);
  if (d && compute_done) d->cuEventDestroy(compute_done);
  if (d && comm_done) d->cuEventDestroy(comm_done);
  if (const NcclApi* api = try_nccl_api(&ignored); api && comm) api->ncclCommDestroy(comm);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
int Communicator::rank() const { return impl_->rank; }
int Communicator::world_size() const { return impl_->world_size; }
int Communicator::device() const { return impl_->device; }

NcclUniqueId nccl_unique_id() {
  const NcclApi& api = nccl_api();
  ncclUniqueId id{};
  nccl_check(api.ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclUniqueId r{};
  static_assert(sizeof(r.bytes) == sizeof(id.internal));
  std::memcpy(r.bytes, id.internal, sizeof(r.bytes));
  return r;
}

std::unique_ptr<Communicator> nccl_init(const NcclUniqueId& id, int rank, int world_size, int device) {
  check(world_size >= 1, "nccl_init: world_size must be >= 1; got " + std::to_string(world_size));
  check(0 <= rank && rank < world_size,
        "nccl_init: rank must be in [0, world_size = " + std::to_string(world_size) + "); got " + std::to_string(rank));
  const NcclApi& api = nccl_api();
  jit::use_device(device);
  auto impl = std::make_unique<Communicator::Impl>();
  impl->rank = rank, impl->world_size = world_size, impl->device = device;
  ncclUniqueId nid{};
  std::memcpy(nid.internal, id.bytes, sizeof(nid.internal));
  nccl_check(api.ncclCommInitRank(&impl->comm, world_size, nid, rank), "ncclCommInitRank(rank " + std::to_string(rank) +
                                                                           " of " + std::to_string(world_size) +
                                                                           ", device " + std::to_string(device) + ")");
  impl->stream = std::make_unique<jit::Stream>();
  jit::cu_check(jit::driver().cuEventCreate(&impl->compute_done, kEventDisableTiming), "cuEventCreate");
  jit::cu_check(jit::driver().cuEventCreate(&impl->comm_done, kEventDisableTiming), "cuEventCreate");
  return std::make_unique<Communicator>(std::move(impl));
}

NcclTransport::NcclTransport(Communicator& comm, jit::CUstream compute)
    : c_(comm.impl()), api_(nccl_api()), compute_(compute) {}

void NcclTransport::group_start() {
  wait_for(c_.compute_done, compute_, c_.stream->get(), "compute before transfer");
  nccl_check(api_.ncclGroupStart(), "ncclGroupStart");
}

void NcclTransport::group_end() { nccl_check(api_.ncclGroupEnd(), "ncclGroupEnd"); }

void NcclTransport::send(const void* buffer, size_t bytes, int peer) {
  nccl_check(api_.ncclSend(buffer, bytes, ncclUint8, peer, c_.comm, c_.stream->get()),
             "ncclSend(" + std::to_string(bytes) + " bytes to rank " + std::to_string(peer) + ")");
}

void NcclTransport::recv(void* buffer, size_t bytes, int peer) {
  nccl_check(api_.ncclRecv(buffer, bytes, ncclUint8, peer, c_.comm, c_.stream->get()),
             "ncclRecv(" + std::to_string(bytes) + " bytes from rank " + std::to_string(peer) + ")");
}

void NcclTransport::wait() {
  wait_for(c_.comm_done, c_.stream->get(), compute_, "transfer before compute");
  // A peer that failed surfaces here instead of as a hang on the next step.
  ncclResult_t async = ncclSuccess;
  nccl_check(api_.ncclCommGetAsyncError(c_.comm, &async), "ncclCommGetAsyncError");
  nccl_check(async, "NCCL communication (asynchronous error)");
}

}  // namespace flexattn::cp
