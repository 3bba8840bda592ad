// flexattn bench --suite decode: the decode family on issue 7's shapes (Hq=32, Hkv=8, D=128, bf16, one
// query row per sequence at the end of its cache), contiguous and paged (pages of 16 and 128), plus a
// sliding window of 4096 on the longest cache. Timed only (the correctness check is
// tests/gpu/decode/gpu_decode_check); with `--splits LIST` each shape once per kv split count (0 = the
// heuristic's); `--batch B` keeps the shapes of batch B only; `--shuffle` scatters the pages of the paged
// shapes randomly over the pool (default: in allocation order, sequences interleaved). Bandwidth counts the K and V bytes a step must read: the whole
// cache, or the window. Prints a table, then one JSON row per case (impl, case, B, Hq, Hkv, S, D, page,
// ms, GBps), the fields of bench/results.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "flexattn/block_mask.h"
#include "flexattn/decode.h"
#include "flexattn/error.h"
#include "flexattn/mods.h"
#include "flexattn/paged.h"
#include "jit/device.h"

namespace flexattn::cli {

namespace {

struct DecodeShape {
  int64_t B, S;
  int page;       // 0 = contiguous
  int64_t window; // 0 = none
};

TensorView view(const jit::DeviceBuffer& buf, std::vector<int64_t> shape) {
  TensorView v;
  v.data = reinterpret_cast<void*>(buf.ptr()), v.dtype = DType::BF16, v.shape = std::move(shape);
  return v;
}

// A sliding-window mask over the whole cache, built from its lists (the dense builder would evaluate
// S^2 entries): every block the window touches is listed as partial.
BlockMask window_mask(int64_t S, int64_t window) {
  const int64_t blk = 128, n = (S + blk - 1) / blk;
  std::vector<int32_t> num(static_cast<size_t>(n), 0), idx(static_cast<size_t>(n * n), 0);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t lo = std::max<int64_t>(0, r * blk - window) / blk;
    int32_t c = 0;
    for (int64_t j = lo; j <= r; ++j) idx[size_t(r * n + c++)] = int32_t(j);
    num[size_t(r)] = c;
  }
  return from_kv_blocks(num, idx, nullptr, nullptr, 1, 1, n, n, int(blk), int(blk), S, S);
}


}  // namespace

