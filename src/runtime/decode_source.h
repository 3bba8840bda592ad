#pragma once
// Generated source of the decode kernel family (kernels/decode): two row tiles of the split-KV kernel
// and the combine kernel, for one variant / dtype / head dims.
#include <initializer_list>
#include <string>
#include <vector>

#include "flexattn/codegen.h"
#include "runtime/kernel_set.h"

namespace flexattn::runtime {


// Tuning overrides, read once per process from the environment (docs/env_vars.md), so that one device
// run can sweep them across processes. A bad value is an Error naming the variable.
struct DecodeTuning {
  int stages = 2;      // FLEXATTN_DECODE_STAGES: K/V ring depth compiled into the kernels (2..4)
  int splits = 0;      // FLEXATTN_DECODE_SPLITS: kv splits when the call asks for auto (0 = heuristic)
  double wave = 0.95;  // FLEXATTN_DECODE_WAVE: the split heuristic's wave-efficiency tolerance (0, 1]
  bool pdl = false;    // FLEXATTN_DECODE_PDL: combine as a programmatic dependent launch (sm_90+)
  bool bulk = false;   // FLEXATTN_DECODE_BULK: cp.async.bulk K/V ring (sm_90a sources only)
  int prefetch = 0;    // FLEXATTN_DECODE_PREFETCH: L2 prefetch this many tiles ahead (0..4; sm_90a sources)
  bool combine_batch = false;  // FLEXATTN_DECODE_COMBINE_BATCH: the combine's partial loads in chunks of 8
  bool cluster = false;  // FLEXATTN_DECODE_CLUSTER: 2..8 splits merge in a thread-block cluster (sm_90a sources)
  bool merge = false;    // FLEXATTN_DECODE_MERGE: the last split of a row tile merges it (no combine kernel)
  bool row_split = false;  // FLEXATTN_DECODE_ROW_SPLIT: walks without a block mask split rows, not tiles, evenly
  bool warp_ring = false;  // FLEXATTN_DECODE_WARP_RING: m16 warps stream their own slice of the bulk ring (sm_90a)
  bool tma = false;        // FLEXATTN_DECODE_TMA: _tma entries, TMA tiles for contiguous caches (sm_90a bulk ring)
  int tma_box = 64;        // FLEXATTN_DECODE_TMA_BOX: rows per TMA box, 16 or 64 (the maps' and the kernels')
  bool tma_whole = false;  // FLEXATTN_DECODE_TMA_WHOLE: TMA boxes of whole rows (5-D maps; the maps' and the kernels')
  // FLEXATTN_DECODE_EVICT_FIRST: sm_90a K / V loads (TMA, bulk rows) at L2 evict_first; 0 never, 1 where the launch
  // reads each K / V byte once (paged caches at B = 1), 2 also paged caches at any B (their pages taken as unshared)
  int evict_first = 0;
  int tma_l2 = 128;        // FLEXATTN_DECODE_TMA_L2: the K / V maps' L2 promotion in bytes, 0, 64, 128 or 256 (host)
};
const DecodeTuning& decode_tuning();

// A tuning variable's value if it is one of `allowed`; else an Error naming the variable and the choices ("expected
// 16 or 64, got 16.5").
int decode_tuning_choice(const char* var, double value, std::initializer_list<int> allowed);
// FLEXATTN_DECODE_TMA_BOX's value: 16 or 64 rows. FLEXATTN_DECODE_TMA_L2's: 0, 64, 128 or 256 bytes.
int decode_tma_box_checked(double rows);
int decode_tma_l2_checked(double bytes);
// FLEXATTN_DECODE_EVICT_FIRST's value: 0, 1 or 2.
int decode_evict_first_checked(double level);
// Whether a cache's K / V may be read by several sequences of a launch through shared pages (kern::decode_kv_read_once):
// a paged cache, unless FLEXATTN_DECODE_EVICT_FIRST (evict_first) is 2.
inline bool decode_pages_may_share(bool paged, int evict_first) { return paged && evict_first < 2; }

// The source for decode_tuning(); the second form for explicit tuning (the compile tests: the tuning is
// read once per process).
std::string kernel_source_decode(const codegen::GeneratedVariant& variant, const KernelSetKey& key);
std::string kernel_source_decode(const codegen::GeneratedVariant& variant, const KernelSetKey& key,
                                 const DecodeTuning& tuning);

// Whether calls on a kernel set of this arch ("sm_90a", ...) launch 2..8 splits as a cluster that merges
// them (FLEXATTN_DECODE_CLUSTER on, sm_90+, and the driver has cuLaunchKernelEx): must match the source,
// which compiles the cluster merge for the same archs.
bool decode_cluster_arch(const std::string& arch, bool tuning_cluster);

// Whether the source for this arch, tuning and head dims defines the _tma entries (FLEXATTN_DECODE_TMA).
bool decode_tma_source(const std::string& arch, const DecodeTuning& tuning, int d, int dv);

// The split-KV entries of a set for head dims (d, dv), in the order the source defines them: the row tiles
// (decode_has_m64), then with tma (decode_tma_source) the same tiles' _tma entries. The source, the entry names and the
// launch state all walk this list.
struct DecodeEntry {
  int block_m;
  bool tma;
};
std::vector<DecodeEntry> decode_main_entries(int d, int dv, bool tma);

// Entry names of the set for head dims (d, dv), in the order the source defines them: decode_main_entries, then the
// combine.
std::vector<std::string> decode_kernel_names(int d, int dv, bool tma = false);

// The entry for a row tile (decode_block_m): "flexattn_decode_m16" or "flexattn_decode_m64", with "_tma" for the
// TMA ring's.
std::string decode_entry_for(int block_m, bool tma = false);

}  // namespace flexattn::runtime
