// Block-mask lab: builds BlockMasks on the GPU with kernels/common/block_mask_build.cuh and compares
// every output array bit for bit against the CPU builder of src/block_mask (flexattn::build_block_mask,
// evaluating the same __host__ __device__ mask), then times the long-sequence cases of the issue.
//   bm_lab [check|time|all]   (default all)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/block_mask_build.cuh"
#include "flexattn/block_mask.h"
#include "variants.cuh"

using flexattn::kern::BlockMaskBuildParams;
using flexattn::kern::ModParams;

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

template <class V>
__global__ void __launch_bounds__(flexattn::kern::kBmThreads, flexattn::kern::kBmMinBlocks) classify_k(const __grid_constant__ BlockMaskBuildParams p) {
  flexattn::kern::block_mask_classify<V>(p);
}
__global__ void __launch_bounds__(flexattn::kern::kBmThreads) compact_k(const __grid_constant__ BlockMaskBuildParams p) {
  flexattn::kern::block_mask_compact(p);
}

struct Geometry {
  int B = 1, H = 1, q_len = 1, kv_len = 1, q_block = 128, kv_block = 128;
};

// Device result, all arrays in one allocation.
struct GpuMask {
  Geometry g;
  long long nq = 0, nkv = 0;
  void* mem = nullptr;
  BlockMaskBuildParams p{};
  ~GpuMask() { cudaFree(mem); }
};

static int g_sm_count = 0;

template <class V>
void gpu_build(GpuMask& out, const Geometry& g, const ModParams& mod, float* ms_classify = nullptr,
               float* ms_compact = nullptr) {
  out.g = g;
  out.nq = (g.q_len + g.q_block - 1) / g.q_block;
  out.nkv = (g.kv_len + g.kv_block - 1) / g.kv_block;
  const long long bh = (long long)g.B * g.H, tiles = bh * out.nq * out.nkv;
  const long long rows = bh * out.nq, cols = bh * out.nkv;
  // Ten arrays, each rounded up to 16 bytes by take().
  const size_t bytes = size_t(2 * tiles) + size_t(4 * (2 * rows + 2 * tiles + 2 * cols + 2 * tiles)) + 10 * 16;
  if (!out.mem) CK(cudaMalloc(&out.mem, bytes));
  char* m = (char*)out.mem;
  auto take = [&](size_t n) { char* r = m; m += (n + 15) / 16 * 16; return r; };
  BlockMaskBuildParams& p = out.p;
  p.mod = mod;
  p.kv_num_blocks = (int*)take(4 * rows);
  p.full_kv_num_blocks = (int*)take(4 * rows);
  p.q_num_blocks = (int*)take(4 * cols);
  p.full_q_num_blocks = (int*)take(4 * cols);
  p.kv_indices = (int*)take(4 * tiles);
  p.full_kv_indices = (int*)take(4 * tiles);
  p.q_indices = (int*)take(4 * tiles);
  p.full_q_indices = (int*)take(4 * tiles);
  p.cls_rows = (unsigned char*)take(tiles);
  p.cls_cols = (unsigned char*)take(tiles);
  p.num_tiles = tiles;
  p.B = g.B, p.H = g.H, p.q_len = g.q_len, p.kv_len = g.kv_len, p.q_block = g.q_block, p.kv_block = g.kv_block;
  p.nq = int(out.nq), p.nkv = int(out.nkv);
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, classify_k<V>, flexattn::kern::kBmThreads, 0));
  const long long warps_per_cta = flexattn::kern::kBmThreads / 32;
  const long long grid1 = std::min<long long>((tiles + warps_per_cta - 1) / warps_per_cta, (long long)g_sm_count * occ);
  const long long grid2 = std::min<long long>((rows + cols + warps_per_cta - 1) / warps_per_cta, g_sm_count * 8ll);
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  CK(cudaEventRecord(e0));
  classify_k<V><<<unsigned(grid1), flexattn::kern::kBmThreads>>>(p);
  CK(cudaGetLastError());
  CK(cudaEventRecord(e1));
  compact_k<<<unsigned(grid2), flexattn::kern::kBmThreads>>>(p);
  CK(cudaGetLastError());
  CK(cudaEventRecord(e2));
  CK(cudaEventSynchronize(e2));
  if (ms_classify) CK(cudaEventElapsedTime(ms_classify, e0, e1));
  if (ms_compact) CK(cudaEventElapsedTime(ms_compact, e1, e2));
  cudaEventDestroy(e0), cudaEventDestroy(e1), cudaEventDestroy(e2);
}

