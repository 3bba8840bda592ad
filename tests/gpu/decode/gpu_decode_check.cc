// GPU tier for the decode family (include/flexattn/decode.h): split-KV decode kernels against the CPU
// reference (cpu::decode_forward), contiguous and paged, for the mod corpus x kv lengths x GQA x page
// sizes x per-sequence lengths, with fresh random inputs, poisoned outputs and NaN-poisoned cache rows
// past every sequence's length (a kernel that reads them fails). Also: the cuda_forward short-query
// hook against cpu::forward, and a decode step captured in a CUDA graph and replayed with new lengths.
// Prints a pass/fail table; exit 1 on a failure, 77 without a GPU. Tolerances as gpu_attention_check.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "corpus.h"
#include "gpu/check_util.h"
#include "flexattn/attention.h"
#include "flexattn/block_mask.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/cuda_host.h"
#include "flexattn/decode.h"
#include "flexattn/jit.h"
#include "flexattn/paged.h"
#include "flexattn/reference.h"
#include "jit/device.h"

using namespace flexattn;
using corpus::CorpusEntry;

namespace {

struct Case {
  const CorpusEntry* mod;
  int64_t B, Hq, Hkv, L, S, D;
  DType dtype;
  int page = 0;          // 0 = contiguous
  bool per_seq = false;  // random kv length per sequence (one of them empty when B >= 3)
  int splits = 0;        // 0 = auto
  bool mask_per_head = false;
  bool max_score = true;  // false: the call asks for no max_score (the usual decode call)
};

struct Row {
  std::string label;
  double err_out = 0, err_lse = 0;
  bool ok = true;
  std::string why;
};

HostTensor converted(const HostTensor& t, DType to) {
  HostTensor r(to, t.shape);
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

HostTensor random_tensor(std::vector<int64_t> shape, DType t, uint64_t seed) {
  HostTensor x(DType::F32, shape);
  mods::fill_normal(&x, seed, 1.0);
  return converted(converted(x, t), DType::F32);  // values exactly representable in t
}

using gpu_check::max_abs;
using gpu_check::rel_err;

// --dry: the host side only (inputs, pages, masks, references), with fake device addresses; for
// checking the program itself on a machine without a GPU.
bool g_dry = false;
int g_cluster_merged = 0;  // cases run with several splits and no workspace (the cluster merge)

// Device copies that live until the end of a case.
struct Dev {
  std::vector<std::unique_ptr<jit::DeviceBuffer>> bufs;
  uintptr_t fake = uintptr_t(1) << 40;
  void* put(const void* host, size_t bytes) {
    if (g_dry) return reinterpret_cast<void*>(fake += (bytes + 255) / 256 * 256 + 256);
    bufs.push_back(std::make_unique<jit::DeviceBuffer>(std::max<size_t>(bytes, 16)));
    if (bytes) bufs.back()->upload(host, bytes);
    return reinterpret_cast<void*>(bufs.back()->ptr());
  }
  void* tensor(const HostTensor& t, DType as) {
    const HostTensor c = converted(t, as);
    return put(c.data(), c.bytes.size());
  }
  void* poisoned(size_t bytes) { return put(std::vector<uint8_t>(std::max<size_t>(bytes, 16), 0xff).data(), bytes); }
  const int32_t* ints(const std::vector<int32_t>& v) {
    return v.empty() ? nullptr : static_cast<const int32_t*>(put(v.data(), v.size() * 4));
  }
};

HostTensor download(const void* dev, DType t, const std::vector<int64_t>& shape) {
  HostTensor raw(t, shape);
  jit::cu_check(jit::driver().cuMemcpyDtoH(raw.data(), reinterpret_cast<jit::CUdeviceptr>(dev), raw.bytes.size()),
                "copy to host");
  return converted(raw, DType::F32);
}

TensorView view(void* data, DType t, std::vector<int64_t> shape) {
  TensorView v;
  v.data = data, v.dtype = t, v.shape = std::move(shape);
  return v;
}

DeviceBlockMask upload_mask(Dev& dev, const BlockMask& m) {
  DeviceBlockMask d;
  d.kv_num_blocks = dev.ints(m.kv_num_blocks);
  d.kv_indices = dev.ints(m.kv_indices);
  d.full_kv_num_blocks = m.has_full ? dev.ints(m.full_kv_num_blocks) : nullptr;
  d.full_kv_indices = m.has_full ? dev.ints(m.full_kv_indices) : nullptr;
  d.B = m.B, d.H = m.H, d.nq = m.nq, d.nkv = m.nkv, d.q_len = m.q_len, d.kv_len = m.kv_len;
  d.q_block = m.q_block, d.kv_block = m.kv_block;
  return d;
}

// A problem on the device: q, contiguous or paged K/V with NaN rows past each length, lengths,
// offsets, block mask. The reference sees the clean contiguous K/V.
struct Problem {
  corpus::BuiltVariant built;
  std::unique_ptr<cpu::VariantFns> fns;
  HostTensor q, k, v;
  cpu::DecodeReference ref;
  std::shared_ptr<const BlockMask> mask;
  Dev dev;
  DecodeArgs args;
  DeviceBlockMask dmask;
};

void build_problem(Problem& pb, const Case& c, uint64_t seed) {
  const int64_t B = c.B, S = c.S, D = c.D;
  // Buffers from a fixed seed: the cached block masks below must match the mods of every case.
  pb.built = corpus::build_variant(*c.mod, mods::ProblemShape{B, c.Hq, c.Hkv, S, S, D, D, 7});
  pb.fns = std::make_unique<cpu::VariantFns>(pb.built.variant, pb.built.bindings, 0);
  pb.q = random_tensor({B, c.Hq, c.L, D}, c.dtype, seed * 4 + 1);
  pb.k = random_tensor({B, c.Hkv, S, D}, c.dtype, seed * 4 + 2);
  pb.v = random_tensor({B, c.Hkv, S, D}, c.dtype, seed * 4 + 3);
  std::mt19937 rng{uint32_t(seed)};
  std::vector<int32_t> lens(static_cast<size_t>(B), static_cast<int32_t>(S));
  if (c.per_seq)
    for (int64_t b = 1; b < B; ++b) lens[b] = b == 2 ? 0 : 1 + int32_t(rng() % uint32_t(S));
  pb.ref.kv_lens = lens;
  pb.ref.q_offsets.resize(size_t(B));
  for (int64_t b = 0; b < B; ++b) pb.ref.q_offsets[b] = std::max<int32_t>(0, lens[b] - int32_t(c.L));

  DecodeArgs& a = pb.args;
  a.variant = &pb.built.variant;
  a.bindings.scalars = pb.built.bindings.scalars;
  for (const auto& [name, bv] : pb.built.bindings.buffers) {
    int64_t n = 1;
    for (int64_t s : bv.shape) n *= s;
    ir::BufferView d = bv;
    d.data = pb.dev.put(bv.data, size_t(n) * dtype_size(bv.dtype));
    a.bindings.buffers[name] = d;
  }
  a.q = view(pb.dev.tensor(pb.q, c.dtype), c.dtype, pb.q.shape);
  const HostTensor nan_rows = [&] {
    HostTensor t(DType::F32, {1});
    t.set(0, NAN);
    return t;
  }();
  auto poison_past = [&](HostTensor t) {  // contiguous rows at or past each length become NaN
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < c.Hkv; ++h)
        for (int64_t j = lens[b]; j < S; ++j)
          for (int64_t d = 0; d < D; ++d) t.set(((b * c.Hkv + h) * S + j) * D + d, nan_rows.get(0));
    return t;
  };
  if (c.page == 0) {
    a.k = view(pb.dev.tensor(poison_past(pb.k), c.dtype), c.dtype, pb.k.shape);
    a.v = view(pb.dev.tensor(poison_past(pb.v), c.dtype), c.dtype, pb.v.shape);
  } else {
    const int64_t ps = c.page, maxp = (S + ps - 1) / ps;
    PageAllocator alloc(B * maxp + 3, ps, B, maxp);
    alloc.reserve(B - 1, 1);  // the last sequence takes page 0, so the others start elsewhere
    for (int64_t t = 0; t < S; ++t)
      for (int64_t b = 0; b < B; ++b)
        if (t < lens[b]) alloc.append(b, 1);
    for (const HostTensor* src : {&pb.k, &pb.v}) {
      HostTensor pool(DType::F32, {alloc.num_pages(), c.Hkv, ps, D});
      for (int64_t i = 0; i < pool.numel(); ++i) pool.set(i, NAN);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < lens[b]; ++j)
          for (int64_t h = 0; h < c.Hkv; ++h)
            for (int64_t d = 0; d < D; ++d)
              pool.set(((alloc.physical_page(b, j) * c.Hkv + h) * ps + j % ps) * D + d,
                       src->get(((b * c.Hkv + h) * S + j) * D + d));
      (src == &pb.k ? a.k : a.v) = view(pb.dev.tensor(pool, c.dtype), c.dtype, pool.shape);
    }
    a.page_table = pb.dev.ints(alloc.page_table());
    a.max_pages = maxp;
  }
  a.kv_lens = pb.dev.ints(lens);
  a.q_offsets = pb.dev.ints(pb.ref.q_offsets);
  if (!pb.built.variant.mask_mod.empty()) {  // a mask over the whole cache, in logical positions
    // Shared by the cases of one (mod, B, heads, S): building an S x S mask dominates the host time.
    static std::map<std::string, std::shared_ptr<const BlockMask>> masks;
    const int64_t mh = c.mask_per_head ? c.Hq : 1;
    const std::string key = c.mod->name + "/" + std::to_string(B) + "/" + std::to_string(mh) + "/" + std::to_string(S);
    auto it = masks.find(key);
    if (it == masks.end()) {
      const auto& mm = pb.fns->fns().mask_mod;
      it = masks.emplace(key, std::make_shared<const BlockMask>(build_block_mask(
                                  MaskFn([&](int64_t b, int64_t h, int64_t q, int64_t kv) { return mm(b, h, q, kv); }),
                                  B, mh, S, S)))
               .first;
    }
    pb.mask = it->second;
    pb.dmask = upload_mask(pb.dev, *pb.mask);
    a.block_mask = &pb.dmask;
  }
  a.num_splits = c.splits;
  a.out = view(pb.dev.poisoned(size_t(B * c.Hq * c.L * D) * 2), c.dtype, {B, c.Hq, c.L, D});
  a.lse = static_cast<float*>(pb.dev.poisoned(size_t(B * c.Hq * c.L) * 4));
  a.max_score = c.max_score ? static_cast<float*>(pb.dev.poisoned(size_t(B * c.Hq * c.L) * 4)) : nullptr;
  a.workspace_bytes = g_dry ? 0 : decode_workspace_bytes(a);
  a.workspace = a.workspace_bytes ? pb.dev.poisoned(a.workspace_bytes) : nullptr;
}

