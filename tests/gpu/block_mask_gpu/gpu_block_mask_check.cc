// GPU tier: build_block_mask_gpu (the JIT-compiled builder) against the CPU build_block_mask
// evaluating the same mod with the IR interpreter, every array compared exactly, for the corpus masks
// and a b/h-dependent mask, over lengths x block sizes x broadcast shapes. `--time` also times the
// issue's long-sequence cases (S = 131072, block 128). A plain program (the GPU machine may lack
// GoogleTest); exits non-zero on any failure, 77 (ctest's skip code) without a GPU.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "corpus.h"
#include "flexattn/attention.h"
#include "flexattn/block_mask.h"
#include "flexattn/block_mask_gpu.h"
#include "flexattn/error.h"
#include "flexattn/ir_text.h"
#include "flexattn/mods.h"
#include "jit/device.h"

using namespace flexattn;

namespace {

struct MaskCase {
  std::string name;
  ir::Expr mask;
  ModBindings bindings;
  std::vector<std::unique_ptr<HostTensor>> storage;
};

MaskCase from_corpus(const std::string& spec, int64_t len) {
  MaskCase c;
  c.name = spec;
  mods::ModSpec m = mods::lookup_mask(spec);
  c.mask = m.expr;
  mods::ProblemShape shape{1, 1, 1, len, len, 16, 16, 7};
  for (const auto& b : m.buffers) {
    c.storage.push_back(std::make_unique<HostTensor>(b.make(shape)));
    const HostTensor& t = *c.storage.back();
    c.bindings.buffers[b.name] = ir::BufferView{t.dtype, t.shape, t.data()};
  }
  for (const auto& s : m.scalars) c.bindings.scalars[s.name] = s.value(shape);
  return c;
}

BlockMask cpu_build(const MaskCase& c, int64_t B, int64_t H, int64_t L, int64_t S, int qb, int kb) {
  ir::EvalEnv env;
  env.scalar = [&c](const std::string& n) { return c.bindings.scalars.at(n); };
  env.buffer = [&c](const std::string& n) -> const ir::BufferView* {
    auto it = c.bindings.buffers.find(n);
    return it == c.bindings.buffers.end() ? nullptr : &it->second;
  };
  // An Evaluator is single-threaded: one per row call.
  MaskRowFn row = [&](int64_t b, int64_t h, int64_t q, int64_t k0, int64_t k1, uint8_t* out) {
    ir::Evaluator ev(c.mask);
    ev.bind(env);
    for (int64_t kv = k0; kv < k1; ++kv) out[kv - k0] = ev.run(0.0, b, h, q, kv).as_bool();
  };
  return build_block_mask(row, B, H, L, S, qb, kb);
}

const char* first_difference(const BlockMask& a, const BlockMask& b) {
  if (a.kv_num_blocks != b.kv_num_blocks) return "kv_num_blocks";
  if (a.kv_indices != b.kv_indices) return "kv_indices";
  if (a.full_kv_num_blocks != b.full_kv_num_blocks) return "full_kv_num_blocks";
  if (a.full_kv_indices != b.full_kv_indices) return "full_kv_indices";
  if (a.q_num_blocks != b.q_num_blocks) return "q_num_blocks";
  if (a.q_indices != b.q_indices) return "q_indices";
  if (a.full_q_num_blocks != b.full_q_num_blocks) return "full_q_num_blocks";
  if (a.full_q_indices != b.full_q_indices) return "full_q_indices";
  if (a.nq != b.nq || a.nkv != b.nkv || a.has_full != b.has_full) return "geometry";
  return nullptr;
}

int g_pass = 0, g_fail = 0;

void check(const MaskCase& c, int64_t B, int64_t H, int64_t L, int64_t S, int qb, int kb) {
  const BlockMask want = cpu_build(c, B, H, L, S, qb, kb);
  const BlockMask got = build_block_mask_gpu_host(c.mask, c.bindings, B, H, L, S, qb, kb);
  const char* bad = first_difference(got, want);
  if (bad) {
    ++g_fail;
    std::printf("FAIL %s B=%lld H=%lld L=%lld S=%lld block=%dx%d: %s differs\n", c.name.c_str(), (long long)B,
                (long long)H, (long long)L, (long long)S, qb, kb, bad);
  } else {
    ++g_pass;
  }
}

void run_checks(bool quick) {
  const std::vector<int64_t> lens = quick ? std::vector<int64_t>{1, 129, 1000} : std::vector<int64_t>{1, 17, 128, 129, 1000, 2053};
  const int blocks[][2] = {{128, 128}, {64, 64}, {64, 128}, {128, 64}, {16, 48}};
  const int64_t max_len = 2053;
  std::vector<MaskCase> cases;
  for (const char* spec : {"full", "causal", "sliding_window:100", "prefix_lm:70", "document:3", "chunked:64",
                           "dilated:3"})
    cases.push_back(from_corpus(spec, max_len));
  for (const MaskCase& c : cases)
    for (const auto& bl : blocks)
      for (int64_t L : lens)
        for (int64_t S : lens) check(c, 1, 1, L, S, bl[0], bl[1]);
  MaskCase bh;
  bh.name = "b/h chunks";
  bh.mask = ir::parse("q_idx // (40 + 24 * h + 100 * b) == kv_idx // (40 + 24 * h + 100 * b)");
  for (const auto& bl : blocks)
    for (int64_t B : {1, 2})
      for (int64_t H : {1, 3}) check(bh, B, H, 1000, 777, bl[0], bl[1]);
  std::printf("gpu_block_mask_check: %d passed, %d failed\n", g_pass, g_fail);
}

void time_case(const std::string& spec, int64_t S, int block) {
  MaskCase c = from_corpus(spec, S);
  DeviceBindings dev;
  std::vector<jit::DeviceBuffer> uploads;
  for (const auto& [name, view] : c.bindings.buffers) {
    const size_t bytes = size_t(view.shape[0]) * dtype_size(view.dtype);
    uploads.emplace_back(bytes);
    uploads.back().upload(view.data, bytes);
    dev.buffers[name] = ir::BufferView{view.dtype, view.shape, reinterpret_cast<const void*>(uploads.back().ptr())};
  }
  GpuBlockMask warm = build_block_mask_gpu(c.mask, dev, 1, 1, S, S, block, block);  // compiles
  warm.download();
  std::vector<float> ms;
  for (int i = 0; i < 7; ++i) {
    jit::Event e0, e1;
    e0.record();
    GpuBlockMask m = build_block_mask_gpu(c.mask, dev, 1, 1, S, S, block, block);
    e1.record();
    e1.synchronize();
    ms.push_back(jit::Event::elapsed_ms(e0, e1));
  }
  std::sort(ms.begin(), ms.end());
  const BlockMaskStats st = block_mask_stats(warm.download());
  std::printf("time %-20s S=%lld block=%d: median %.3f ms (min %.3f), %.1f MiB device, tiles partial=%lld full=%lld "
              "skipped=%lld\n",
              spec.c_str(), (long long)S, block, ms[ms.size() / 2], ms[0], warm.bytes() / 1048576.0,
              (long long)st.partial, (long long)st.full, (long long)st.skipped);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, timing = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--time")) timing = true;
  }
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("gpu_block_mask_check: skipped (%s)\n", why.c_str());
    return 77;
  }
  try {
    run_checks(quick);
    if (timing)
      for (const char* spec : {"causal", "document:16", "sliding_window:1024"}) time_case(spec, 131072, 128);
  } catch (const std::exception& e) {
    std::printf("gpu_block_mask_check: error: %s\n", e.what());
    return 1;
  }
  return g_fail == 0 ? 0 : 1;
}
