#include "runtime/exact_grads.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "common/exact_sum.h"
#include "flexattn/jit.h"
#include "jit/driver_api.h"
#include "jit/module.h"
#include "jit/once_per_arch.h"

namespace flexattn::runtime {
namespace {

constexpr size_t kAlign = 256;
constexpr char kFinishEntry[] = "flexattn_exact_grad_finish";

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One buffer's accumulators: kExactWords words per element, 256-aligned.
size_t slot_bytes(int64_t numel) { return aligned(size_t(numel) * kern::kExactWords * sizeof(long long)); }

int64_t numel_of(const BackwardArgs& a, const std::string& name) {
  auto it = a.fwd.bindings.buffers.find(name);
  if (it == a.fwd.bindings.buffers.end()) return 0;  // cuda_backward's binding check names the missing buffer
  int64_t n = 1;
  for (int64_t d : it->second.shape) {
    if (d < 1 || d > (int64_t(1) << 40)) return 0;  // fill_mod_params names the bad dimension
    n *= d;
    if (n > (int64_t(1) << 40)) return 0;
  }
  return n;
}

std::string finish_source() {
  return std::string("// flexattn: deterministic buffer gradients, exact sums rounded once (runtime/exact_grads.cc)\n"
                     "#include \"common/exact_sum.h\"\n"
                     "using namespace flexattn::kern;\n"
                     "extern \"C\" __global__ void __launch_bounds__(256) ") +
         kFinishEntry +
         "(const __grid_constant__ ExactGradFinishParams p) {\n"
         "  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < p.n; i += 256ll * gridDim.x)\n"
         "    p.out[i] += exact_to_float(p.words + i, p.n);\n"
         "}\n";
}

}  // namespace

jit::CompiledKernel exact_grads_kernel(const std::string& arch) {
  static std::mutex mu;
  static auto* by_arch = new std::map<std::string, jit::CompiledKernel>();
  return jit::once_per_arch(mu, *by_arch, arch, [&] {
    return jit::KernelRequest{"exact_grad_finish", finish_source(), arch, {}, {kFinishEntry}};
  });
}

size_t exact_grad_bytes(const BackwardArgs& a) {
  if (!a.deterministic) return 0;
  size_t bytes = 0;
  for (const auto& [name, ptr] : a.fwd.bindings.buffer_grads) bytes += slot_bytes(numel_of(a, name));
  return bytes;
}

ExactGrads begin_exact_grads(BackwardArgs& a, char* ws, const std::string& arch) {
  ExactGrads g;
  const size_t bytes = exact_grad_bytes(a);
  if (bytes == 0) return g;
  // Compiled and loaded before anything is enqueued, so a failure leaves no half-done backward behind.
  g.finish = jit::get_function(exact_grads_kernel(arch), kFinishEntry);
  jit::cu_check(jit::driver().cuMemsetD8Async(reinterpret_cast<jit::CUdeviceptr>(ws), 0, bytes,
                                              static_cast<jit::CUstream>(a.fwd.stream)),
                "cuMemsetD8Async");
  for (auto& [name, ptr] : a.fwd.bindings.buffer_grads) {
    const int64_t n = numel_of(a, name);
    if (ptr != nullptr) {  // a null one stays null: fill_mod_params names it if the variant needs it
      g.slots.push_back({ptr, reinterpret_cast<const long long*>(ws), n});
      // Tagged (low bit): the kernels' buffer_grad_accumulate adds into kExactWords words per element there,
      // word-major ([kExactWords][numel], numel from the buffer's shape as the kernels see it in buf_shape).
      ptr = reinterpret_cast<float*>(ws + 1);
    }
    ws += slot_bytes(n);
  }
  return g;
}

void finish_exact_grads(const ExactGrads& g, void* stream) {
  if (g.slots.empty()) return;
  for (const ExactGrads::Slot& s : g.slots) {
    if (s.numel == 0) continue;
    jit::LaunchConfig c;
    c.grid.x = unsigned(std::min<int64_t>((s.numel + 255) / 256, 8192));
    c.block.x = 256;
    c.stream = static_cast<jit::CUstream>(stream);
    jit::launch(g.finish, c, kern::ExactGradFinishParams{s.words, s.user, s.numel});
  }
}

}  // namespace flexattn::runtime