static std::vector<int32_t> dl(const int* d, long long n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  CK(cudaMemcpy(v.data(), d, size_t(n) * 4, cudaMemcpyDeviceToHost));
  return v;
}

flexattn::BlockMask download(const GpuMask& m) {
  flexattn::BlockMask bm;
  bm.B = m.g.B, bm.H = m.g.H, bm.q_len = m.g.q_len, bm.kv_len = m.g.kv_len;
  bm.q_block = m.g.q_block, bm.kv_block = m.g.kv_block, bm.nq = m.nq, bm.nkv = m.nkv, bm.has_full = true;
  const long long bh = (long long)m.g.B * m.g.H, rows = bh * m.nq, cols = bh * m.nkv, tiles = rows * m.nkv;
  bm.kv_num_blocks = dl(m.p.kv_num_blocks, rows);
  bm.kv_indices = dl(m.p.kv_indices, tiles);
  bm.full_kv_num_blocks = dl(m.p.full_kv_num_blocks, rows);
  bm.full_kv_indices = dl(m.p.full_kv_indices, tiles);
  bm.q_num_blocks = dl(m.p.q_num_blocks, cols);
  bm.q_indices = dl(m.p.q_indices, tiles);
  bm.full_q_num_blocks = dl(m.p.full_q_num_blocks, cols);
  bm.full_q_indices = dl(m.p.full_q_indices, tiles);
  return bm;
}

// ---- correctness --------------------------------------------------------------------------------

struct Mods {
  ModParams host{}, dev{};
  std::vector<int> doc_host;
  int* doc_dev = nullptr;
};

