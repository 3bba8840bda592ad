#pragma once
// One correctness case of the lab (run_case.cu) and the timing table (timing.cu).
#include <random>
#include <string>

#include "lab.h"

namespace lab {

struct Case {
  std::string name;
  int variant = kIdentity;
  Dt dt = Dt::BF16;
  int D = 64, Dv = 64, B = 2, Hq = 4, Hkv = 4, Bkv = 2, L = 17, S = 17;
  int q_block = 128, kv_block = 128;
  bool dense = false;    // no block mask (null list pointers)
  bool mask_bh = false;  // block mask with full [B, Hq] dims instead of broadcast [1, 1]
  bool dlse = false;     // nonzero gradient w.r.t. lse
  double lit0 = 0, lit1 = 0;
};

struct CaseResult {
  double e_out = 0, e_lse = 0, e_max = 0;        // rel-L2 / max-abs (natural log units)
  double e_dq = 0, e_dk = 0, e_dv = 0, e_bg = 0;  // atomic dQ path
  double e_dq_det = 0;                            // deterministic dQ pass
  bool inf_mismatch = false;                      // -inf lse/max rows differ from the reference
  bool nan = false;                               // a NaN (or unwritten poison) in any output
  bool det_bitwise = true;                        // two deterministic runs identical (dq, dk, dv)
  bool pass = false;
};

CaseResult run_case(const Registry& reg, const Case& c, std::mt19937_64& rng);
std::string format_result(const Case& c, const CaseResult& r);
void run_timings(const Registry& reg);

}  // namespace lab
