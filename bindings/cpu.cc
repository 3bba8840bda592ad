// The cpu backend (the double-precision oracle) and the CPU BlockMask builder on host arrays.
#include <cmath>
#include <limits>

#include "convert.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/reference.h"

namespace flexattn::py {

namespace {

using Scalars = std::map<std::string, double>;
using Buffers = std::map<std::string, HostArray>;

double scale_or_nan(std::optional<double> scale) {
  return scale ? *scale : std::numeric_limits<double>::quiet_NaN();
}

void check_threads(int threads) { check(threads >= 0, "threads: must be >= 0 (0 = all cores), got " + std::to_string(threads)); }

nb::tuple cpu_forward(const VariantHandle& v, const HostArray& q, const HostArray& k, const HostArray& vv,
                      const Scalars& scalars, const Buffers& buffers, const std::optional<HostMaskArg>& mask,
                      std::optional<double> scale, int threads) {
  check_threads(threads);
  const HostTensor qt = to_host(q, "query"), kt = to_host(k, "key"), vt = to_host(vv, "value");
  std::vector<HostTensor> storage;
  const ModBindings bindings = host_bindings(scalars, buffers, &storage);
  std::optional<BlockMask> bm;
  if (mask) bm = host_block_mask(*mask);
  cpu::ForwardResult r;
  {
    nb::gil_scoped_release release;
    const int n = cpu::resolve_threads(threads);
    cpu::VariantFns fns(v.variant, bindings, n);
    cpu::Options opt;
    opt.scale = scale_or_nan(scale);
    opt.block_mask = bm ? &*bm : nullptr;
    opt.threads = n;
    r = cpu::forward(qt, kt, vt, fns.fns(), opt);
  }
  return nb::make_tuple(to_numpy_f64(std::move(r.out)), to_numpy_f64(std::move(r.lse)),
                        to_numpy_f64(std::move(r.max_score)));
}

nb::tuple cpu_backward(const VariantHandle& v, const HostArray& q, const HostArray& k, const HostArray& vv,
                       const HostArray& dout, const std::optional<HostArray>& dlse, const Scalars& scalars,
                       const Buffers& buffers, const std::optional<HostMaskArg>& mask, std::optional<double> scale,
                       int threads) {
  check_threads(threads);
  const HostTensor qt = to_host(q, "query"), kt = to_host(k, "key"), vt = to_host(vv, "value");
  const HostTensor dt = to_host(dout, "grad_out");
  std::optional<HostTensor> dl;
  if (dlse) dl = to_host(*dlse, "grad_lse");
  std::vector<HostTensor> storage;
  const ModBindings bindings = host_bindings(scalars, buffers, &storage);
  std::optional<BlockMask> bm;
  if (mask) bm = host_block_mask(*mask);
  cpu::BackwardResult r;
  std::map<std::string, HostTensor> grads;
  {
    nb::gil_scoped_release release;
    const int n = cpu::resolve_threads(threads);
    cpu::VariantFns fns(v.variant, bindings, n);
    cpu::Options opt;
    opt.scale = scale_or_nan(scale);
    opt.block_mask = bm ? &*bm : nullptr;
    opt.threads = n;
    r = cpu::backward(qt, kt, vt, dt, dl ? &*dl : nullptr, fns.fns(), opt);
    grads = fns.buffer_grads();
  }
  nb::dict g;
  for (auto& [name, t] : grads) g[name.c_str()] = to_numpy_f64(std::move(t));
  return nb::make_tuple(to_numpy_f64(std::move(r.dq)), to_numpy_f64(std::move(r.dk)), to_numpy_f64(std::move(r.dv)),
                        g);
}

nb::tuple build_mask_cpu(const std::optional<Mod>& mask_mod, int64_t B, int64_t H, int64_t q_len, int64_t kv_len,
                         int q_block, int kv_block, const Scalars& scalars, const Buffers& buffers, int threads) {
  check(!mask_mod || mask_mod->kind == "mask_mod", "mask_mod: got a score_mod");
  check_threads(threads);
  std::vector<HostTensor> storage;
  const ModBindings bindings = host_bindings(scalars, buffers, &storage);
  BlockMask bm;
  {
    nb::gil_scoped_release release;
    const int n = cpu::resolve_threads(threads);
    Variant variant;
    if (mask_mod) variant.mask_mod = mask_mod->expr;
    cpu::VariantFns fns(variant, bindings, n);  // checks the scalars and buffers the mask reads
    const cpu::ModFns& f = fns.fns();
    if (MaskRowRangeFn range = ir::kv_range_rows(variant.mask_mod, eval_env(bindings))) {  // one kv interval per row
      bm = build_block_mask_from_ranges(range, B, H, q_len, kv_len, q_block, kv_block, n);
    } else {
      MaskFn fn = f.mask_mod ? MaskFn(f.mask_mod) : MaskFn([](int64_t, int64_t, int64_t, int64_t) { return true; });
      bm = build_block_mask(fn, B, H, q_len, kv_len, q_block, kv_block, n);
    }
  }
  return block_mask_arrays(std::move(bm));
}

}  // namespace

void bind_cpu(nb::module_& m) {
  m.def("cpu_forward", &cpu_forward, nb::arg("variant"), nb::arg("query"), nb::arg("key"), nb::arg("value"),
        nb::kw_only(), nb::arg("scalars") = Scalars{}, nb::arg("buffers") = Buffers{},
        nb::arg("block_mask").none() = nb::none(), nb::arg("scale").none() = nb::none(), nb::arg("threads") = 0,
        "The cpu backend's forward (torch's dense math in float64). query [B,Hq,L,E], key [Bkv,Hkv,S,E], value "
        "[Bkv,Hkv,S,Ev]: float16/bfloat16/float32/float64 host arrays (read exactly). block_mask: (q_len, kv_len, "
        "q_block, kv_block, kv_num_blocks, kv_indices, full_kv_num_blocks | None, full_kv_indices | None) or None "
        "(dense). scale None = 1/sqrt(E). Returns float64 (out [B,Hq,L,Ev], lse [B,Hq,L] natural log, max "
        "[B,Hq,L]); fully masked rows: out 0, lse = max = -inf.");
  m.def("cpu_backward", &cpu_backward, nb::arg("variant"), nb::arg("query"), nb::arg("key"), nb::arg("value"),
        nb::arg("grad_out"), nb::arg("grad_lse").none() = nb::none(), nb::kw_only(), nb::arg("scalars") = Scalars{},
        nb::arg("buffers") = Buffers{}, nb::arg("block_mask").none() = nb::none(),
        nb::arg("scale").none() = nb::none(), nb::arg("threads") = 0,
        "The cpu backend's backward (recomputes the forward). Returns float64 (dq, dk, dv, {buffer: grad}) with "
        "a gradient for each of variant.grad_buffers; dk/dv are summed over GQA groups and a broadcast batch.");
  m.def("build_block_mask", &build_mask_cpu, nb::arg("mask_mod").none(), nb::arg("B"), nb::arg("H"),
        nb::arg("q_len"), nb::arg("kv_len"), nb::arg("q_block") = 128, nb::arg("kv_block") = 128, nb::kw_only(),
        nb::arg("scalars") = Scalars{}, nb::arg("buffers") = Buffers{}, nb::arg("threads") = 0,
        "torch's create_block_mask on the CPU without a dense mask. Returns the 8 int32 arrays of torch's layout: "
        "(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks, q_indices, "
        "full_q_num_blocks, full_q_indices).");
}

}  // namespace flexattn::py
