// build_block_mask_gpu: codegen of the mask_mod, JIT compile of the builder kernels, one device
// allocation for the outputs, two launches (classify, compact).
#include "flexattn/block_mask_gpu.h"

#include <algorithm>
#include <future>
#include <optional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>
#include <tuple>

#include "block_mask/layout_util.h"
#include "common/block_mask_params.h"
#include "flexattn/codegen.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/jit.h"
#include "jit/device.h"
#include "jit/driver_api.h"
#include "jit/module.h"
#include "jit/once_per_arch.h"
#include "jit/sys.h"
#include "runtime/kernel_set.h"

namespace flexattn {

struct GpuBlockMask::Impl {
  jit::DeviceBuffer memory;
  DeviceBlockMask view;
  int device = 0;
  jit::CUstream stream = nullptr;
};

namespace {

using kern::BlockMaskBuildParams;

struct BuildVariant {
  ir::Expr keep_alive;  // the cache key is the address of this hash-consed node
  codegen::GeneratedVariant gen;
  std::map<std::string, jit::CompiledKernel> by_arch;
};

std::mutex g_mu;

// Codegen once per mask_mod node per process (nodes are hash-consed: equal mods share one entry).
BuildVariant& build_variant(const ir::Expr& mask_mod) {
  static auto* cache = new std::map<const ir::Node*, std::unique_ptr<BuildVariant>>();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = cache->find(mask_mod.get());
    if (it != cache->end()) return *it->second;
  }
  Variant variant;
  variant.mask_mod = mask_mod;
  auto v = std::make_unique<BuildVariant>();
  v->gen = codegen::emit_cuda_variant(variant, false);
  v->keep_alive = mask_mod;
  std::lock_guard<std::mutex> lock(g_mu);
  auto [it, inserted] = cache->emplace(mask_mod.get(), std::move(v));
  return *it->second;
}

jit::KernelRequest builder_request(const char* prefix, std::string source, const std::string& arch, const char* entry) {
  jit::KernelRequest req;
  req.prefix = prefix;
  req.source = std::move(source);
  req.arch = arch;
  req.kernel_names = {entry};
  return req;
}

jit::CompiledKernel classify_for(BuildVariant& v, const std::string& arch) {
  return jit::once_per_arch(g_mu, v.by_arch, arch, [&] {
    return builder_request("block_mask_build", block_mask_build_source(v.gen.source), arch, kBlockMaskClassifyEntry);
  });
}

// The compact kernel, the same for every mask.
std::map<std::string, jit::CompiledKernel>& compact_by_arch() {
  static auto* m = new std::map<std::string, jit::CompiledKernel>();
  return *m;
}

bool compact_known(const std::string& arch) {
  std::lock_guard<std::mutex> lock(g_mu);
  return compact_by_arch().count(arch) != 0;
}

jit::CompiledKernel compact_for(const std::string& arch) {
  return jit::once_per_arch(g_mu, compact_by_arch(), arch, [&] {
    return builder_request("block_mask_compact", block_mask_compact_source(), arch, kBlockMaskCompactEntry);
  });
}

// Both builder kernels of `v`: the compact kernel, when this process has not loaded it yet, on a thread
// beside the classify kernel (with an empty cache the build waits for the longer compile, not the sum).
std::pair<jit::CompiledKernel, jit::CompiledKernel> builder_kernels(BuildVariant& v, const std::string& arch) {
  std::future<jit::CompiledKernel> compact;
  if (!compact_known(arch)) {
    try {
      compact = std::async(std::launch::async, [arch] { return compact_for(arch); });
    } catch (const std::system_error&) {  // no thread to spare: one after the other
    }
  }
  jit::CompiledKernel classify = classify_for(v, arch);  // on an error, the future's destructor joins the thread
  return {std::move(classify), compact.valid() ? compact.get() : compact_for(arch)};
}

void check_args(int64_t B, int64_t H, int64_t q_len, int64_t kv_len, int q_block, int kv_block) {
  const char* who = "build_block_mask_gpu";
  block_mask_detail::check_geometry(who, B, H, q_len, kv_len, q_block, kv_block);
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const std::pair<const char*, int64_t> args[] = {{"B", B}, {"H", H}, {"q_len", q_len}, {"kv_len", kv_len}};
  for (const auto& [name, v] : args)
    check(v <= kMaxInt, std::string(who) + ": " + name + " must be <= 2^31-1 (mask_mod takes int32 indices), got " +
                            std::to_string(v));
}

// Byte offsets of the arrays inside the one allocation (256-byte aligned each).
struct Layout {
  size_t kv_num, full_kv_num, q_num, full_q_num, kv_idx, full_kv_idx, q_idx, full_q_idx, cls_rows, cls_cols, total;
};

Layout plan(int64_t rows, int64_t cols, int64_t tiles) {
  Layout l{};
  size_t at = 0;
  auto take = [&](int64_t bytes) {
    const size_t here = at;
    at += (size_t(bytes) + 255) / 256 * 256;
    return here;
  };
  l.kv_num = take(4 * rows), l.full_kv_num = take(4 * rows);
  l.q_num = take(4 * cols), l.full_q_num = take(4 * cols);
  l.kv_idx = take(4 * tiles), l.full_kv_idx = take(4 * tiles), l.q_idx = take(4 * tiles), l.full_q_idx = take(4 * tiles);
  l.cls_rows = take(tiles), l.cls_cols = take(tiles);
  l.total = at;
  return l;
}

// Kv-range masks that read no buffer (causal, sliding windows, prefix-LM, bands; no mask at all) are classified on
// the host from each row's bounds (build_block_mask_from_ranges) and uploaded: a new mask then compiles nothing,
// where the classify kernel's NVRTC compile costs ~0.2 s of its first build. The host's cost (2-core machine,
// session 26) is ~50 ns per query row of the mask's B x H and ~15 ns per tile: causal at S = 8192 0.6 ms, at 131072
// 22 ms against the warm kernels' ~1.5 ms, hence the caps (FLEXATTN_BLOCK_MASK_HOST_RANGES=0: always the kernels).
constexpr int64_t kHostRangeRows = int64_t(1) << 18, kHostRangeTiles = int64_t(1) << 18;

std::optional<BlockMask> host_range_mask(const ir::Expr& mask_mod, const ModBindings& scalars, int64_t B, int64_t H,
                                         int64_t q_len, int64_t kv_len, int q_block, int kv_block, int64_t tiles) {
  // B * H and the tile count fit int64 (check_geometry); B * H * q_len might not, hence the division.
  if (!jit::env_flag("FLEXATTN_BLOCK_MASK_HOST_RANGES", true) || B * H > kHostRangeRows / q_len ||
      tiles > kHostRangeTiles)
    return std::nullopt;
  ir::KvRangeRows rows;
  if (mask_mod.empty()) {
    rows = [](int64_t, int64_t, int64_t) { return std::pair<int64_t, int64_t>{-ir::kKvOpen, ir::kKvOpen}; };
  } else if (ir::buffers(mask_mod).empty()) {
    rows = ir::kv_range_rows(mask_mod, eval_env(scalars));
  }
  if (!rows) return std::nullopt;
  return build_block_mask_from_ranges(rows, B, H, q_len, kv_len, q_block, kv_block);
}

// The two builder kernels over p's arrays: classify every tile, then compact each row of both sides.
void launch_builder(const jit::CompiledKernel& classify_kernel, const jit::CompiledKernel& compact_kernel,
                    const jit::DeviceProps& props, jit::CUstream stream, const BlockMaskBuildParams& p, int64_t tiles,
                    int64_t rows, int64_t cols) {
  const jit::CUfunction classify = jit::get_function(classify_kernel, kBlockMaskClassifyEntry);
  const jit::CUfunction compact = jit::get_function(compact_kernel, kBlockMaskCompactEntry);
  constexpr int64_t kWarps = kern::kBmThreads / 32;
  // Grid-stride kernels: one resident wave of CTAs, fewer when there is less work than warps.
  const int64_t resident = int64_t(props.sm_count) *
                           std::max(1, jit::max_active_blocks_per_sm(classify, kern::kBmThreads, 0));
  jit::LaunchConfig cfg;
  cfg.block.x = kern::kBmThreads;
  cfg.stream = stream;
  cfg.grid.x = unsigned(std::min((tiles + kWarps - 1) / kWarps, resident));
  jit::launch(classify, cfg, p);
  cfg.grid.x = unsigned(std::min((rows + cols + kWarps - 1) / kWarps, int64_t(props.sm_count) * 8));
  jit::launch(compact, cfg, p);
}

}  // namespace

