#include "execute.h"

#include <algorithm>
#include <chrono>

#include "flexattn/attention.h"
#include "flexattn/cpu_variant.h"
#include "flexattn/cuda_host.h"
#include "flexattn/error.h"
#include "flexattn/reference.h"

namespace flexattn::cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The reference is exact double math and so is the dense evaluation: they differ only by summation
// order, ~1e-15 relative. The finite differences agree to ~1e-9 for the library mods (measured: bench
// --suite quick on the cpu backend).
constexpr double kForwardTol = 1e-9;
constexpr double kGradientTol = 1e-6;
constexpr int kGradientEntries = 4;

// cuda vs the exact reference. Forward: a multiple of the naive same-precision baseline's error, with a
// floor for outputs (lse) the baseline gets almost exactly right. Backward: normwise bounds per dtype,
// ~4-9x what the sm80 kernels showed on an H200 (bench --suite quick and run --check, B=1 H=4 Q=KV=256
// D=64: dq/dk/dv rel <= 4.5e-3 in bf16, <= 4.6e-4 in f16), raised to the same multiple of the error that
// a low-precision O alone causes: the exact backward whose Δ reads the naive same-precision forward's O
// (the backward reads the stored output; semantics §9.2). That term matters for gradients that sum dS
// over many entries with cancellation, e.g. ALiBi slopes: dslopes = Σ dS (kv - q) where Σ_j dS_ij = 0
// keeps the exact value small while an error in Δ adds P-weighted distances.
constexpr double kBaselineFactor = 4;
constexpr double kForwardFloor = 1e-5;
double gradient_tol(DType t) { return t == DType::BF16 ? 2e-2 : 4e-3; }

void run_cpu(const Problem& p, const BlockMask* bm, bool backward, Execution* e,
             const HostTensor* delta_out = nullptr) {
  cpu::Options opt;
  opt.delta_out = delta_out;
  opt.threads = cpu::resolve_threads(0);
  opt.block_mask = bm;
  const ModBindings bindings = p.bindings();
  cpu::VariantFns fns(p.variant, bindings, opt.threads);
  auto t0 = std::chrono::steady_clock::now();
  cpu::ForwardResult f = cpu::forward(p.q, p.k, p.v, fns.fns(), opt);
  e->forward_ms = ms_since(t0);
  e->out = std::move(f.out);
  e->lse = std::move(f.lse);
  if (!backward) return;
  t0 = std::chrono::steady_clock::now();
  cpu::BackwardResult b = cpu::backward(p.q, p.k, p.v, p.dout, nullptr, fns.fns(), opt);
  e->backward_ms = ms_since(t0);
  e->dq = std::move(b.dq);
  e->dk = std::move(b.dk);
  e->dv = std::move(b.dv);
  e->dbuffers = fns.buffer_grads();
}

void run_cuda(const Problem& p, const BlockMask* bm, bool backward, int timing_reps, bool deterministic, Execution* e) {
  const ModBindings bindings = p.bindings();
  CudaHostRequest req;
  req.variant = &p.variant;
  req.bindings = &bindings;
  req.q = &p.q, req.k = &p.k, req.v = &p.v;
  req.dtype = p.dtype;
  req.block_mask = bm;
  req.dout = backward ? &p.dout : nullptr;
  req.timing_reps = timing_reps;
  req.deterministic = deterministic;
  const auto t0 = std::chrono::steady_clock::now();
  CudaHostResult r = cuda_run_host(req);
  const double first_ms = ms_since(t0);
  e->forward_ms = timing_reps > 0 ? r.fwd_ms : first_ms;
  e->backward_ms = timing_reps > 0 ? r.bwd_ms : 0;
  e->out = std::move(r.out);
  e->lse = std::move(r.lse);
  e->dq = std::move(r.dq);
  e->dk = std::move(r.dk);
  e->dv = std::move(r.dv);
  e->dbuffers = std::move(r.buffer_grads);
}

}  // namespace

std::string resolve_backend(const std::string& requested, DType dtype, std::string* note) {
  check(requested == "cpu" || requested == "cuda" || requested == "auto",
        "--backend: expected cpu, cuda or auto, got '" + requested + "'");
  if (requested == "cpu") return "cpu";
  const bool dtype_ok = dtype == DType::BF16 || dtype == DType::F16;
  std::string why;
  const bool usable = cuda_available(&why);
  if (requested == "cuda") {
    check(usable, "--backend cuda: the cuda backend cannot run here: " + why);
    check(dtype_ok, "--backend cuda: the cuda backend takes bf16 or f16 inputs, got --dtype " +
                        std::string(dtype_name(dtype)));
    return "cuda";
  }
  if (note) *note = !usable ? "auto: cpu, cuda unavailable (" + why + ")"
                    : !dtype_ok ? "auto: cpu, the cuda backend takes bf16 or f16 inputs"
                                : "auto: cuda";
  return usable && dtype_ok ? "cuda" : "cpu";
}

