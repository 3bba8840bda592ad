#pragma once
// Which query tiles the first-store dQ protocol (bwd_dq_claim_sm90.cuh) claims. Plain host / device code: the
// preprocess applies it, the host tests check it.
//
// A claimed tile costs its other writers a wait for the claimant's store, and that wait is exposed where the writers
// arrive together: without a block mask, or with long block-mask rows, every kv tile of a head walks the query tiles
// in the same order and reaches each at about the same time (session 31, H200, claiming every tile: full -1.8 / -2.3 %
// at D 64 / 128, causal -1.1 / +0.4 %, against +3.9 % sliding-window and +2.8 % document at D=128). So only tiles whose
// kv span is at most p.dq_claim_max_kv rows are claimed; the preprocess clears the others, as without claims, and marks
// them stored, so their writers add at once.
#include "common/params.h"
#include "sm90/bwd_dq_order_sm90.h"

namespace flexattn::kern::sm90 {

constexpr int kDqClaimOpen = 0;    // the preprocess left the tile uncleared; its first writer claims it
constexpr int kDqClaimStored = 2;  // its first partial stored (or the accumulator cleared): writers add

// kv rows that add into query tile (b, h, q0): its block-mask row's kv blocks (both lists) times kv_block, every kv
// row without a block mask, 0 past the mask's rows.
FLEXATTN_HD inline long long bwd_dq_kv_span(const AttnParams& p, int b, int h, int q0) {
  const int row = bwd_dq_mask_row(p, b, h, q0);
  if (row == kDqNoMaskRow) return p.S;
  if (row < 0) return 0;
  int c0, c1;
  bwd_dq_row_counts(p, row, c0, c1);
  return (long long)(c0 + c1) * p.kv_block;
}

// The preprocess's initial claim word of query tile (b, h, q0) (p.dq_claim set): open, or stored (accumulator cleared).
FLEXATTN_HD inline int bwd_dq_claim_initial(const AttnParams& p, int b, int h, int q0) {
  return bwd_dq_kv_span(p, b, h, q0) <= p.dq_claim_max_kv ? kDqClaimOpen : kDqClaimStored;
}

}  // namespace flexattn::kern::sm90