void compare(Row& row, const Problem& pb, DType t, const cpu::ForwardResult& ref) {
  const std::vector<int64_t> rows{pb.q.shape[0], pb.q.shape[1], pb.q.shape[2]};
  const HostTensor out = download(pb.args.out.data, t, pb.args.out.shape);
  const HostTensor lse = download(pb.args.lse, DType::F32, rows);
  const double p_err = t == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
  row.err_out = std::max(row.err_out, rel_err(out, ref.out, max_abs(ref.out)));
  row.err_lse = std::max(row.err_lse, rel_err(lse, ref.lse, 1.0));
  if (!(row.err_out <= 4 * p_err)) row.ok = false, row.why += " out";
  if (!(row.err_lse <= 1e-3)) row.ok = false, row.why += " lse";
  if (pb.args.max_score != nullptr &&
      !(rel_err(download(pb.args.max_score, DType::F32, rows), ref.max_score, 1.0) <= 1e-3))
    row.ok = false, row.why += " max";
}

Row run_case(const Case& c, uint64_t seed) {
  Row row;
  char label[200];
  std::snprintf(label, sizeof label, "%-20s %-4s B=%lld L=%-2lld S=%-4lld D=%-3lld G=%lld page=%-3d%s%s%s%s",
                c.mod->name.c_str(), c.dtype == DType::BF16 ? "bf16" : "f16", (long long)c.B, (long long)c.L,
                (long long)c.S, (long long)c.D, (long long)(c.Hq / c.Hkv), c.page, c.per_seq ? " lens" : "",
                c.splits ? (" splits=" + std::to_string(c.splits)).c_str() : "", c.mask_per_head ? " maskH" : "",
                c.max_score ? "" : " nomax");
  row.label = label;
  try {
    Problem pb;
    build_problem(pb, c, seed);
    const cpu::ForwardResult ref = cpu::decode_forward(pb.q, pb.k, pb.v, pb.ref, pb.fns->fns());
    if (g_dry) return row;
    // Several splits and no workspace: merged inside a cluster (FLEXATTN_DECODE_CLUSTER=1).
    if (pb.args.workspace_bytes == 0 && decode_num_splits(pb.args) > 1) ++g_cluster_merged;
    cuda_decode(pb.args);
    jit::device_synchronize();
    compare(row, pb, c.dtype, ref);
  } catch (const std::exception& e) {
    row.ok = false, row.why = std::string(" error: ") + e.what();
  }
  return row;
}