Execution execute(const Problem& p, const std::string& backend, int block, bool backward, int timing_reps,
                  bool deterministic) {
  Execution e;
  e.backend = backend;
  if (!p.variant.mask_mod.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    e.block_mask = make_block_mask(p, block);
    e.block_mask_ms = ms_since(t0);
  }
  const BlockMask* bm = e.block_mask ? &*e.block_mask : nullptr;
  if (backend == "cuda") run_cuda(p, bm, backward, timing_reps, deterministic, &e);
  else run_cpu(p, bm, backward, &e);
  return e;
}

bool CheckReport::ok() const {
  for (const auto* v : {&forward, &backward})
    for (const Discrepancy& d : *v)
      if (!d.ok()) return false;
  return true;
}

double CheckReport::worst_rel() const {
  double w = 0;
  for (const auto* v : {&forward, &backward})
    for (const Discrepancy& d : *v) w = std::max(w, d.rel);
  return w;
}

CheckReport check_execution(const Problem& p, const Execution& e, bool backward) {
  CheckReport r;
  if (e.backend == "cpu") {
    HostTensor out, lse;
    dense_forward(p, &out, &lse);
    r.forward_what = "cpu reference vs a dense double-precision evaluation (no block mask)";
    r.forward.push_back(compare("out", e.out, out, kForwardTol));
    r.forward.push_back(compare("lse", e.lse, lse, kForwardTol));
    if (backward) {
      r.backward_what = "cpu reference vs central finite differences of sum(out * dout), " +
                        std::to_string(kGradientEntries) + " seeded entries per tensor";
      r.backward = check_gradients(p, e.dq, e.dk, e.dv, e.dbuffers, kGradientEntries, kGradientTol);
    }
    return r;
  }
  Execution ref;
  run_cpu(p, e.block_mask ? &*e.block_mask : nullptr, backward, &ref);
  // The baseline's problem: `p`, or (a mod with tanh_approx) a copy whose mods carry the approximation's error.
  const std::optional<Variant> off = with_approximation_error(p.variant);
  std::optional<Problem> p_off;
  if (off) p_off = p, p_off->variant = *off;
  const bool approximate = off.has_value();
  const Problem& base_p = off ? *p_off : p;
  HostTensor base_out, base_lse;
  dense_forward(base_p, &base_out, &base_lse, p.dtype);
  const double out_tol = std::max(kBaselineFactor * compare("", base_out, ref.out, 0).rel, kForwardFloor);
  const double lse_tol = std::max(kBaselineFactor * compare("", base_lse, ref.lse, 0).rel, kForwardFloor);
  r.forward_what = e.backend + " vs the cpu reference (tolerance " + std::to_string(int(kBaselineFactor)) +
                   "x the error of a naive " + std::string(dtype_name(p.dtype)) + " evaluation" +
                   (approximate ? " with tanh_approx off by its 2^-11" : "") + ", at least 1e-5)";
  r.forward.push_back(compare("out", e.out, ref.out, out_tol));
  r.forward.push_back(compare("lse", e.lse, ref.lse, lse_tol));
  if (backward) {
    Execution base;
    run_cpu(base_p, e.block_mask ? &*e.block_mask : nullptr, true, &base, &base_out);
    // dq and dk are sums of P (dP - delta) terms that cancel exactly in some problems (a single key: dS = 0), where
    // the backend's result is rounding noise of those terms; they are measured against at least one input-dtype
    // ulp of the largest of dq, dk, dv (the terms' scale) instead of their own ~0 maximum.
    const double grad_floor = std::max({max_abs_of(ref.dq), max_abs_of(ref.dk), max_abs_of(ref.dv)}) *
                              (p.dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048);
    auto grad = [&](const std::string& name, const HostTensor& got, const HostTensor& want, const HostTensor& b,
                    double floor) {
      const double tol = std::max(gradient_tol(p.dtype), kBaselineFactor * compare("", b, want, 0, floor).rel);
      r.backward.push_back(compare(name, got, want, tol, floor));
    };
    r.backward_what = e.backend + " vs the cpu reference (tolerance " + std::string(p.dtype == DType::BF16 ? "2e-2" : "4e-3") +
                      ", or " + std::to_string(int(kBaselineFactor)) + "x the error of the exact backward reading the naive " +
                      std::string(dtype_name(p.dtype)) + " forward's O, if larger; dq, dk, dv relative to at least one " +
                      std::string(dtype_name(p.dtype)) + " ulp of the largest of them)";
    grad("dq", e.dq, ref.dq, base.dq, grad_floor);
    grad("dk", e.dk, ref.dk, base.dk, grad_floor);
    grad("dv", e.dv, ref.dv, base.dv, grad_floor);
    for (const auto& [name, g] : ref.dbuffers) {
      auto it = e.dbuffers.find(name);
      check(it != e.dbuffers.end(), "the " + e.backend + " backend returned no gradient for buffer '" + name + "'");
      grad("d" + name, it->second, g, base.dbuffers.at(name), 0);
    }
  }
  return r;
}

}  // namespace flexattn::cli
