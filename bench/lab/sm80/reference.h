#pragma once
// Double-precision CPU reference of FlexAttention forward + backward (semantics.md sections 3 and 9),
// straight from the definition: dense scores, mask after score_mod, P rounded to the input dtype
// before PV, fully masked rows give out 0 / lse -inf, GQA by kv head h / G, Bkv = 1 broadcast.
#include <vector>

#include "lab.h"
#include "variants.cuh"

namespace lab {

struct Problem {
  int B = 1, Hq = 1, Hkv = 1, Bkv = 1, L = 1, S = 1, D = 64, Dv = 64;
  double scale = 0.125;
  Dt dt = Dt::BF16;
};

// Inputs hold the values of the 16-bit tensors (contiguous, shapes as in params.h).
struct RefInputs {
  const std::vector<double>* q;
  const std::vector<double>* k;
  const std::vector<double>* v;
  const std::vector<double>* dout;
  const std::vector<double>* dlse;  // may be empty
};

struct RefOutputs {
  std::vector<double> out, lse, maxs;  // natural log units
  std::vector<double> dq, dk, dv;
  std::vector<double> buf_grad;  // buffer 0 (relbias), sized by buf_grad_numel
};

// host_mp: ModParams whose buffers point to host copies.
void reference(const Problem& pr, const RefInputs& in, const HostMod& mod, const ModParams& host_mp,
               long long buf_grad_numel, RefOutputs* out);

// Block mask from the host mask (torch's construction: per mask tile, all true -> full, some ->
// partial, none -> skipped; tiles past the lengths are masked, so a tail tile is never full).
struct HostBlockMask {
  int mask_B = 1, mask_H = 1, nq = 0, nkv = 0, q_block = 128, kv_block = 128;
  std::vector<int> kv_num, kv_idx, full_kv_num, full_kv_idx, q_num, q_idx, full_q_num, full_q_idx;
};
HostBlockMask build_block_mask(int mask_B, int mask_H, int L, int S, int q_block, int kv_block, const HostMod& mod,
                               const ModParams& host_mp);

}  // namespace lab
