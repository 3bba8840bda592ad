// The generated source of the sm90 (Hopper) forward kernel set (the backward's: sm90_backward.cc).
#include <sstream>

#include "flexattn/error.h"
#include "jit/sys.h"
#include "runtime/kernel_set.h"
#include "runtime/sm90_backward.h"
#include "runtime/tma_sm90.h"
#include "sm90/tile_config_sm90.h"

namespace flexattn::runtime {

std::string kernel_source_sm90(const codegen::GeneratedVariant& variant, const KernelSetKey& key) {
  if (key.backward) return kernel_source_sm90_bwd(variant, key);
  return kernel_source_sm90_fwd(variant, key, sm90_fwd_form(variant, key));
}

std::string kernel_source_sm90_fwd(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                   const Sm90FwdForm& form) {
  if (key.dtype != DType::BF16 && key.dtype != DType::F16)
    throw Error("dtype: the sm90 forward takes bf16 or f16 tensors, got " + std::string(dtype_name(key.dtype)));
  if (!kern::sm90_head_dim_ok(key.d) || !kern::sm90_head_dim_ok(key.dv))
    throw Error("head dims: the sm90 forward takes 64, 128, 192 or 256, got D=" + std::to_string(key.d) +
                ", Dv=" + std::to_string(key.dv));
  const std::string t = key.dtype == DType::BF16 ? "bf16" : "fp16";
  std::ostringstream s;
  s << "// flexattn forward kernel, sm90 family (sm_90a), " << t << ", D=" << key.d << ", Dv=" << key.dv << "\n";
  // FLEXATTN_SM90_AFFINE (default on since session 5; H200 S=8192 ALiBi + causal 476 -> 525 TFLOP/s):
  // ALiBi-shaped score_mods (codegen's kRelAffine) evaluate their bias as an affine function of the column
  // (fwd_softmax_sm90.cuh).
  if (jit::env_flag("FLEXATTN_SM90_AFFINE", true)) s << "#define FLEXATTN_SM90_REL_AFFINE 1\n";
  // FLEXATTN_SM90_UDESC (wgmma descriptors in uniform registers, fwd_gemm_sm90.cuh), FLEXATTN_SM90_ILP (the
  // softmax's row max and sum as four chains), FLEXATTN_SM90_LAZY (the exponent's reference max moves only
  // by more than 8 in log2; the O rescale skipped when a whole warp kept it): unset = on at D = 128, where
  // the three took the H200's S=8192 dense forward 664 -> 683 TFLOP/s, off at other head dims (D = 64 dense:
  // 416 -> 405-413; 192 / 256 not measured). 0 / 1 force them.
  const bool d128 = key.d == 128;
  if (jit::env_flag("FLEXATTN_SM90_UDESC", d128)) s << "#define FLEXATTN_SM90_UNIFORM_DESC 1\n";
  if (jit::env_flag("FLEXATTN_SM90_ILP", d128)) s << "#define FLEXATTN_SM90_SOFTMAX_ILP 1\n";
  if (jit::env_flag("FLEXATTN_SM90_LAZY", d128)) s << "#define FLEXATTN_SM90_LAZY_RESCALE 1\n";
  // FLEXATTN_SM90_SOFTCAP (default on since session 7; H200 S=8192 softcap forward D=128 365 -> 392 TFLOP/s with
  // a causal mask, 396 -> 422 without; bench/lab/round/r23.sh): softcap-shaped score_mods (codegen's kSoftcap)
  // evaluate in the folded form of fwd_softmax_sm90.cuh. 0: the general path.
  if (jit::env_flag("FLEXATTN_SM90_SOFTCAP", true)) s << "#define FLEXATTN_SM90_SOFTCAP_PATH 1\n";
  // FLEXATTN_SM90_POLY_EXP2 = k (0..4, default 0): k eighths of the softmax's exp2s on the FMA pipe
  // (numeric.cuh poly_exp2) instead of the MUFU; an A/B knob until measured (bench/lab/round/r21.sh).
  if (const int k = int(jit::env_number("FLEXATTN_SM90_POLY_EXP2", 0, 0, 4)); k > 0)
    s << "#define FLEXATTN_SM90_POLY_EXP2 " << k << "\n";
  // FLEXATTN_SM90_SOFTCAP_RCP = k (0..8): on the softcap path, k eighths of the tanh reciprocals on the FMA pipe
  // (common/poly_rcp.cuh) instead of the MUFU. Unset: 8 at D = 64, 0 otherwise (session 27, H100, S=8192 softcap +
  // causal forward ms A/B/B/A: D=64 1.207 -> 1.042 (-14 %), D=128 1.293 -> 1.288, k = 4 between; there the MUFU
  // bounds the D=64 tile and not the D=128 one). Only sources with those reciprocals get the define (the others'
  // cache entries stay as they were): not tanh_approx's, which has none.
  if (const int k = int(jit::env_number("FLEXATTN_SM90_SOFTCAP_RCP", key.d == 64 ? 8 : 0, 0, 8));
      k > 0 && variant.softcap && !variant.softcap_approx)
    s << "#define FLEXATTN_SM90_SOFTCAP_RCP " << k << "\n";
  // FLEXATTN_SM90_EARLY_CLAIM = k (0..4, default 0): the persistent producer claims its next tile with k kv tiles
  // of the current one still to issue (fwd_producer_sm90.cuh kEarlyClaim); an A/B knob until measured.
  if (const int k = int(jit::env_number("FLEXATTN_SM90_EARLY_CLAIM", 0, 0, 4)); k > 0)
    s << "#define FLEXATTN_SM90_EARLY_CLAIM " << k << "\n";
  // FLEXATTN_SM90_SMALL_GROUP_FIRST (default on since session 9; H200 S=8192 D=128 causal / document +4.6 / +4.8 %,
  // session 10): a smaller last head group runs first (fwd_scheduler_sm90.cuh, FwdTileOrder::span). 0: last, as
  // before; an A/B knob.
  if (!jit::env_flag("FLEXATTN_SM90_SMALL_GROUP_FIRST", true)) s << "#define FLEXATTN_SM90_SMALL_GROUP_LAST 1\n";
  // FLEXATTN_SM90_GATHER (default on): relative-position-bias score_mods (codegen's kRelGather) read their row at
  // compile-time offsets per tile (fwd_softmax_sm90.cuh scores_inside_rel_gather); only their sources get the
  // define. 0: the general per-entry gather; an A/B knob.
  // The distance tables (sm90_fwd_form: FLEXATTN_SM90_REL_DIAG) replace the gather where both apply; only their
  // sources get the define (their layout then reserves the tables).
  if (form.rel_diag) s << "#define FLEXATTN_SM90_REL_DIAG 1\n";
  if (variant.rel_gather != 0 && !form.rel_diag && jit::env_flag("FLEXATTN_SM90_GATHER", true)) {
    s << "#define FLEXATTN_SM90_REL_GATHER 1\n";
    if (form.rel_prefetch) s << "#define FLEXATTN_SM90_REL_PREFETCH 1\n";
  }
  // FLEXATTN_SM90_KV_RANGE (default off): masks of one kv interval per row (codegen's kKvRange: causal, sliding
  // windows, prefix-LM) test a partial tile's entries against the row's bounds (fwd_softmax_sm90.cuh); only
  // their sources get the define. Measured flat on the H200 (session 17: S=8192 D=128 sliding 0.290 / 0.287 ms,
  // causal and prefix-LM equal, softcap + causal 1.314 -> 1.336 ms): an A/B knob.
  if (variant.kv_range && jit::env_flag("FLEXATTN_SM90_KV_RANGE", false)) s << "#define FLEXATTN_SM90_KV_RANGE_PATH 1\n";
  s << "#include \"common/mod_ops.cuh\"\n";
  s << "#include \"sm90/attn_fwd_sm90.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n";
  s << variant.source << "\n";
  // The persistent form without the tall tile keeps its one extra template argument (the default source is
  // unchanged by the tall tile's existence).
  s << "extern \"C\" __global__ void __launch_bounds__(" << (form.tall ? "kSm90TallThreads" : "kSm90Threads")
    << ", 1)\n"
    << "flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm90<FlexVariant, " << t << ", " << key.d
    << ", " << key.dv << ", " << (form.narrow ? "true" : "false")
    << (form.tall ? (form.persistent ? ", true, true" : ", false, true") : form.persistent ? ", true" : "")
    << ">(p); }\n";
  return s.str();
}

Sm90FwdForm sm90_fwd_form(const codegen::GeneratedVariant& variant, const KernelSetKey& key) {
  Sm90FwdForm f;
  f.narrow = sm90_narrow_tile(variant.layout);
  f.persistent = jit::env_flag("FLEXATTN_SM90_PERSISTENT", true);
  // FLEXATTN_SM90_REL_DIAG: distance-only biases (codegen's kRelDiag) evaluate once per distance of a warp's tile into
  // a table in shared memory instead of once per entry (fwd_rel_diag_sm90.cuh). Default: on, except for the gather
  // shape bias[h, q - kv + c] (codegen's kRelGather), whose row gathers are already one load per entry. H100,
  // session 29 (s29a, B=2 H=16 S=8192 forward ms, REL_DIAG off / on): T5 D=128 13.52 / 2.99, D=64 13.05 / 2.56 (the
  // bucket's log per entry); relbias_full D=128 2.143 / 2.359, D=64 1.693 / 1.961 (the table fill costs more than
  // the gathers it replaces). 1 forces the tables on the gather shape too, 0 turns them off. Not with the tall tile:
  // the 34 table values a thread holds per tile spilled its 160-register consumers (60 bytes, ptxas 13.0).
  f.rel_diag = variant.rel_diag && jit::env_flag("FLEXATTN_SM90_REL_DIAG", variant.rel_gather == 0);
  // FLEXATTN_SM90_GATHER_PREFETCH (default on since session 29): the rel-gather forward's 34 loads issued while S is
  // computed (fwd_softmax_sm90.cuh use_rel_prefetch) instead of after its wait. H100, s29e (B=2 H=16 S=8192 forward
  // ms, off / on): relbias_full D=128 2.154 / 1.952 (+10.4 %), D=64 1.725 / 1.658 (+4.0 %), relbias + causal D=64
  // 0.859 / 0.833; checks and memcheck clean. D = 64, and D = 128 without a mask_mod: with one the 34 values held
  // across the wait spilled relbias + causal (40 bytes, ptxas 13.0); D = 192 / 256 untried. A set that spills anyway
  // drops it (get_kernel_set).
  const bool prefetch_dims = key.d <= 64 || (key.d <= 128 && !variant.has_mask_mod);
  f.rel_prefetch = variant.rel_gather != 0 && !f.rel_diag && prefetch_dims &&
                   jit::env_flag("FLEXATTN_SM90_GATHER_PREFETCH", true);
  f.tall = key.sm90_fwd_tall && kern::sm90_fwd_tall_ok(key.d, key.dv, f.narrow) && sm90_fwd_tall_suits(variant) &&
           !f.rel_diag;
  return f;
}

bool sm90_fwd_tall_suits(const codegen::GeneratedVariant& variant) {
  return !(variant.softcap && !variant.softcap_approx) && variant.layout.buffers.empty();
}

bool sm90_fwd_tall_requested(int d, int dv, bool block_mask) {
  // Read on every call (the tall kernel is a kernel set of its own); narrow or not is the set's to decide. Default on
  // since session 22 (H200, B=2 H=16 S=8192 D=64 dense forward 1.297 -> 1.094-1.100 ms, 423 -> ~500 TFLOP/s; D=128
  // and relbias unchanged; `gpu_attention_check` 136/136 and memcheck clean with it, bench/lab/round/s21b.sh).
  return kern::sm90_fwd_tall_ok(d, dv, false) && !block_mask && jit::env_flag("FLEXATTN_SM90_FWD_TALL", true);
}

KernelSetKey sm90_fwd_call_key(DType dtype, int d, int dv, const std::string& arch, bool block_mask) {
  d = sm90_fwd_head_dim(d), dv = sm90_fwd_head_dim(dv);  // one kernel per padded dim
  KernelSetKey key{dtype, d, dv, arch, false, KernelFamily::sm90};
  key.sm90_fwd_tall = sm90_fwd_tall_requested(d, dv, block_mask);
  return key;
}

}  // namespace flexattn::runtime
