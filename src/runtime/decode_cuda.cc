// The decode family's host side: validation, split planning, workspace sizing, launches
// (include/flexattn/decode.h), and the short-query hook of cuda_forward.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/params.h"
#include "decode/decode_config.h"
#include "flexattn/decode.h"
#include "flexattn/error.h"
#include "flexattn/tensor.h"
#include "jit/device.h"
#include "jit/module.h"
#include "jit/sys.h"
#include "runtime/decode_hook.h"
#include "runtime/decode_launch.h"
#include "runtime/decode_source.h"
#include "runtime/decode_tma.h"
#include "runtime/kernel_set.h"
#include "runtime/split_counters.h"

namespace flexattn {

namespace {

using kern::AttnParams;

// Rank 4, shape, dtype, contiguous last dim, strides in multiples of 8, 16-byte alignment; the
// (dim0, dim1, dim2) strides into s. No allocation unless it throws (a decode call's host time is on the
// timed path: the kernel starts only after it).
void check_view(const TensorView& t, const char* name, const int64_t (&want)[4], DType dtype, long long s[3]) {
  if (t.data == nullptr) throw Error(std::string(name) + ": no data pointer");
  if (t.shape.size() != 4 || !std::equal(want, want + 4, t.shape.begin()))
    throw Error(std::string(name) + ": expected shape " + shape_string(std::vector<int64_t>(want, want + 4)) + ", got " +
                shape_string(t.shape));
  if (t.dtype != dtype)
    throw Error(std::string(name) + ": expected dtype " + std::string(dtype_name(dtype)) + ", got " +
                std::string(dtype_name(t.dtype)));
  int64_t st[4];
  if (t.strides.empty()) {
    st[3] = 1;
    for (int i = 2; i >= 0; --i) st[i] = st[i + 1] * t.shape[size_t(i) + 1];
  } else {
    if (t.strides.size() != 4) throw Error(std::string(name) + ": the last dimension must be contiguous");
    std::copy(t.strides.begin(), t.strides.end(), st);
  }
  if (st[3] != 1) throw Error(std::string(name) + ": the last dimension must be contiguous");
  for (int i = 0; i < 3; ++i)
    if (st[i] % 8 != 0)
      throw Error(std::string(name) + ": strides must be multiples of 8 elements (16-byte rows), got " +
                  shape_string(std::vector<int64_t>(st, st + 4)));
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) throw Error(std::string(name) + ": data must be 16-byte aligned");
  for (int i = 0; i < 3; ++i) s[i] = st[i];
}

int sm_count_of(int device) { return jit::device_props(device).sm_count; }

struct Plan {
  int pack = 1, block_m = 16, splits = 1;
  long long rows = 0;    // B * Hq * L
  bool cluster = false;  // the splits merge inside a cluster (kern::decode_cluster_fits): no workspace
};

// The launch state of one kernel set in one context, resolved once: the entries' functions (their
// dynamic shared memory limit raised, their parameter size checked), the CTAs of each row tile resident
// per SM (the driver's occupancy calculator), and whether the combine may be a programmatic dependent
// launch. A call then costs one map lookup and the driver launches, not a module / function lookup,
// parameter query and attribute set per launch (jit::launch) on the timed path.
struct DecodeFns {
  jit::CUfunction main[2] = {nullptr, nullptr};  // block_m 16, 64
  jit::CUfunction main_tma[2] = {nullptr, nullptr};  // their _tma entries, where the source has them
  jit::CUfunction combine = nullptr;
  // CTAs per SM of each row tile: with _tma entries, the fewer of the two entries' (their shared memory is the same, their
  // registers may differ), so the plan -- splits, workspace (decode_num_splits, decode_workspace_bytes) -- depends on
  // shapes and the device only, never on whether a call's views take TMA.
  int per_sm[2] = {1, 1};
  bool pdl = false;
  bool cluster = false;  // FLEXATTN_DECODE_CLUSTER: the set's sm_90 source compiled the cluster merge
  // cluster: clusters of s CTAs resident at once per row tile (cuOccupancyMaxActiveClusters; 0: such a cluster
  // does not fit, -1: the driver cannot tell, then the plain slots are assumed)
  int max_clusters[2][kern::kDecodeClusterMax + 1] = {};
};

int tile_index(int block_m) { return block_m == 16 ? 0 : 1; }

const DecodeFns& decode_fns(const runtime::KernelSet& set, int d, int dv) {
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<const runtime::KernelSet*, jit::CUcontext>, DecodeFns>();
  const jit::DriverApi& drv = jit::driver();
  jit::CUcontext ctx = nullptr;
  jit::cu_check(drv.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find({&set, ctx});
  if (it != cache->end()) return it->second;
  DecodeFns f;
  const int stages = runtime::decode_tuning().stages;
  auto resolve = [&](const std::string& name, int smem) {
    jit::CUfunction fn = jit::get_function(set.compiled, name);
    if (drv.cuFuncGetParamInfo) {
      size_t offset = 0, size = 0;
      if (drv.cuFuncGetParamInfo(fn, 0, &offset, &size) == jit::CUDA_SUCCESS && size != sizeof(AttnParams))
        throw Error("decode: " + name + " takes " + std::to_string(size) + " parameter bytes, the host " +
                    std::to_string(sizeof(AttnParams)) + " (host and device structs differ)");
    }
    if (smem > 48 * 1024)  // also what the occupancy calculator counts
      jit::cu_check(drv.cuFuncSetAttribute(fn, jit::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                    "cuFuncSetAttribute");
    return fn;
  };
  const std::string& arch = set.key.arch;
  const bool tma = runtime::decode_tma_source(arch, runtime::decode_tuning(), d, dv);
  for (const runtime::DecodeEntry& e : runtime::decode_main_entries(d, dv, tma)) {  // each tile's _tma entry after it
    const int bm = e.block_m, smem = kern::decode_smem(bm, d, dv, stages);
    jit::CUfunction fn = resolve(runtime::decode_entry_for(bm, e.tma), smem);
    const int n = jit::max_active_blocks_per_sm(fn, kern::decode_threads(bm, d, dv), size_t(smem));
    (e.tma ? f.main_tma : f.main)[tile_index(bm)] = fn;
    const int per = n > 0 ? n : 1;
    f.per_sm[tile_index(bm)] = e.tma ? std::min(f.per_sm[tile_index(bm)], per) : per;
  }
  const int cc = arch.size() >= 5 ? std::atoi(arch.c_str() + 3) : 0;
  // The source compiled the merge for these archs (decode_cluster_arch); the launch needs cuLaunchKernelEx.
  f.cluster = runtime::decode_cluster_arch(arch, runtime::decode_tuning().cluster) && cc >= 90 &&
              drv.cuLaunchKernelEx != nullptr;
  for (int bm : {16, 64}) {
    if (!f.cluster || f.main[tile_index(bm)] == nullptr) continue;
    for (int cs = 2; cs <= kern::kDecodeClusterMax; ++cs) {
      // Clusters are placed whole inside a GPC, so a wave of them can hold fewer CTAs than the SMs' slots.
      int n = -1;
      if (drv.cuOccupancyMaxActiveClusters != nullptr) {
        jit::CUlaunchAttribute attr{};
        attr.id = jit::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim = {1u, 1u, unsigned(cs)};
        const int smem = kern::decode_smem(bm, d, dv, stages);
        jit::CUlaunchConfig cfg{1u, 1u, unsigned(cs), unsigned(kern::decode_threads(bm, d, dv)), 1, 1, unsigned(smem),
                                nullptr, &attr, 1};
        int m = 0;
        if (drv.cuOccupancyMaxActiveClusters(&m, f.main[tile_index(bm)], &cfg) == jit::CUDA_SUCCESS) n = m;
      }
      f.max_clusters[tile_index(bm)][cs] = n;
    }
  }
  f.combine = resolve("flexattn_decode_combine", 0);
  // PDL needs the griddepcontrol instructions, compiled only for sm_90+ (decode_combine.cuh).
  f.pdl = runtime::decode_tuning().pdl && cc >= 90 && drv.cuLaunchKernelEx != nullptr;
  return cache->emplace(std::make_pair(&set, ctx), f).first->second;
}

// The last lookup of this thread, remembered: a decode loop calls with the same variant and shapes every
// step, and get_kernel_set builds a key (strings, a vector) and searches a map under a mutex. Safe to
// keep the set's address: get_kernel_set never evicts, and its entry holds the variant's nodes alive, so
// equal node pointers are the same mods.
const runtime::KernelSet& decode_set(const Variant& variant, DType dtype, const AttnParams& p, const std::string& arch) {
  struct Last {
    const ir::Node* score = nullptr;
    const ir::Node* mask = nullptr;
    DType dtype{};
    int d = 0, dv = 0;
    std::string arch;
    const runtime::KernelSet* set = nullptr;
  };
  thread_local Last last;
  if (last.set != nullptr && variant.grad_buffers.empty() && last.score == variant.score_mod.get() &&
      last.mask == variant.mask_mod.get() && last.dtype == dtype && last.d == p.D && last.dv == p.Dv && last.arch == arch)
    return *last.set;
  const runtime::KernelSet& set = runtime::get_kernel_set(
      variant, runtime::KernelSetKey{dtype, p.D, p.Dv, arch, false, runtime::KernelFamily::decode});
  if (variant.grad_buffers.empty())
    last = Last{variant.score_mod.get(), variant.mask_mod.get(), dtype, p.D, p.Dv, arch, &set};
  return set;
}

// mask_H > 1 gives each query head its own list, so heads are then not packed (one list per tile).
// The launch's y dimension is B x head groups (kern::decode_launch): at most 65535.
bool grid_fits(const AttnParams& p, const Plan& pl) { return (long long)p.B * (p.Hq / pl.pack) <= 65535; }

Plan make_plan(const AttnParams& p, const DecodeFns& fns, int sm_count, int forced_splits) {
  Plan pl;
  const int G = p.Hq / p.Hkv;
  pl.pack = p.mask_H > 1 ? 1 : G;
  pl.block_m = kern::decode_block_m(pl.pack * p.L, p.D, p.Dv);
  pl.rows = (long long)p.B * p.Hq * p.L;
  const int per_sm = fns.per_sm[tile_index(pl.block_m)];
  long long slots[kern::kDecodeClusterMax + 1] = {};
  for (int cs = 2; fns.cluster && cs <= kern::kDecodeClusterMax; ++cs) {
    const int n = fns.max_clusters[tile_index(pl.block_m)][cs];
    slots[cs] = n >= 0 ? (long long)n * cs : (long long)sm_count * per_sm;
  }
  const long long* cluster_slots = fns.cluster ? slots : nullptr;
  if (forced_splits <= 0) forced_splits = runtime::decode_tuning().splits;  // FLEXATTN_DECODE_SPLITS
  if (forced_splits > 0) {
    pl.splits = forced_splits;
    pl.cluster = kern::decode_cluster_fits(cluster_slots, pl.splits);
    return pl;
  }
  const long long ctas = kern::decode_cdiv((long long)pl.pack * p.L, pl.block_m) * p.B * (p.Hq / pl.pack);
  const int bn = kern::decode_tile(pl.block_m, p.D, p.Dv).block_n;
  const kern::DecodeSplitPlan sp =
      kern::decode_plan_splits(cluster_slots, sm_count, per_sm, ctas, p.S, bn, runtime::decode_tuning().wave);
  pl.splits = sp.splits;
  pl.cluster = sp.cluster;
  return pl;
}

// Block-mask fields in logical coordinates; the kv block must be a multiple of the decode kv tile.
void set_mask(AttnParams* p, const DeviceBlockMask* m) {
  if (m == nullptr) {
    p->mask_B = p->mask_H = 1, p->nq = p->nkv = 1;
    p->q_block = p->kv_block = 1 << 30;
    return;
  }
  if (m->B != 1 && m->B != p->B)
    throw Error("block_mask: batch must be 1 or " + std::to_string(p->B) + ", got " + std::to_string(m->B));
  if (m->H != 1 && m->H != p->Hq)
    throw Error("block_mask: heads must be 1 or " + std::to_string(p->Hq) + ", got " + std::to_string(m->H));
  if (m->kv_num_blocks == nullptr || m->kv_indices == nullptr)
    throw Error("block_mask: kv_num_blocks and kv_indices are required");
  if (m->q_block < 1 || m->kv_block < 1 || m->nq < 1 || m->nkv < 1) throw Error("block_mask: empty or bad block sizes");
  const int bn = kern::decode_tile(16, p->D, p->Dv).block_n;
  if (m->kv_block % bn != 0)
    throw Error("block_mask: the decode kernels need a kv BLOCK_SIZE that is a multiple of " + std::to_string(bn) +
                ", got " + std::to_string(m->kv_block));
  p->kv_num_blocks = m->kv_num_blocks, p->kv_indices = m->kv_indices;
  p->full_kv_num_blocks = m->full_kv_num_blocks, p->full_kv_indices = m->full_kv_indices;
  p->mask_B = int(m->B), p->mask_H = int(m->H), p->nq = int(m->nq), p->nkv = int(m->nkv);
  p->q_block = m->q_block, p->kv_block = m->kv_block;
}

// Shapes, views, paging and mask of a decode call into p (no device access).
void check_decode(const DecodeArgs& a, AttnParams* p) {
  if (a.variant == nullptr) throw Error("variant: null");
  if (a.q.shape.size() != 4) throw Error("q: expected a 4-D tensor [B, Hq, L, D], got shape " + shape_string(a.q.shape));
  if (a.k.shape.size() != 4 || a.v.shape.size() != 4) throw Error("k, v: expected 4-D tensors");
  const DType t = a.q.dtype;
  if (t != DType::BF16 && t != DType::F16)
    throw Error("q: the cuda backend takes bf16 or f16, got " + std::string(dtype_name(t)));
  const int64_t B = a.q.shape[0], Hq = a.q.shape[1], L = a.q.shape[2], D = a.q.shape[3];
  const int64_t Hkv = a.k.shape[1], Dv = a.v.shape[3];
  const bool paged = a.page_table != nullptr;
  if (B < 1 || Hq < 1 || D < 1) throw Error("q: every dimension must be at least 1, got " + shape_string(a.q.shape));
  if (L < 1 || L > kern::kDecodeMaxRows)
    throw Error("q: the decode kernels take 1.." + std::to_string(kern::kDecodeMaxRows) + " query rows, got " +
                std::to_string(L));
  if (Hkv < 1 || Hq % Hkv != 0)
    throw Error("k: the number of query heads (" + std::to_string(Hq) + ") must be a multiple of the kv heads (" +
                std::to_string(Hkv) + ")");
  if (D % 16 != 0 || Dv % 16 != 0 || D > 256 || Dv > 256 || Dv < 16)
    throw Error("head dims: the cuda backend takes multiples of 16 up to 256, got D=" + std::to_string(D) +
                ", Dv=" + std::to_string(Dv));
  long long s[3];
  check_view(a.q, "q", {B, Hq, L, D}, t, s);
  p->q = a.q.data, p->q_sb = s[0], p->q_sh = s[1], p->q_sl = s[2];
  int64_t S = 0, Bkv = B;
  if (paged) {
    const int64_t pages = a.k.shape[0], ps = a.k.shape[2];
    if (ps < 1 || ps > 256) throw Error("k: page size (dim 2 of the pool) must be 1..256, got " + std::to_string(ps));
    if (a.max_pages < 1) throw Error("max_pages: must be at least 1 with a page table");
    if (pages < 1 || pages >= (int64_t(1) << 31)) throw Error("k: the pool needs 1..2^31-1 pages");
    if (product_exceeds((int64_t(1) << 31) - 1, {a.max_pages, ps}))
      throw Error("max_pages: expected max_pages * page_size < 2^31 rows, got " + std::to_string(a.max_pages) + " * " +
                  std::to_string(ps));
    S = a.max_pages * ps;
    check_view(a.k, "k", {pages, Hkv, ps, D}, t, s);
    p->k = a.k.data, p->k_sb = s[0], p->k_sh = s[1], p->k_sl = s[2];
    check_view(a.v, "v", {pages, Hkv, ps, Dv}, t, s);
    p->v = a.v.data, p->v_sb = s[0], p->v_sh = s[1], p->v_sl = s[2];
    p->page_table = a.page_table, p->max_pages = int(a.max_pages), p->page_size = int(ps), p->num_pages = int(pages);
    p->page_shift = (ps & (ps - 1)) == 0 ? __builtin_ctzll(uint64_t(ps)) : -1;
  } else {
    Bkv = a.k.shape[0], S = a.k.shape[2];
    if (Bkv != B && Bkv != 1)
      throw Error("k: batch must equal q's batch (" + std::to_string(B) + ") or be 1, got " + std::to_string(Bkv));
    if (S < 1) throw Error("k: the kv length must be at least 1");
    check_view(a.k, "k", {Bkv, Hkv, S, D}, t, s);
    p->k = a.k.data, p->k_sb = s[0], p->k_sh = s[1], p->k_sl = s[2];
    check_view(a.v, "v", {Bkv, Hkv, S, Dv}, t, s);
    p->v = a.v.data, p->v_sb = s[0], p->v_sh = s[1], p->v_sl = s[2];
  }
  if (S >= (int64_t(1) << 31)) throw Error("k: expected a kv length below 2^31, got " + std::to_string(S));
  if (product_exceeds((int64_t(1) << 31) - 1, {B, Hq, L}))
    throw Error("q: expected B * Hq * L < 2^31 rows (32-bit row indices), got shape " + shape_string(a.q.shape));
  check_view(a.out, "out", {B, Hq, L, Dv}, t, s);
  p->out = a.out.data, p->out_sb = s[0], p->out_sh = s[1], p->out_sl = s[2];
  p->lse = a.lse, p->max_score = a.max_score;
  p->B = int(B), p->Hq = int(Hq), p->Hkv = int(Hkv), p->Bkv = int(Bkv);
  p->L = int(L), p->S = int(S), p->D = int(D), p->Dv = int(Dv);
  check(std::isnan(a.scale) || std::isfinite(a.scale), "scale: expected a finite number (NaN = 1/sqrt(D)), got " +
                                                           std::to_string(a.scale));
  p->scale = float(std::isnan(a.scale) ? 1.0 / std::sqrt(double(D)) : a.scale);
  if (a.q_offset < 0 || a.q_offset >= (int64_t(1) << 30) - L) throw Error("q_offset: must be in [0, 2^30 - L)");
  p->kv_lens = a.kv_lens, p->q_offsets = a.q_offsets, p->q_offset = int(a.q_offset);
  set_mask(p, a.block_mask);
  if (a.block_mask && a.q_offsets == nullptr && a.block_mask->nq * a.block_mask->q_block < a.q_offset + L)
    throw Error("block_mask: its " + std::to_string(a.block_mask->nq) + " query blocks do not reach position " +
                std::to_string(a.q_offset + L - 1) + " (build it for the whole cache)");
  if (a.num_splits < 0 || a.num_splits > kern::kDecodeMaxSplits)
    throw Error("num_splits: expected 0 (auto) or 1.." + std::to_string(kern::kDecodeMaxSplits));
}

void launch_decode(const runtime::KernelSet& set, const DecodeFns& f, const DeviceBindings& bindings, AttnParams& p,
                   const Plan& pl, int device, void* stream) {
  runtime::fill_mod_params(set.layout, bindings, false, &p.mod);
  p.pack_heads = pl.pack, p.num_splits = pl.splits;
  const jit::DriverApi& drv = jit::driver();
  const jit::CUstream s = static_cast<jit::CUstream>(stream);
  void* args[] = {&p};
  const kern::DecodeLaunch l =
      kern::decode_launch(p.D, p.Dv, p.B, p.Hq, p.L, pl.pack, pl.splits, runtime::decode_tuning().stages);
  const kern::DecodeLaunchPlan lp = kern::decode_launch_plan(pl.cluster, f.pdl, pl.splits);
  const bool one_pass = p.L == 1 || p.kv_num_blocks == nullptr;
  const bool pages_may_share =
      runtime::decode_pages_may_share(p.page_table != nullptr, runtime::decode_tuning().evict_first);
  p.kv_read_once =
      kern::decode_kv_read_once(pl.pack, p.Hq / p.Hkv, int(l.grid_x), one_pass, p.B, p.Bkv, pages_may_share);
  // FLEXATTN_DECODE_MERGE: the last split of each row tile merges it (kernels/decode/attn_decode.cuh); without
  // counters (a graph capture, no memory) the combine kernel does, as before.
  // (decode_tuning() is read once per process, so the source compiled the merge exactly when it says so.)
  p.split_counters = runtime::decode_tuning().merge && lp.combine && pl.splits <= kern::kDecodeMergeMaxSplits
                         ? runtime::decode_split_counters(device, stream, size_t(l.grid_x) * size_t(l.grid_y))
                         : nullptr;
  // The _tma entry where the set has one and this call's views take TMA (runtime/decode_tma.h); decided here, at the
  // launch, since the plan (per_sm: the fewer of the two entries') does not depend on it.
  jit::CUfunction main = f.main[tile_index(pl.block_m)];
  if (f.main_tma[tile_index(pl.block_m)] != nullptr) {
    std::string why;
    if (runtime::encode_decode_tma_maps(&p, set.key.dtype, runtime::decode_tma_boxes(p.D, p.Dv), &why))
      main = f.main_tma[tile_index(pl.block_m)];
    else if (jit::env_flag("FLEXATTN_JIT_DEBUG"))
      std::fprintf(stderr, "[flexattn decode] the bulk-row ring, not TMA: %s\n", why.c_str());
  }
  jit::CUlaunchAttribute attr{};
  if (runtime::decode_launch_attrs(lp, false, &attr) == 0) {
    jit::cu_check(drv.cuLaunchKernel(main, l.grid_x, l.grid_y, l.grid_z, l.block, 1, 1,
                                     l.smem, s, args, nullptr),
                  "cuLaunchKernel(decode)");
  } else {
    // The splits of a row tile as one cluster (FLEXATTN_DECODE_CLUSTER): the kernel merges them itself.
    jit::CUlaunchConfig cfg{l.grid_x, l.grid_y, l.grid_z, l.block, 1, 1, l.smem, s, &attr, 1};
    jit::cu_check(drv.cuLaunchKernelEx(&cfg, main, args, nullptr),
                  "cuLaunchKernelEx(decode, cluster)");
  }
  if (!lp.combine || p.split_counters != nullptr) return;
  const kern::DecodeLaunch c = kern::decode_combine_launch(p.B, p.Hq, p.L);
  if (runtime::decode_launch_attrs(lp, true, &attr) == 0) {
    jit::cu_check(drv.cuLaunchKernel(f.combine, c.grid_x, c.grid_y, c.grid_z, c.block, 1, 1, c.smem, s, args, nullptr),
                  "cuLaunchKernel(decode combine)");
    return;
  }
  // Programmatic dependent launch (FLEXATTN_DECODE_PDL): the combine's launch overlaps the split
  // kernel's tail; griddepcontrol.wait in the combine orders its reads after the split kernel's writes.
  jit::CUlaunchConfig cfg{c.grid_x, c.grid_y, c.grid_z, c.block, 1, 1, c.smem, s, &attr, 1};
  jit::cu_check(drv.cuLaunchKernelEx(&cfg, f.combine, args, nullptr), "cuLaunchKernelEx(decode combine, PDL)");
}

size_t workspace_bytes_for(const Plan& pl, int dv) {
  return size_t(kern::decode_workspace_floats(pl.rows, dv, pl.splits, pl.cluster)) * 4;
}

void set_workspace(AttnParams* p, const Plan& pl, void* ws) {
  if (workspace_bytes_for(pl, p->Dv) == 0) return;
  p->part_o = static_cast<float*>(ws);
  p->part_ml = p->part_o + size_t(pl.splits) * size_t(pl.rows) * size_t(p->Dv);
}

}  // namespace

namespace {

// set / fns: the call's kernel set and its launch state, for the launch (one lookup of each per call).
Plan plan_of(const DecodeArgs& a, AttnParams* p, const runtime::KernelSet** set = nullptr,
             const DecodeFns** fns = nullptr) {
  check_decode(a, p);
  jit::use_device(a.device);
  const jit::DeviceProps& dev = jit::device_props(a.device);
  const runtime::KernelSet& s = decode_set(*a.variant, a.q.dtype, *p, dev.arch);
  const DecodeFns& f = decode_fns(s, p->D, p->Dv);
  if (set != nullptr) *set = &s;
  if (fns != nullptr) *fns = &f;
  return make_plan(*p, f, dev.sm_count, a.num_splits);
}

}  // namespace

int decode_num_splits(const DecodeArgs& a) {
  AttnParams p{};
  return plan_of(a, &p).splits;
}

size_t decode_workspace_bytes(const DecodeArgs& a) {
  AttnParams p{};
  const Plan pl = plan_of(a, &p);
  return workspace_bytes_for(pl, p.Dv);
}

void cuda_decode(const DecodeArgs& a) {
  AttnParams p{};
  const runtime::KernelSet* set = nullptr;
  const DecodeFns* fns = nullptr;
  const Plan pl = plan_of(a, &p, &set, &fns);
  if (!grid_fits(p, pl))
    throw Error("q: B x (Hq / packed heads) = " + std::to_string(p.B) + " x " + std::to_string(p.Hq / pl.pack) +
                " exceeds the decode grid's 65535 (heads are not packed without GQA or with a per-head block "
                "mask); split the batch");
  const size_t need = workspace_bytes_for(pl, p.Dv);
  if (need > 0 && (a.workspace == nullptr || a.workspace_bytes < need))
    throw Error("workspace: the decode call needs " + std::to_string(need) + " bytes (decode_workspace_bytes), got " +
                std::to_string(a.workspace_bytes));
  if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0) throw Error("workspace: must be 16-byte aligned");
  set_workspace(&p, pl, a.workspace);
  launch_decode(*set, *fns, a.bindings, p, pl, a.device, a.stream);
}

CompileReport compile_decode(const Variant& variant, DType dtype, int head_dim, int value_head_dim,
                             const std::string& arch) {
  runtime::KernelSetKey key{dtype, head_dim, value_head_dim, arch, false, runtime::KernelFamily::decode};
  return runtime::compile_report(runtime::get_kernel_set(variant, key));
}

namespace runtime {

namespace {

// Grow-only split workspace per (device, stream) for the cuda_forward hook, which has no workspace
// argument. A replaced buffer is kept, never freed: a CUDA graph captured earlier may still point at
// it, and freeing would need a device synchronisation. Sizes double, so few buffers are ever retired.
void* hook_workspace(int device, void* stream, size_t bytes) {
  struct Slot {
    std::unique_ptr<jit::DeviceBuffer> live;
    std::vector<std::unique_ptr<jit::DeviceBuffer>> retired;
  };
  static std::mutex mu;
  // Never destroyed: freeing at exit could run after the context is gone (e.g. torch's teardown).
  static auto* pool = new std::map<std::pair<int, void*>, Slot>();
  std::lock_guard<std::mutex> lock(mu);
  Slot& slot = (*pool)[{device, stream}];
  if (slot.live && slot.live->size() >= bytes) return reinterpret_cast<void*>(slot.live->ptr());
  const jit::DriverApi& d = jit::driver();
  int capturing = jit::CU_STREAM_CAPTURE_STATUS_NONE;
  if (d.cuStreamIsCapturing == nullptr ||
      d.cuStreamIsCapturing(static_cast<jit::CUstream>(stream), &capturing) != jit::CUDA_SUCCESS ||
      capturing != jit::CU_STREAM_CAPTURE_STATUS_NONE)
    return nullptr;
  const size_t grown = slot.live ? std::max(bytes, 2 * slot.live->size()) : bytes;
  if (slot.live) slot.retired.push_back(std::move(slot.live));
  slot.live = std::make_unique<jit::DeviceBuffer>(grown);
  return reinterpret_cast<void*>(slot.live->ptr());
}

}  // namespace

int decode_launch_attrs(const kern::DecodeLaunchPlan& plan, bool combine, jit::CUlaunchAttribute* attr) {
  *attr = jit::CUlaunchAttribute{};
  if (!combine && plan.cluster_z > 0) {
    attr->id = jit::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr->value.clusterDim = {1u, 1u, plan.cluster_z};
    return 1;
  }
  if (combine && plan.combine && plan.combine_pdl) {
    *attr = jit::programmatic_launch_attribute();
    return 1;
  }
  return 0;
}

bool decode_forward_requested() { return jit::env_flag("FLEXATTN_DECODE", true); }

bool try_decode_forward(const ForwardArgs& a, kern::AttnParams& p, const std::string& arch) {
  // Offsets: the decode kernels index the block mask by logical positions, ForwardArgs by local rows.
  if (p.q_offset != 0 || p.kv_offset != 0) return false;
  if (p.L > kern::kDecodeMaxRows || !decode_forward_requested()) return false;
  if (p.kv_num_blocks != nullptr && p.kv_block % kern::decode_tile(16, p.D, p.Dv).block_n != 0) return false;
  const runtime::KernelSet& set = decode_set(*a.variant, a.q.dtype, p, arch);
  const DecodeFns& fns = decode_fns(set, p.D, p.Dv);
  Plan pl = make_plan(p, fns, sm_count_of(a.device), 0);
  if (!grid_fits(p, pl)) return false;  // the forward families put B and Hq on separate grid axes
  void* ws = nullptr;
  if (workspace_bytes_for(pl, p.Dv) > 0) {
    ws = hook_workspace(a.device, a.stream, workspace_bytes_for(pl, p.Dv));
    if (ws == nullptr) pl.splits = 1;
  }
  set_workspace(&p, pl, ws);
  launch_decode(set, fns, a.bindings, p, pl, a.device, a.stream);
  return true;
}

}  // namespace runtime

}  // namespace flexattn