// doc_ids of length n: documents of pseudo-random lengths 1..3*mean (not block aligned).
static void make_docs(Mods& mods, int n, int mean) {
  mods.doc_host.assign(size_t(n), 0);
  unsigned s = 12345u;
  int doc = 0, left = 1;
  for (int i = 0; i < n; ++i) {
    if (--left == 0) {
      s = s * 1664525u + 1013904223u;
      left = 1 + int((s >> 8) % unsigned(3 * mean));
      ++doc;
    }
    mods.doc_host[size_t(i)] = doc;
  }
  if (mods.doc_dev) cudaFree(mods.doc_dev);
  CK(cudaMalloc(&mods.doc_dev, size_t(n) * 4));
  CK(cudaMemcpy(mods.doc_dev, mods.doc_host.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
  mods.host.buf[0] = mods.doc_host.data();
  mods.dev.buf[0] = mods.doc_dev;
  mods.host.buf_shape[0][0] = mods.dev.buf_shape[0][0] = n;
}

static int g_fail = 0, g_pass = 0;

template <class V>
void check_case(const Geometry& g, const Mods& mods) {
  GpuMask gm;
  gpu_build<V>(gm, g, mods.dev);
  const flexattn::BlockMask got = download(gm);
  const ModParams& hp = mods.host;
  const flexattn::BlockMask want = flexattn::build_block_mask(
      flexattn::MaskFn([&hp](int64_t b, int64_t h, int64_t q, int64_t kv) {
        return V::mask_mod(hp, int(b), int(h), int(q), int(kv));
      }),
      g.B, g.H, g.q_len, g.kv_len, g.q_block, g.kv_block, 0);
  const char* bad = nullptr;
  if (got.kv_num_blocks != want.kv_num_blocks) bad = "kv_num_blocks";
  else if (got.kv_indices != want.kv_indices) bad = "kv_indices";
  else if (got.full_kv_num_blocks != want.full_kv_num_blocks) bad = "full_kv_num_blocks";
  else if (got.full_kv_indices != want.full_kv_indices) bad = "full_kv_indices";
  else if (got.q_num_blocks != want.q_num_blocks) bad = "q_num_blocks";
  else if (got.q_indices != want.q_indices) bad = "q_indices";
  else if (got.full_q_num_blocks != want.full_q_num_blocks) bad = "full_q_num_blocks";
  else if (got.full_q_indices != want.full_q_indices) bad = "full_q_indices";
  if (bad) {
    ++g_fail;
    std::printf("FAIL %s B=%d H=%d L=%d S=%d QB=%d KVB=%d: %s differs\n", V::kName, g.B, g.H, g.q_len, g.kv_len,
                g.q_block, g.kv_block, bad);
  } else {
    try {
      flexattn::validate(got);
      ++g_pass;
    } catch (const std::exception& e) {
      ++g_fail;
      std::printf("FAIL validate %s: %s\n", V::kName, e.what());
    }
  }
}

static void run_checks() {
  const int lens[] = {1, 17, 127, 128, 129, 1000, 4097};
  const int blocks[][2] = {{64, 64}, {128, 128}, {64, 128}, {128, 64}, {16, 48}, {100, 37}, {256, 128}};
  Mods mods;
  make_docs(mods, 4097, 300);
  mods.host.lit[0] = mods.dev.lit[0] = 200;  // window / prefix
  for (auto& bl : blocks) {
    for (int L : lens) {
      for (int S : lens) {
        Geometry g{1, 1, L, S, bl[0], bl[1]};
        check_case<lab::Causal>(g, mods);
        check_case<lab::SlidingWindow>(g, mods);
        check_case<lab::PrefixLm>(g, mods);
        check_case<lab::Document>(g, mods);
        check_case<lab::Full>(g, mods);
      }
    }
  }
  // b/h-dependent masks with broadcast shapes and multi-(b, h).
  Mods hc = mods;
  hc.host.lit[0] = hc.dev.lit[0] = 64;
  hc.host.lit[1] = hc.dev.lit[1] = 32;
  hc.host.lit[2] = hc.dev.lit[2] = 100;
  const int bhs[][2] = {{1, 1}, {2, 1}, {1, 3}, {2, 3}};
  for (auto& bh : bhs)
    for (auto& bl : blocks)
      for (int L : {17, 129, 1000})
        for (int S : {127, 1000, 4097}) {
          Geometry g{bh[0], bh[1], L, S, bl[0], bl[1]};
          check_case<lab::HeadChunk>(g, hc);
          check_case<lab::Sparse>(g, hc);
          check_case<lab::DocumentCausal>(g, mods);
        }
  std::printf("check: %d passed, %d failed\n", g_pass, g_fail);
}

// ---- timing -------------------------------------------------------------------------------------

// Tile class expected for the analytic masks at block-aligned documents (no CPU build at 131072).
template <class V>
void time_case(const char* label, const Geometry& g, const ModParams& mod, int reps,
               bool (*expect_ok)(const flexattn::BlockMask&)) {
  GpuMask gm;
  float c = 0, k = 0;
  gpu_build<V>(gm, g, mod, &c, &k);  // warm-up
  std::vector<float> cl, co, tot;
  for (int i = 0; i < reps; ++i) {
    gpu_build<V>(gm, g, mod, &c, &k);
    cl.push_back(c), co.push_back(k), tot.push_back(c + k);
  }
  std::sort(cl.begin(), cl.end()), std::sort(co.begin(), co.end()), std::sort(tot.begin(), tot.end());
  const flexattn::BlockMask bm = download(gm);
  const bool ok = expect_ok ? expect_ok(bm) : true;
  const auto st = flexattn::block_mask_stats(bm);
  const double evals = double(g.B) * g.H * double(g.q_len) * double(g.kv_len);
  std::printf("%-28s B=%d H=%d L=S=%d blk=%dx%d: classify %.3f ms, compact %.3f ms, total %.3f ms (min %.3f)"
              "  [%.1f G mask evals/ms upper bound]  tiles partial=%lld full=%lld skipped=%lld %s\n",
              label, g.B, g.H, g.q_len, g.q_block, g.kv_block, cl[cl.size() / 2], co[co.size() / 2],
              tot[tot.size() / 2], tot[0], evals / 1e9 / cl[cl.size() / 2], (long long)st.partial,
              (long long)st.full, (long long)st.skipped, ok ? "OK" : "WRONG");
  if (!ok) ++g_fail;
}

static bool causal_ok(const flexattn::BlockMask& bm) {
  for (long long i = 0; i < bm.nq; ++i) {
    if (bm.kv_num_blocks[i] != 1 || bm.kv_indices[i * bm.nkv] != i) return false;
    if (bm.full_kv_num_blocks[i] != i) return false;
    for (long long j = 0; j < i; ++j)
      if (bm.full_kv_indices[i * bm.nkv + j] != j) return false;
  }
  return true;
}
static bool doc16_ok(const flexattn::BlockMask& bm) {  // 16 block-aligned documents, not causal
  const long long per = bm.nq / 16;
  for (long long i = 0; i < bm.nq; ++i) {
    if (bm.kv_num_blocks[i] != 0 || bm.full_kv_num_blocks[i] != per) return false;
    if (bm.full_kv_indices[i * bm.nkv] != i / per * per) return false;
  }
  return true;
}

// 16 equal documents of S / 16 tokens (block aligned for the lengths timed here).
static int* make_doc16(ModParams& mod, int S) {
  std::vector<int> doc(static_cast<size_t>(S));
  for (int i = 0; i < S; ++i) doc[size_t(i)] = i / (S / 16);
  int* d = nullptr;
  CK(cudaMalloc(&d, size_t(S) * 4));
  CK(cudaMemcpy(d, doc.data(), size_t(S) * 4, cudaMemcpyHostToDevice));
  mod.buf[0] = d;
  mod.buf_shape[0][0] = S;
  return d;
}

static void run_timing() {
  const int reps = 7;
  for (int S : {8192, 32768, 131072}) {
    ModParams mod{};
    int* d = make_doc16(mod, S);
    mod.lit[0] = 1024;
    time_case<lab::Causal>("causal", {1, 1, S, S, 128, 128}, mod, reps, causal_ok);
    time_case<lab::Document>("document (16 docs)", {1, 1, S, S, 128, 128}, mod, reps, doc16_ok);
    if (S == 131072) {
      time_case<lab::DocumentCausal>("document+causal (16 docs)", {1, 1, S, S, 128, 128}, mod, reps, nullptr);
      time_case<lab::SlidingWindow>("sliding window 1024", {1, 1, S, S, 128, 128}, mod, reps, nullptr);
      time_case<lab::PrefixLm>("prefix-lm 1024", {1, 1, S, S, 128, 128}, mod, reps, nullptr);
      time_case<lab::Full>("full", {1, 1, S, S, 128, 128}, mod, reps, nullptr);
      time_case<lab::Causal>("causal", {1, 1, S, S, 64, 64}, mod, reps, causal_ok);
      time_case<lab::Document>("document (16 docs)", {1, 1, S, S, 64, 64}, mod, reps, doc16_ok);
    }
    cudaFree(d);
  }
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sm_count = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs\n", prop.name, g_sm_count);
  const auto t0 = std::chrono::steady_clock::now();
  if (what == "check" || what == "all") run_checks();
  if (what == "time" || what == "all") run_timing();
  std::printf("wall %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return g_fail == 0 ? 0 : 1;
}