std::string block_mask_build_source(const std::string& variant_source) {
  std::ostringstream s;
  s << "// flexattn block-mask classify kernel\n";
  s << "#include \"common/mod_ops.cuh\"\n";
  s << "#include \"common/block_mask_build.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n";
  s << variant_source << "\n";
  s << "extern \"C\" __global__ void __launch_bounds__(kBmThreads, kBmMinBlocks)\n"
    << kBlockMaskClassifyEntry
    << "(const __grid_constant__ BlockMaskBuildParams p) { block_mask_classify<FlexVariant>(p); }\n";
  return s.str();
}

std::string block_mask_compact_source() {
  std::ostringstream s;
  s << "// flexattn block-mask compact kernel (the same for every mask)\n";
  s << "#include \"common/block_mask_build.cuh\"\n";
  s << "using namespace flexattn::kern;\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(kBmThreads)\n"
    << kBlockMaskCompactEntry << "(const __grid_constant__ BlockMaskBuildParams p) { block_mask_compact(p); }\n";
  return s.str();
}

GpuBlockMask build_block_mask_gpu(const ir::Expr& mask_mod, const DeviceBindings& bindings, int64_t B, int64_t H,
                                  int64_t q_len, int64_t kv_len, int q_block, int kv_block, int device,
                                  void* stream) {
  check_args(B, H, q_len, kv_len, q_block, kv_block);
  BuildVariant& variant = build_variant(mask_mod);
  BlockMaskBuildParams p{};
  runtime::fill_mod_params(variant.gen.layout, bindings, false, &p.mod);  // checks the scalars and buffers
  jit::use_device(device);
  const int64_t nq = block_mask_detail::ceil_div(q_len, q_block), nkv = block_mask_detail::ceil_div(kv_len, kv_block);
  const int64_t rows = B * H * nq, cols = B * H * nkv, tiles = rows * nkv;
  check(tiles <= (int64_t(1) << 56), "build_block_mask_gpu: B*H*nq*nkv = " + std::to_string(tiles) +
                                         " tiles is too many (16 bytes of output each)");
  ModBindings scalars;
  scalars.scalars = bindings.scalars;
  std::optional<BlockMask> host = host_range_mask(mask_mod, scalars, B, H, q_len, kv_len, q_block, kv_block, tiles);
  const jit::DeviceProps& props = jit::device_props(device);
  jit::CompiledKernel classify_kernel, compact_kernel;
  if (!host) std::tie(classify_kernel, compact_kernel) = builder_kernels(variant, props.arch);
  auto impl = std::make_shared<GpuBlockMask::Impl>();
  impl->device = device;
  impl->stream = static_cast<jit::CUstream>(stream);
  const Layout l = plan(rows, cols, tiles);
  impl->memory = jit::DeviceBuffer(l.total);
  char* base = impl->memory.as<char>();
  auto i32 = [&](size_t off) { return reinterpret_cast<int*>(base + off); };
  p.kv_num_blocks = i32(l.kv_num), p.kv_indices = i32(l.kv_idx);
  p.full_kv_num_blocks = i32(l.full_kv_num), p.full_kv_indices = i32(l.full_kv_idx);
  p.q_num_blocks = i32(l.q_num), p.q_indices = i32(l.q_idx);
  p.full_q_num_blocks = i32(l.full_q_num), p.full_q_indices = i32(l.full_q_idx);
  p.cls_rows = reinterpret_cast<unsigned char*>(base + l.cls_rows);
  p.cls_cols = reinterpret_cast<unsigned char*>(base + l.cls_cols);
  p.num_tiles = tiles;
  p.B = int(B), p.H = int(H), p.q_len = int(q_len), p.kv_len = int(kv_len);
  p.q_block = q_block, p.kv_block = kv_block, p.nq = int(nq), p.nkv = int(nkv);

  if (host) {
    const jit::DriverApi& d = jit::driver();
    auto put = [&](const int32_t* dst, const std::vector<int32_t>& src) {
      // Pageable source: the call returns once the bytes are staged, so `host` may go; ordered in the stream.
      jit::cu_check(d.cuMemcpyHtoDAsync(reinterpret_cast<jit::CUdeviceptr>(dst), src.data(), src.size() * 4,
                                        impl->stream),
                    "build_block_mask_gpu: upload");
    };
    put(p.kv_num_blocks, host->kv_num_blocks), put(p.kv_indices, host->kv_indices);
    put(p.full_kv_num_blocks, host->full_kv_num_blocks), put(p.full_kv_indices, host->full_kv_indices);
    put(p.q_num_blocks, host->q_num_blocks), put(p.q_indices, host->q_indices);
    put(p.full_q_num_blocks, host->full_q_num_blocks), put(p.full_q_indices, host->full_q_indices);
  } else {
    launch_builder(classify_kernel, compact_kernel, props, impl->stream, p, tiles, rows, cols);
  }

  DeviceBlockMask& v = impl->view;
  v.kv_num_blocks = p.kv_num_blocks, v.kv_indices = p.kv_indices;
  v.full_kv_num_blocks = p.full_kv_num_blocks, v.full_kv_indices = p.full_kv_indices;
  v.q_num_blocks = p.q_num_blocks, v.q_indices = p.q_indices;
  v.full_q_num_blocks = p.full_q_num_blocks, v.full_q_indices = p.full_q_indices;
  v.B = B, v.H = H, v.nq = nq, v.nkv = nkv, v.q_len = q_len, v.kv_len = kv_len;
  v.q_block = q_block, v.kv_block = kv_block;
  return GpuBlockMask(std::move(impl));
}

