// Compiles the sm80 kernel headers through NVRTC exactly as generated code will (the entry points of
// common/variant.cuh, include path = kernels/, no system include path), for sm_80 and sm_90a, and
// prints the ptxas resource lines. Needs no GPU.
//   g++ -std=c++17 nvrtc_check.cpp -I$CUDA/include -L$CUDA/lib64 -lnvrtc -o nvrtc_check
//   ./nvrtc_check <kernels dir> [D]
#include <nvrtc.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string source(int d) {
  const std::string D = std::to_string(d);
  return R"(#include "sm80/attn_fwd_sm80.cuh"
#include "sm80/attn_bwd_sm80.cuh"
using namespace flexattn::kern;
struct V {  // softcap(lit[0]) + causal, the shape of what the codegen emits
  static constexpr bool kHasScoreMod = true, kHasMaskMod = true, kHasBufferGrad = true;
  __device__ static float score_mod(const ModParams& m, float s, int b, int h, int q, int kv) {
    const float c = (float)m.lit[0];
    return c * tanhf(s / c) + ((const float*)m.buf[0])[h];
  }
  __device__ static bool mask_mod(const ModParams& m, int b, int h, int q, int kv) { return q >= kv; }
  __device__ static float score_grad(const ModParams& m, float s, int b, int h, int q, int kv, float g) {
    const float t = tanhf(s / (float)m.lit[0]);
    return g * (1.f - t * t);
  }
  __device__ static void buffer_grad(const ModParams& m, float s, int b, int h, int q, int kv, float g) {
    atomicAdd(m.buf_grad[0] + h, g);
  }
};
extern "C" __global__ void __launch_bounds__(sm80_fwd_threads()" + D + ", " + D + R"(), 1)
flexattn_fwd(const __grid_constant__ AttnParams p) { attn_fwd_sm80<V, bf16, )" + D + ", " + D + R"(>(p); }
extern "C" __global__ void __launch_bounds__(sm80_aux_threads(), 1)
flexattn_bwd_preprocess(const __grid_constant__ AttnParams p) { attn_bwd_preprocess_sm80<bf16, )" + D + ", " + D + R"(>(p); }
extern "C" __global__ void __launch_bounds__(sm80_bwd_threads()" + D + ", " + D + R"(), 1)
flexattn_bwd(const __grid_constant__ AttnParams p) { attn_bwd_sm80<V, bf16, )" + D + ", " + D + R"(>(p); }
extern "C" __global__ void __launch_bounds__(sm80_bwd_dq_threads()" + D + ", " + D + R"(), 1)
flexattn_bwd_dq(const __grid_constant__ AttnParams p) { attn_bwd_dq_sm80<V, bf16, )" + D + ", " + D + R"(>(p); }
extern "C" __global__ void __launch_bounds__(sm80_aux_threads(), 1)
flexattn_bwd_dq_convert(const __grid_constant__ AttnParams p) { attn_bwd_dq_convert_sm80<fp16, )" + D + R"(>(p); }
)";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string inc = std::string("--include-path=") + (argc > 1 ? argv[1] : "kernels");
  const int d = argc > 2 ? std::atoi(argv[2]) : 128;
  const std::string src = source(d);
  int failures = 0;
  for (const char* arch : {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90a"}) {
    nvrtcProgram prog;
    nvrtcCreateProgram(&prog, src.c_str(), "generated.cu", 0, nullptr, nullptr);
    const char* opts[] = {arch, "-std=c++17", inc.c_str(), "--ptxas-options=-v", "-default-device"};
    const nvrtcResult r = nvrtcCompileProgram(prog, 5, opts);
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::vector<char> log(n + 1, 0);
    nvrtcGetProgramLog(prog, log.data());
    size_t cubin = 0;
    if (r == NVRTC_SUCCESS) nvrtcGetCUBINSize(prog, &cubin);
    std::printf("== %s D=%d: %s, cubin %zu bytes\n%s\n", arch, d, nvrtcGetErrorString(r), cubin, log.data());
    failures += r != NVRTC_SUCCESS;
    nvrtcDestroyProgram(&prog);
  }
  return failures;
}
