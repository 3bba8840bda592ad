#pragma once
// The launch attributes of a decode call (runtime/decode_cuda.cc), separate so host tests can check them.
#include "decode/decode_config.h"
#include "jit/driver_api.h"

namespace flexattn::runtime {

// The attribute of the split kernel's launch (combine = false) or the combine's (combine = true) under
// `plan` (kern::decode_launch_plan): a cluster of (1, 1, plan.cluster_z) for the split kernel on the
// cluster path, programmatic stream serialization for a PDL combine. Writes *attr and returns 1, or
// returns 0 for a plain cuLaunchKernel.
int decode_launch_attrs(const kern::DecodeLaunchPlan& plan, bool combine, jit::CUlaunchAttribute* attr);

}  // namespace flexattn::runtime