// The cuda_forward hook: a plain short-query forward (positions from 0, one length) must route to the
// decode kernels and match the ordinary reference, block mask included.
Row run_hook_case(const CorpusEntry& mod, int64_t L, int64_t S, int64_t G, DType t, uint64_t seed) {
  Row row;
  row.label = "cuda_forward hook " + mod.name + " L=" + std::to_string(L) + " S=" + std::to_string(S) +
              " G=" + std::to_string(G);
  try {
    const int64_t B = 2, Hq = 8, Hkv = Hq / G, D = 128;
    corpus::BuiltVariant built = corpus::build_variant(mod, mods::ProblemShape{B, Hq, Hkv, L, S, D, D, seed});
    cpu::VariantFns fns(built.variant, built.bindings, 0);
    const HostTensor q = random_tensor({B, Hq, L, D}, t, seed * 4 + 1), k = random_tensor({B, Hkv, S, D}, t, seed * 4 + 2),
                     v = random_tensor({B, Hkv, S, D}, t, seed * 4 + 3);
    std::unique_ptr<BlockMask> bm;
    if (!built.variant.mask_mod.empty()) {
      const auto& mm = fns.fns().mask_mod;
      bm = std::make_unique<BlockMask>(build_block_mask(
          MaskFn([&](int64_t b, int64_t h, int64_t qq, int64_t kv) { return mm(b, h, qq, kv); }), B, 1, L, S));
    }
    cpu::Options opt;
    opt.block_mask = bm.get();
    const cpu::ForwardResult ref = cpu::forward(q, k, v, fns.fns(), opt);
    CudaHostRequest req;
    req.variant = &built.variant, req.bindings = &built.bindings;
    req.q = &q, req.k = &k, req.v = &v, req.dtype = t, req.block_mask = bm.get();
    const CudaHostResult got = cuda_run_host(req);
    const double p_err = t == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
    row.err_out = rel_err(got.out, ref.out, max_abs(ref.out));
    row.err_lse = rel_err(got.lse, ref.lse, 1.0);
    if (!(row.err_out <= 4 * p_err)) row.ok = false, row.why += " out";
    if (!(row.err_lse <= 1e-3)) row.ok = false, row.why += " lse";
  } catch (const std::exception& e) {
    row.ok = false, row.why = std::string(" error: ") + e.what();
  }
  return row;
}