BlockMask build_block_mask_gpu_host(const ir::Expr& mask_mod, const ModBindings& bindings, int64_t B, int64_t H,
                                    int64_t q_len, int64_t kv_len, int q_block, int kv_block, int device) {
  check_args(B, H, q_len, kv_len, q_block, kv_block);
  DeviceBindings dev;
  dev.scalars = bindings.scalars;
  std::vector<jit::DeviceBuffer> uploads;
  uploads.reserve(bindings.buffers.size());
  for (const auto& [name, view] : bindings.buffers) {
    ir::BufferView d = view;
    if (view.data != nullptr) {
      jit::use_device(device);
      int64_t n = 1;
      for (int64_t e : view.shape) n = block_mask_detail::checked_mul(n, std::max<int64_t>(e, 0),
                                                                      "build_block_mask_gpu_host", name.c_str());
      const size_t bytes = size_t(n) * size_t(dtype_size(view.dtype));
      uploads.emplace_back(std::max<size_t>(bytes, 16));
      if (bytes > 0) uploads.back().upload(view.data, bytes);
      d.data = reinterpret_cast<const void*>(uploads.back().ptr());
    }
    dev.buffers[name] = d;
  }
  return build_block_mask_gpu(mask_mod, dev, B, H, q_len, kv_len, q_block, kv_block, device, nullptr).download();
}