int run_decode_suite(const std::vector<int>& splits, int64_t batch, bool shuffle) {
  constexpr int64_t Hq = 32, Hkv = 8, D = 128;
  constexpr int kReps = 50;
  const std::vector<DecodeShape> shapes = {{8, 8192, 0, 0},     {8, 8192, 16, 0},     {8, 8192, 128, 0},
                                           {1, 131072, 0, 0},   {1, 131072, 16, 0},   {1, 131072, 128, 0},
                                           {64, 4096, 0, 0},    {64, 4096, 16, 0},    {64, 4096, 128, 0},
                                           {1, 131072, 0, 4096}};
  jit::use_device(0);
  std::printf("flexattn bench --suite decode: Hq=%lld Hkv=%lld D=%lld bf16, L=1, median of %d steps\n",
              (long long)Hq, (long long)Hkv, (long long)D, kReps);
  std::printf("%-4s %-7s %-5s %-7s %7s %10s %9s %10s\n", "B", "S", "page", "window", "splits", "ms", "GB/s", "b2b ms");
  std::vector<std::string> json;
  for (const DecodeShape& s : shapes) {
    if (batch > 0 && s.B != batch) continue;
    Variant variant;
    if (s.window) variant.mask_mod = mods::sliding_window(s.window);
    const int64_t ps = s.page ? s.page : 1, max_pages = (s.S + ps - 1) / ps;
    // The pool holds exactly the B caches; pages are handed out interleaved, as a server would.
    PageAllocator alloc(s.B * max_pages, ps, s.B, max_pages);
    if (s.page)
      for (int64_t t = 0; t < s.S; t += ps)
        for (int64_t b = 0; b < s.B; ++b) alloc.append(b, std::min<int64_t>(ps, s.S - t));
    const int64_t rows = s.page ? alloc.num_pages() * ps : s.B * s.S;
    jit::DeviceBuffer k(size_t(rows * Hkv * D) * 2), v(size_t(rows * Hkv * D) * 2);
    jit::DeviceBuffer q(size_t(s.B * Hq * D) * 2), out(size_t(s.B * Hq * D) * 2), lse(size_t(s.B * Hq) * 4);
    for (const jit::DeviceBuffer* b : {&k, &v, &q})  // bf16 0x3c3c: small finite values
      jit::cu_check(jit::driver().cuMemsetD8(b->ptr(), 0x3c, b->size()), "memset");
    DecodeArgs a;
    a.variant = &variant;
    a.q = view(q, {s.B, Hq, 1, D});
    a.out = view(out, {s.B, Hq, 1, D});
    a.lse = lse.as<float>();
    std::unique_ptr<jit::DeviceBuffer> table, mask_bufs[2];
    if (s.page) {
      a.k = view(k, {alloc.num_pages(), Hkv, ps, D});
      a.v = view(v, {alloc.num_pages(), Hkv, ps, D});
      // shuffle: the physical pages randomly permuted (bench/run.py's decode inputs use a random page
      // table): the same bytes read, scattered over the pool instead of in allocation order.
      std::vector<int32_t> ids = alloc.page_table();
      if (shuffle) {
        std::vector<int32_t> perm(size_t(alloc.num_pages()));
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = int32_t(i);
        std::shuffle(perm.begin(), perm.end(), std::mt19937(12345));
        for (int32_t& id : ids)
          if (id >= 0 && id < int32_t(perm.size())) id = perm[size_t(id)];
      }
      table = std::make_unique<jit::DeviceBuffer>(ids.size() * 4);
      table->upload(ids.data(), ids.size() * 4);
      a.page_table = table->as<int32_t>();
      a.max_pages = max_pages;
    } else {
      a.k = view(k, {s.B, Hkv, s.S, D});
      a.v = view(v, {s.B, Hkv, s.S, D});
    }
    a.q_offset = s.S - 1;
    DeviceBlockMask dm;
    if (s.window) {
      const BlockMask m = window_mask(s.S, s.window);
      const std::vector<int32_t>* lists[2] = {&m.kv_num_blocks, &m.kv_indices};
      for (int i = 0; i < 2; ++i) {
        mask_bufs[i] = std::make_unique<jit::DeviceBuffer>(lists[i]->size() * 4);
        mask_bufs[i]->upload(lists[i]->data(), lists[i]->size() * 4);
      }
      dm.kv_num_blocks = mask_bufs[0]->as<int32_t>(), dm.kv_indices = mask_bufs[1]->as<int32_t>();
      dm.B = dm.H = 1, dm.nq = m.nq, dm.nkv = m.nkv, dm.q_len = m.q_len, dm.kv_len = m.kv_len;
      dm.q_block = m.q_block, dm.kv_block = m.kv_block;
      a.block_mask = &dm;
    }
    // One workspace for every split count of the sweep: the largest.
    size_t ws_bytes = 16;
    for (int n : splits) {
      a.num_splits = n;
      ws_bytes = std::max(ws_bytes, decode_workspace_bytes(a));
    }
    jit::DeviceBuffer ws(ws_bytes);
    a.workspace = reinterpret_cast<void*>(ws.ptr());
    a.workspace_bytes = ws_bytes;
    const int64_t read_rows = s.window ? std::min<int64_t>(s.S, s.window + 1) : s.S;
    double ms = 0, gbps = 0;
    for (size_t si = 0; si < splits.size(); ++si) {
      a.num_splits = splits[si];
      const double t = jit::median_event_ms(kReps, 3, [&] { cuda_decode(a); });
      const double g = double(s.B * read_rows * Hkv * D * 2 * 2) / (t * 1e6);
      if (si == 0) ms = t, gbps = g;  // the JSON row: the first entry (auto by default)
      // Diagnostic, not the metric: the mean of kB2B calls issued back to back between two events (the
      // host's work and the launch latency overlap the previous call), i.e. the GPU time per call.
      constexpr int kB2B = 20;
      jit::Event e0, e1;
      e0.record();
      for (int r = 0; r < kB2B; ++r) cuda_decode(a);
      e1.record();
      e1.synchronize();
      const double b2b = jit::Event::elapsed_ms(e0, e1) / kB2B;
      std::printf("%-4lld %-7lld %-5d %-7lld %7d %10.4f %9.0f %10.4f\n", (long long)s.B, (long long)s.S, s.page,
                  (long long)s.window, decode_num_splits(a), t, g, b2b);
      std::fflush(stdout);
    }
    char row[256];
    std::snprintf(row, sizeof row,
                  "{\"impl\": \"flexattn\", \"case\": \"decode%s\", \"B\": %lld, \"Hq\": %lld, \"Hkv\": %lld, "
                  "\"S\": %lld, \"D\": %lld, \"page\": %d, \"ms\": %.5f, \"GBps\": %.1f}",
                  s.window ? ("_window" + std::to_string(s.window)).c_str() : "", (long long)s.B, (long long)Hq,
                  (long long)Hkv, (long long)s.S, (long long)D, s.page, ms, gbps);
    json.push_back(row);
  }
  for (const std::string& r : json) std::printf("%s\n", r.c_str());
  return 0;
}

}  // namespace flexattn::cli
