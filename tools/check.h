#pragma once
// What `flexattn run --check` measures, independently of the code under test:
//  - forward: out and lse against a plain dense evaluation written here (double precision, one row at a
//    time, no block mask, the mods evaluated directly with the IR interpreter);
//  - backward: dq, dk, dv and every buffer gradient against central finite differences of
//    L = sum(out * dout) computed with that dense evaluation, at a few seeded entries per tensor.
// Both paths evaluate the mods with the same IR interpreter, so a wrong interpreter is not caught here
// (tests/unit/ir covers it); everything around the mods (block mask, GQA, softmax, gradients of the
// score mod and of buffers) is.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flexattn/tensor.h"
#include "problem.h"

namespace flexattn::cli {

struct Discrepancy {
  std::string name;     // "out", "lse", "dq", "dbias", ...
  double max_abs = 0;   // max |got - want| over the compared entries
  double rel = 0;       // max_abs / max |want| over the whole tensor (normwise)
  double tol = 0;       // rel must be <= tol
  int64_t compared = 0; // entries compared
  bool ok() const { return rel <= tol; }
};

// max |t| over the finite entries (0 if none).
double max_abs_of(const HostTensor& t);

// Compares two tensors of equal shape element-wise. Non-finite values must match exactly (both NaN, or
// the same infinity); otherwise the discrepancy is infinite. scale_floor: rel divides by max(max |want|,
// scale_floor) (a gradient that cancels to ~0, e.g. dq with a single key, measured against its terms' scale).
Discrepancy compare(const std::string& name, const HostTensor& got, const HostTensor& want, double tol,
                    double scale_floor = 0);

// out [B,H,Q,Dv] and lse [B,H,Q] (natural log, F64 tensors) of the dense evaluation: exact double math
// (precision F64), or torch eager's arithmetic for inputs of dtype `precision` (F32 / F16 / BF16:
// f32 scores and softmax, P rounded to that dtype before P·V, out rounded to it). The latter is the
// same-precision naive baseline that backend tolerances are derived from.
void dense_forward(const Problem& p, HostTensor* out, HostTensor* lse, DType precision = DType::F64);

// The relative error the GPU's approximate instructions may add where a mod asks for them (tanh_approx:
// tanh.approx.f32, ~2^-11), and the variant with every such node made that much off (tanh_approx(x) -> tanh(x) *
// (1 - 2^-11)): the naive baseline of a backend check then carries the approximation's own error, so a mod that
// chose it is measured against what it may cost instead of against exact math. Empty when the mods have none.
constexpr double kApproxRelError = 1.0 / 2048;
std::optional<Variant> with_approximation_error(const Variant& v);

// Finite-difference check of the given gradients (F64, shapes of q / k / v / the buffers) at
// `entries` seeded entries per tensor.
std::vector<Discrepancy> check_gradients(const Problem& p, const HostTensor& dq, const HostTensor& dk,
                                         const HostTensor& dv, const std::map<std::string, HostTensor>& dbuffers,
                                         int entries, double tol);

std::string format(const Discrepancy& d);  // "out      max_abs 1.2e-16  rel 3.4e-16  ok"

}  // namespace flexattn::cli
