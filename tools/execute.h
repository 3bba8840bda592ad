#pragma once
// Running a problem on a backend, and the --check / bench comparison built on it.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "flexattn/block_mask.h"
#include "problem.h"

namespace flexattn::cli {

// "cpu", "cuda" or "auto" -> "cpu" or "cuda". auto picks cuda when it is usable here and `dtype` is one
// it takes (bf16, f16). Throws for an unknown name, or for cuda when it cannot run (saying why).
// `note` (optional) receives why auto chose what it chose.
std::string resolve_backend(const std::string& requested, DType dtype, std::string* note = nullptr);

struct Execution {
  std::string backend;
  std::optional<BlockMask> block_mask;  // set when the variant has a mask
  HostTensor out, lse;                  // F64 (cpu) or F32 (cuda)
  HostTensor dq, dk, dv;                // with backward
  std::map<std::string, HostTensor> dbuffers;
  // cpu: one call. cuda: the median of `timing_reps` calls after the first (which compiles), or the
  // first call (compile included) when timing_reps is 0.
  double forward_ms = 0, backward_ms = 0, block_mask_ms = 0;
};

// deterministic: the backward's deterministic mode (BackwardArgs.deterministic; cuda only, the cpu backend is
// deterministic anyway).
Execution execute(const Problem& p, const std::string& backend, int block, bool backward, int timing_reps = 0,
                  bool deterministic = false);

struct CheckReport {
  std::string forward_what, backward_what;
  std::vector<Discrepancy> forward, backward;
  bool ok() const;
  double worst_rel() const;
};

// cpu backend: forward vs the dense evaluation, backward vs finite differences (check.h).
// cuda backend: every output vs the cpu reference; forward tolerance 4x the error of the
// same-precision naive baseline (dense_forward with the input dtype), backward a per-dtype bound.
CheckReport check_execution(const Problem& p, const Execution& e, bool backward);

}  // namespace flexattn::cli
