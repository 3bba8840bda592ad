// What the sm90 host-side tests (forward and backward) share.
#pragma once
#include <string>

#include "common/params.h"
#include "flexattn/error.h"
#include "error_of.h"

namespace flexattn::sm90_test {

using flexattn::test::error_of;

// A 16-byte aligned address to describe tensors with (nothing reads it).
alignas(16) inline char g_data[64];

// Params the sm90 kernels accept: D = Dv = 128, no block mask.
inline kern::AttnParams eligible_params() {
  kern::AttnParams p{};
  p.D = p.Dv = 128;
  p.q_block = p.kv_block = 1 << 30;
  p.scale = 0.125f;
  return p;
}

}  // namespace flexattn::sm90_test
