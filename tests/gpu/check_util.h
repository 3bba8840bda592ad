// What the GPU check programs share: how far a device result is from the CPU reference.
#pragma once
#include <algorithm>
#include <cmath>

#include "flexattn/tensor.h"

namespace flexattn::gpu_check {

// Largest finite |x| (the scale errors are measured against).
inline double max_abs(const HostTensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(t.get(i))) m = std::max(m, std::fabs(t.get(i)));
  return m;
}

// Max |got - want| / max(1e-6, scale) over finite pairs; equal infinities match; any other non-finite
// mismatch (NaN vs number, -inf vs finite) returns +inf.
inline double rel_err(const HostTensor& got, const HostTensor& want, double scale) {
  double e = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (std::isinf(w) && g == w) continue;
    if (!std::isfinite(g) || !std::isfinite(w)) return INFINITY;
    e = std::max(e, std::fabs(g - w));
  }
  return e / std::max(scale, 1e-6);
}

}  // namespace flexattn::gpu_check
