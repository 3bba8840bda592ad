#pragma once
// The forward's hook into the decode family: cuda_forward hands a validated short-query call here
// first (runtime/decode_cuda.cc).
#include <string>

#include "flexattn/attention.h"

namespace flexattn::kern {
struct AttnParams;
}

namespace flexattn::runtime {

// Runs the call on the decode kernels when it qualifies (L <= 64, mask blocks the decode tile takes,
// FLEXATTN_DECODE not 0; on by default since the decode family passed its GPU checks on the H200,
// 2026-12-02) and returns true; false leaves it to the other families. `p` is the filled
// forward AttnParams. The split workspace comes from a per-(device, stream) buffer that grows on
// first use of a larger shape (old buffers are kept alive for graphs that captured them); while the
// stream is being captured it never allocates (the call then runs with one split).
// FLEXATTN_DECODE is on (default on; read on every call).
bool decode_forward_requested();

bool try_decode_forward(const ForwardArgs& args, kern::AttnParams& p, const std::string& arch);

}  // namespace flexattn::runtime
