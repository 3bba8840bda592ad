// Source generation for the decode family; compiled and cached through get_kernel_set like the others.
#include "runtime/decode_source.h"

#include <cstdlib>
#include <sstream>

#include "decode/decode_config.h"
#include "flexattn/error.h"
#include "jit/sys.h"
#include "runtime/kernel_set.h"

namespace flexattn::runtime {

const DecodeTuning& decode_tuning() {
  static const DecodeTuning t = [] {
    DecodeTuning r;
    r.stages = int(jit::env_number("FLEXATTN_DECODE_STAGES", 2, 2, 4));
    r.splits = int(jit::env_number("FLEXATTN_DECODE_SPLITS", 0, 0, kern::kDecodeMaxSplits));
    r.wave = jit::env_number("FLEXATTN_DECODE_WAVE", 0.95, 0.01, 1.0);
    r.pdl = jit::env_flag("FLEXATTN_DECODE_PDL", true);
    r.bulk = jit::env_flag("FLEXATTN_DECODE_BULK", true);
    r.prefetch = int(jit::env_number("FLEXATTN_DECODE_PREFETCH", 0, 0, 4));
    r.combine_batch = jit::env_flag("FLEXATTN_DECODE_COMBINE_BATCH", false);
    r.cluster = jit::env_flag("FLEXATTN_DECODE_CLUSTER", false);
    r.merge = jit::env_flag("FLEXATTN_DECODE_MERGE", true);  // default on since session 22 (s21c.sh: 213/213, 8x8k +3 %)
    // default on since session 43 (H100, s43a.sh: gpu_decode_check 229/229; 8x8k +0.6-1.4 %, the rest flat)
    r.row_split = jit::env_flag("FLEXATTN_DECODE_ROW_SPLIT", true);
    r.warp_ring = jit::env_flag("FLEXATTN_DECODE_WARP_RING", false);
    // default on since session 44 (H200, s44b.sh: gpu_decode_check 204 of 229 in 70 s, none failed; contiguous 8x8k
    // 3142 -> 3298 GB/s (cuDNN 3362), 1x128k 3594 -> 3719, 64x4k 3737 -> 3958; paged calls keep the bulk rows)
    r.tma = jit::env_flag("FLEXATTN_DECODE_TMA", true);
    r.tma_box = decode_tma_box_checked(jit::env_number("FLEXATTN_DECODE_TMA_BOX", FLEXATTN_DECODE_TMA_BOX, 16, 64));
    r.tma_whole = jit::env_flag("FLEXATTN_DECODE_TMA_WHOLE", FLEXATTN_DECODE_TMA_WHOLE != 0);
    r.evict_first = decode_evict_first_checked(
        jit::env_number("FLEXATTN_DECODE_EVICT_FIRST", FLEXATTN_DECODE_EVICT_FIRST, 0, 2));
    r.tma_l2 = decode_tma_l2_checked(jit::env_number("FLEXATTN_DECODE_TMA_L2", 128, 0, 256));
    return r;
  }();
  return t;
}

int decode_tuning_choice(const char* var, double value, std::initializer_list<int> allowed) {
  for (int a : allowed)
    if (value == a) return a;
  std::ostringstream m;
  m << var << ": expected ";
  const int* choice = allowed.begin();
  for (size_t i = 0; i < allowed.size(); ++i) m << (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") << choice[i];
  m << ", got " << value;
  throw Error(m.str());
}

int decode_tma_box_checked(double rows) { return decode_tuning_choice("FLEXATTN_DECODE_TMA_BOX", rows, {16, 64}); }

int decode_tma_l2_checked(double bytes) {
  return decode_tuning_choice("FLEXATTN_DECODE_TMA_L2", bytes, {0, 64, 128, 256});
}

int decode_evict_first_checked(double level) {
  return decode_tuning_choice("FLEXATTN_DECODE_EVICT_FIRST", level, {0, 1, 2});
}

std::string decode_entry_for(int block_m, bool tma) {
  return "flexattn_decode_m" + std::to_string(block_m) + (tma ? "_tma" : "");
}

std::vector<DecodeEntry> decode_main_entries(int d, int dv, bool tma) {
  std::vector<DecodeEntry> entries;
  for (bool t : {false, true}) {
    if (t && !tma) continue;
    for (int bm : {16, 64})
      if (bm == 16 || kern::decode_has_m64(d, dv)) entries.push_back({bm, t});
  }
  return entries;
}

std::vector<std::string> decode_kernel_names(int d, int dv, bool tma) {
  std::vector<std::string> names;
  for (const DecodeEntry& e : decode_main_entries(d, dv, tma)) names.push_back(decode_entry_for(e.block_m, e.tma));
  names.push_back("flexattn_decode_combine");
  return names;
}

bool decode_tma_source(const std::string& arch, const DecodeTuning& tuning, int d, int dv) {
  return arch.rfind("sm_9", 0) == 0 && tuning.bulk && tuning.tma && kern::decode_tma_dims(d, dv);
}

bool decode_cluster_arch(const std::string& arch, bool tuning_cluster) {
  return tuning_cluster && arch.rfind("sm_9", 0) == 0;
}

std::string kernel_source_decode(const codegen::GeneratedVariant& variant, const KernelSetKey& key) {
  return kernel_source_decode(variant, key, decode_tuning());
}

std::string kernel_source_decode(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                 const DecodeTuning& tuning) {
  const std::string t = kernel_dtype(key.dtype);
  const std::string dd = std::to_string(key.d) + ", " + std::to_string(key.dv);
  std::ostringstream s;
  // A ring depth other than the default, and the bulk ring, are #defines ahead of the headers
  // (decode_config.h), so the default source, and its cache entries, stay as they were.
  if (tuning.stages != kern::kDecodeStages) s << "#define FLEXATTN_DECODE_STAGES " << tuning.stages << "\n";
  if (tuning.combine_batch) s << "#define FLEXATTN_DECODE_COMBINE_BATCH 1\n";
  if (key.arch.rfind("sm_9", 0) == 0) {  // sm_90a-only paths
    if (tuning.bulk) s << "#define FLEXATTN_DECODE_BULK 1\n";
    if (tuning.prefetch > 0) s << "#define FLEXATTN_DECODE_PREFETCH " << tuning.prefetch << "\n";
    if (tuning.bulk && tuning.warp_ring) s << "#define FLEXATTN_DECODE_WARP_RING 1\n";
  }
  const bool tma = decode_tma_source(key.arch, tuning, key.d, key.dv);
  if (tma) s << "#define FLEXATTN_DECODE_TMA 1\n";
  if (tma && tuning.tma_box != FLEXATTN_DECODE_TMA_BOX) s << "#define FLEXATTN_DECODE_TMA_BOX " << tuning.tma_box << "\n";
  if (tma && tuning.tma_whole != (FLEXATTN_DECODE_TMA_WHOLE != 0))
    s << "#define FLEXATTN_DECODE_TMA_WHOLE " << (tuning.tma_whole ? 1 : 0) << "\n";
  // On / off only: levels 1 and 2 differ in the launch's kv_read_once, so they share one compiled kernel.
  const bool evict_first = tuning.evict_first > 0;
  if (key.arch.rfind("sm_9", 0) == 0 && tuning.bulk && evict_first != (FLEXATTN_DECODE_EVICT_FIRST > 0))
    s << "#define FLEXATTN_DECODE_EVICT_FIRST " << (evict_first ? 1 : 0) << "\n";
  if (decode_cluster_arch(key.arch, tuning.cluster)) s << "#define FLEXATTN_DECODE_CLUSTER 1\n";
  if (tuning.merge) s << "#define FLEXATTN_DECODE_MERGE 1\n";
  if (tuning.row_split) s << "#define FLEXATTN_DECODE_ROW_SPLIT 1\n";
  s << "// flexattn decode kernels (split-KV, packed GQA, paged K/V), " << t << ", D=" << key.d << ", Dv=" << key.dv
    << "\n";
  s << "#include \"common/mod_ops.cuh\"\n#include \"decode/attn_decode.cuh\"\n#include \"decode/decode_combine.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n" << variant.source << "\n";
  // minBlocksPerSM = 1 as in the other families: a bare bound caps registers and spills.
  // The _tma entries (FLEXATTN_DECODE_TMA): the same kernels with the TMA ring, for contiguous caches.
  for (const DecodeEntry& e : decode_main_entries(key.d, key.dv, tma)) {
    s << "extern \"C\" __global__ void __launch_bounds__(decode_threads(" << e.block_m << ", " << dd << "), 1)\n"
      << decode_entry_for(e.block_m, e.tma) << "(const __grid_constant__ AttnParams p) { attn_decode<FlexVariant, " << t
      << ", " << dd << ", " << e.block_m << (e.tma ? ", true" : "") << ">(p); }\n";
  }
  s << "extern \"C\" __global__ void __launch_bounds__(kDecodeCombineWarps * 32, 1)\n"
    << "flexattn_decode_combine(const __grid_constant__ AttnParams p) { attn_decode_combine<" << t << ", " << key.dv
    << ">(p); }\n";
  return s.str();
}

}  // namespace flexattn::runtime