// One decode step captured in a CUDA graph, replayed while the lengths and positions (device memory)
// advance: every replay must match the reference for the new lengths, with nothing recompiled.
Row run_graph_case(const CorpusEntry& mod, int page) {
  Row row;
  row.label = "cuda graph replay " + mod.name + " page=" + std::to_string(page);
  const jit::DriverApi& d = jit::driver();
  if (!d.cuStreamBeginCapture || !d.cuStreamEndCapture || !d.cuGraphInstantiateWithFlags || !d.cuGraphLaunch) {
    row.why = " skipped: the driver lacks the graph API";
    return row;
  }
  try {
    const Case c{&mod, 3, 16, 4, 1, 1000, 128, DType::BF16, page, true, 0, false};
    Problem pb;
    build_problem(pb, c, 99);
    jit::Stream stream;
    pb.args.stream = stream.get();
    cuda_decode(pb.args);  // compiles and loads outside the capture
    stream.synchronize();
    const int64_t compiles = jit::jit_stats().compiles;
    jit::CUgraph graph = nullptr;
    jit::CUgraphExec exec = nullptr;
    jit::cu_check(d.cuStreamBeginCapture(stream.get(), jit::CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    cuda_decode(pb.args);
    jit::cu_check(d.cuStreamEndCapture(stream.get(), &graph), "cuStreamEndCapture");
    jit::cu_check(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    for (int step = 0; step < 3; ++step) {
      // Lengths only shrink: device rows past the first lengths are NaN, and must stay unread.
      for (int32_t& l : pb.ref.kv_lens) l = std::max<int32_t>(0, l - 50 * (step + 1));
      for (size_t b = 0; b < pb.ref.kv_lens.size(); ++b) pb.ref.q_offsets[b] = std::max(0, pb.ref.kv_lens[b] - 1);
      jit::cu_check(d.cuMemcpyHtoD(reinterpret_cast<jit::CUdeviceptr>(pb.args.kv_lens), pb.ref.kv_lens.data(),
                                   pb.ref.kv_lens.size() * 4), "upload lens");
      jit::cu_check(d.cuMemcpyHtoD(reinterpret_cast<jit::CUdeviceptr>(pb.args.q_offsets), pb.ref.q_offsets.data(),
                                   pb.ref.q_offsets.size() * 4), "upload offsets");
      jit::cu_check(d.cuMemsetD8(reinterpret_cast<jit::CUdeviceptr>(pb.args.out.data), 0xff,
                                 size_t(3 * 16 * 128) * 2), "poison out");
      jit::cu_check(d.cuGraphLaunch(exec, stream.get()), "cuGraphLaunch");
      stream.synchronize();
      compare(row, pb, c.dtype, cpu::decode_forward(pb.q, pb.k, pb.v, pb.ref, pb.fns->fns()));
    }
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(graph);
    if (jit::jit_stats().compiles != compiles) row.ok = false, row.why += " recompiled";
  } catch (const std::exception& e) {
    row.ok = false, row.why = std::string(" error: ") + e.what();
  }
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    g_dry = g_dry || std::strcmp(argv[i], "--dry") == 0;
  }
  std::string why;
  if (!g_dry && !cuda_available(&why)) {
    std::printf("SKIP: cuda backend unavailable: %s\n", why.c_str());
    return 77;
  }
  // The cases allocate device buffers before their first flexattn call: make device 0's context current
  // on this thread first (without it every allocation failed with CUDA_ERROR_INVALID_CONTEXT on the H200).
  if (!g_dry) jit::use_device(0);
  const auto& e = [](const char* n) -> const CorpusEntry& { return corpus::corpus_entry(n); };
  std::vector<Case> cases;
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{17, 1000} : std::vector<int64_t>{1, 17, 127, 129, 1000, 4097};
  for (int64_t S : lengths)
    for (int64_t G : {1, 4, 8})
      for (int page : {0, 1, 16, 128}) {
        if (quick && page == 1 && S > 100) continue;
        cases.push_back({&e("full"), 2, 8, 8 / G, 1, S, 128, DType::BF16, page, false});
        cases.push_back({&e("causal"), 3, 8, 8 / G, G == 8 ? 4 : 1, S, 128, DType::BF16, page, true});
      }
  for (const char* m : {"sliding_window:100", "document:3", "softcap:30+causal", "alibi+causal", "text:mixed"})
    for (int page : {0, 16})
      for (int64_t S : quick ? std::vector<int64_t>{1000} : std::vector<int64_t>{129, 1000, 4097})
        cases.push_back({&e(m), 3, 8, 2, 1, S, 128, DType::BF16, page, true});
  // Several query rows (speculative decoding), straddling mask rows, head dims, f16, forced splits,
  // per-head masks (no head packing).
  cases.push_back({&e("causal"), 2, 8, 2, 16, 1000, 128, DType::BF16, 16, true});
  cases.push_back({&e("causal"), 2, 4, 1, 64, 300, 64, DType::F16, 0, true});
  cases.push_back({&e("sliding_window:100"), 3, 8, 1, 7, 4097, 64, DType::BF16, 128, true});
  cases.push_back({&e("causal"), 3, 8, 2, 1, 1000, 256, DType::BF16, 16, true});
  // Contiguous caches at D = 256 (32-row tiles): the case the decode TMA ring needs before it takes D = 256
  // (decode_config.h, decode_tma_dims); with forced splits, a split's rows end mid-tile.
  cases.push_back({&e("causal"), 3, 8, 2, 1, 1000, 256, DType::BF16, 0, true});
  cases.push_back({&e("full"), 3, 8, 2, 1, 4097, 256, DType::BF16, 0, true, 5});
  // One sequence's pages: the paged launch that reads each K / V byte once (kern::decode_kv_read_once), where
  // FLEXATTN_DECODE_EVICT_FIRST gives its bulk rows the evict_first policy.
  cases.push_back({&e("causal"), 1, 8, 2, 1, 4097, 128, DType::BF16, 16, false});
  cases.push_back({&e("softcap:30+causal"), 3, 8, 2, 1, 1000, 64, DType::F16, 0, true});
  // 2..8: the cluster sizes of FLEXATTN_DECODE_CLUSTER=1 (8 over 3 kv tiles: five empty splits per row).
  for (int splits : {1, 2, 5, 7, 8, 128})
    cases.push_back({&e("causal"), 3, 8, 2, 1, 4097, 128, DType::BF16, 16, true, splits});
  cases.push_back({&e("causal"), 3, 8, 2, 1, 129, 128, DType::BF16, 0, true, 8});
  // Forced splits without a block mask (FLEXATTN_DECODE_ROW_SPLIT=1 splits these by rows: a split's first and last
  // tiles start and end off the 64-row grid, so a tile may straddle pages, of 100 rows too; 8 splits of 129 rows are
  // 17 rows each), per-sequence lengths.
  for (int splits : {2, 5, 7, 8, 128})
    for (const char* m : {"full", "alibi"}) {
      cases.push_back({&e(m), 3, 8, 2, 1, splits == 8 ? 129 : 4097, 128, DType::BF16, 0, true, splits});
      if (splits == 5 || splits == 128) cases.push_back({&e(m), 3, 8, 2, 1, 1000, 128, DType::BF16, 16, true, splits});
      if (splits == 7) cases.push_back({&e(m), 3, 8, 2, 1, 1000, 128, DType::BF16, 100, true, splits});  // pages of 100
    }
  cases.push_back({&e("document:3"), 3, 8, 2, 3, 1000, 128, DType::BF16, 16, true, 0, true});

  // Compile every decode kernel set first, in parallel (NVRTC is single-threaded, a set takes seconds).
  if (!g_dry) {
    std::map<std::string, std::pair<const CorpusEntry*, std::pair<DType, int64_t>>> sets;
    for (const Case& c : cases) sets[c.mod->name + std::to_string(int(c.dtype)) + "/" + std::to_string(c.D)] = {c.mod, {c.dtype, c.D}};
    for (const char* m : {"full", "causal", "sliding_window:100", "softcap:30+causal"})
      sets[std::string(m) + std::to_string(int(DType::BF16)) + "/128"] = {&e(m), {DType::BF16, 128}};
    std::vector<std::pair<const CorpusEntry*, std::pair<DType, int64_t>>> jobs;
    for (const auto& [k, v] : sets) jobs.push_back(v);
    const std::string arch = cuda_device_arch(0);
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::min(16u, std::thread::hardware_concurrency())); ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
          try {
            corpus::BuiltVariant b = corpus::build_variant(*jobs[i].first, mods::ProblemShape{1, 8, 2, 64, 64, 128, 128, 7});
            compile_decode(b.variant, jobs[i].second.first, int(jobs[i].second.second), int(jobs[i].second.second), arch);
          } catch (const std::exception& ex) {
            std::fprintf(stderr, "prewarm %s: %s\n", jobs[i].first->name.c_str(), ex.what());
          }
        }
      });
    for (auto& t : pool) t.join();
    std::fprintf(stderr, "prewarmed %zu decode kernel sets\n", jobs.size());
  }

  std::vector<Row> rows;
  uint64_t seed = 1;
  auto done = [&](Row r) {
    std::fprintf(stderr, "%s %s%s\n", r.ok ? "PASS" : "FAIL", r.label.c_str(), r.why.c_str());
    rows.push_back(std::move(r));
  };
  // Every third pair of cases without max_score (the usual decode call asks for none; both forms must match the
  // reference). Pairs, because the grid adds full and causal together; a third, so that the skip rotates through
  // the grid's four page sizes (contiguous included) instead of always landing on the same two.
  for (size_t i = 0; i < cases.size(); ++i) cases[i].max_score = (i / 2) % 3 != 2;
  for (const Case& c : cases) done(run_case(c, seed++));
  if (!g_dry) {
    for (const char* m : {"full", "causal", "sliding_window:100", "softcap:30+causal"})
      for (int64_t L : {1, 17, 64})
        for (int64_t G : {1, 4})
          done(run_hook_case(e(m), L, quick ? 300 : 1000, G, DType::BF16, seed++));
    for (int page : {0, 16}) done(run_graph_case(e("causal"), page));
  }

  int failed = 0;
  std::printf("%-86s %9s %9s  %s\n", "case", "out", "lse", "result");
  for (const Row& r : rows) {
    failed += r.ok ? 0 : 1;
    std::printf("%-86s %9.2e %9.2e  %s%s\n", r.label.c_str(), r.err_out, r.err_lse, r.ok ? "PASS" : "FAIL",
                r.why.c_str());
  }
  std::printf("\ncases with several splits merged in a cluster (no workspace): %d\n", g_cluster_merged);
  std::printf("%zu cases, %d failed\n", rows.size(), failed);
  return failed ? 1 : 0;
}