const DeviceBlockMask& GpuBlockMask::view() const {
  check(impl_ != nullptr, "GpuBlockMask::view: the mask is empty (default-constructed)");
  return impl_->view;
}

int GpuBlockMask::device() const {
  check(impl_ != nullptr, "GpuBlockMask::device: the mask is empty (default-constructed)");
  return impl_->device;
}

size_t GpuBlockMask::bytes() const { return impl_ ? impl_->memory.size() : 0; }

BlockMask GpuBlockMask::download() const {
  check(impl_ != nullptr, "GpuBlockMask::download: the mask is empty (default-constructed)");
  const DeviceBlockMask& v = impl_->view;
  jit::use_device(impl_->device);
  const jit::DriverApi& d = jit::driver();
  // cuMemcpyDtoH does not wait for a non-blocking stream.
  jit::cu_check(impl_->stream ? d.cuStreamSynchronize(impl_->stream) : d.cuCtxSynchronize(),
                "GpuBlockMask::download: synchronize");
  BlockMask bm;
  bm.B = v.B, bm.H = v.H, bm.q_len = v.q_len, bm.kv_len = v.kv_len;
  bm.q_block = v.q_block, bm.kv_block = v.kv_block, bm.nq = v.nq, bm.nkv = v.nkv, bm.has_full = true;
  const int64_t bh = v.B * v.H, rows = bh * v.nq, cols = bh * v.nkv, tiles = rows * v.nkv;
  auto get = [&](std::vector<int32_t>& out, const int32_t* src, int64_t n) {
    out.resize(size_t(n));
    jit::cu_check(d.cuMemcpyDtoH(out.data(), reinterpret_cast<jit::CUdeviceptr>(src), size_t(n) * 4),
                  "GpuBlockMask::download: copy");
  };
  get(bm.kv_num_blocks, v.kv_num_blocks, rows);
  get(bm.kv_indices, v.kv_indices, tiles);
  get(bm.full_kv_num_blocks, v.full_kv_num_blocks, rows);
  get(bm.full_kv_indices, v.full_kv_indices, tiles);
  get(bm.q_num_blocks, v.q_num_blocks, cols);
  get(bm.q_indices, v.q_indices, tiles);
  get(bm.full_q_num_blocks, v.full_q_num_blocks, cols);
  get(bm.full_q_indices, v.full_q_indices, tiles);
  return bm;
}

}  // namespace flexattn
