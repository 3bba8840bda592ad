// Device kernels of the ring, as NVRTC source. Conversions are written with PTX so the source needs
// no toolkit header (NVRTC sees only bundled headers, docs/architecture.md).
#include "cp/ring_kernels.h"

#include <map>
#include <mutex>

#include "flexattn/error.h"
#include "jit/device.h"
#include "jit/module.h"

namespace flexattn::cp::kernels {
namespace {

const char* kSource = R"CUDA(
typedef long long i64;
struct FoldParams { const void* part_out; const float* part_lse; float* acc_out; float* acc_lse;
                    i64 bh, rows, row0, L, dv; int bf16; };
struct AddParams { float* dst; const void* src; i64 bh, rows, row0, L, inner; int bf16; };
struct StoreParams { void* dst; const float* src; i64 sb, sh, sl, B, H, rows, inner; int bf16; };
struct SliceParams { float* dst; const float* src; i64 bh, rows, row0, L; float value; };

__device__ __forceinline__ float load_half(const void* p, i64 i, int bf16) {
  const unsigned short b = static_cast<const unsigned short*>(p)[i];
  if (bf16) return __int_as_float(int(unsigned(b) << 16));
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
  return f;
}
__device__ __forceinline__ void store_half(void* p, i64 i, float x, int bf16) {
  unsigned short b;
  if (bf16) asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
  else asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
  static_cast<unsigned short*>(p)[i] = b;
}
__device__ __forceinline__ i64 thread_index() { return i64(blockIdx.x) * blockDim.x + threadIdx.x; }

// One thread per row: the merge of docs/cp.md §1 for two partials, max-shifted so no exp overflows.
extern "C" __global__ void cp_fold(const FoldParams p) {
  const i64 i = thread_index();
  if (i >= p.bh * p.rows) return;
  const float neg_inf = __int_as_float(0xff800000);
  const float lp = p.part_lse[i];
  if (lp == neg_inf) return;
  const i64 a = (i / p.rows) * p.L + p.row0 + i % p.rows;
  const float la = p.acc_lse[a];
  const float m = fmaxf(la, lp);
  const float wa = la == neg_inf ? 0.f : expf(la - m), wp = expf(lp - m);
  const float s = wa + wp;
  for (i64 e = 0; e < p.dv; ++e) {
    const float prev = wa == 0.f ? 0.f : wa * p.acc_out[a * p.dv + e];
    p.acc_out[a * p.dv + e] = (prev + wp * load_half(p.part_out, i * p.dv + e, p.bf16)) / s;
  }
  p.acc_lse[a] = m + logf(s);
}

extern "C" __global__ void cp_add_rows(const AddParams p) {
  const i64 i = thread_index();
  if (i >= p.bh * p.rows * p.inner) return;
  const i64 e = i % p.inner, r = (i / p.inner) % p.rows, bh = i / (p.inner * p.rows);
  p.dst[(bh * p.L + p.row0 + r) * p.inner + e] += load_half(p.src, i, p.bf16);
}

extern "C" __global__ void cp_store(const StoreParams p) {
  const i64 i = thread_index();
  if (i >= p.B * p.H * p.rows * p.inner) return;
  const i64 e = i % p.inner, r = (i / p.inner) % p.rows, bh = i / (p.inner * p.rows);
  store_half(p.dst, (bh / p.H) * p.sb + (bh % p.H) * p.sh + r * p.sl + e, p.src[i], p.bf16);
}

extern "C" __global__ void cp_slice_or_fill(const SliceParams p) {
  const i64 i = thread_index();
  if (i >= p.bh * p.rows) return;
  p.dst[i] = p.src ? p.src[(i / p.rows) * p.L + p.row0 + i % p.rows] : p.value;
}
)CUDA";

// Host mirrors of the parameter structs (jit::launch checks the sizes where the driver reports them).
struct FoldParams {
  const void* part_out;
  const float* part_lse;
  float* acc_out;
  float* acc_lse;
  int64_t bh, rows, row0, L, dv;
  int bf16;
};
struct AddParams {
  float* dst;
  const void* src;
  int64_t bh, rows, row0, L, inner;
  int bf16;
};
struct StoreParams {
  void* dst;
  const float* src;
  int64_t sb, sh, sl, B, H, rows, inner;
  int bf16;
};
struct SliceParams {
  float* dst;
  const float* src;
  int64_t bh, rows, row0, L;
  float value;
};

constexpr unsigned kThreads = 256;

jit::CUfunction function(const char* name) {
  static std::mutex mu;
  static std::map<std::string, jit::CompiledKernel> by_arch;
  jit::CUcontext ctx = nullptr;
  jit::cu_check(jit::driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  jit::CUdevice dev = 0;
  jit::cu_check(jit::driver().cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const std::string arch = jit::device_props(dev).arch;
  std::lock_guard<std::mutex> lock(mu);
  auto it = by_arch.find(arch);
  if (it == by_arch.end()) it = by_arch.emplace(arch, jit::get_or_compile(request(arch))).first;
  return jit::get_function(it->second, name);
}

template <class P>
void run(const char* name, int64_t threads, const P& params, jit::CUstream stream) {
  if (threads <= 0) return;
  jit::LaunchConfig c;
  c.grid.x = unsigned((threads + kThreads - 1) / kThreads);
  c.block.x = kThreads;
  c.stream = stream;
  jit::launch(function(name), c, params);
}

int is_bf16(DType t) {
  check(t == DType::BF16 || t == DType::F16,
        "ring kernels: dtype must be bf16 or f16; got " + std::string(dtype_name(t)));
  return t == DType::BF16;
}

}  // namespace

const std::string& source() {
  static const std::string s = kSource;
  return s;
}

jit::KernelRequest request(const std::string& arch) {
  return {"cp_ring_" + arch, source(), arch, {}, {"cp_fold", "cp_add_rows", "cp_store", "cp_slice_or_fill"}};
}

void fold(const void* part_out, const float* part_lse, float* acc_out, float* acc_lse, int64_t bh, int64_t rows,
          int64_t row0, int64_t L, int64_t dv, DType dtype, jit::CUstream stream) {
  run("cp_fold", bh * rows, FoldParams{part_out, part_lse, acc_out, acc_lse, bh, rows, row0, L, dv, is_bf16(dtype)},
      stream);
}

void add_rows(float* dst, const void* src, int64_t bh, int64_t rows, int64_t row0, int64_t L, int64_t inner,
              DType dtype, jit::CUstream stream) {
  run("cp_add_rows", bh * rows * inner, AddParams{dst, src, bh, rows, row0, L, inner, is_bf16(dtype)}, stream);
}

void store(void* dst, const int64_t s[3], const float* src, int64_t B, int64_t H, int64_t rows, int64_t inner,
           DType dtype, jit::CUstream stream) {
  run("cp_store", B * H * rows * inner, StoreParams{dst, src, s[0], s[1], s[2], B, H, rows, inner, is_bf16(dtype)},
      stream);
}

void slice_or_fill(float* dst, const float* src, int64_t bh, int64_t rows, int64_t row0, int64_t L, float value,
                   jit::CUstream stream) {
  run("cp_slice_or_fill", bh * rows, SliceParams{dst, src, bh, rows, row0, L, value}, stream);
}

}  // namespace flexattn::cp::kernels
