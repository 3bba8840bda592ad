#pragma once
// The ring's small device kernels (fold a partial into the running result, accumulate, convert),
// compiled with NVRTC from a source kept here. Every launch is on `stream` and element-wise.
#include <cstdint>
#include <string>

#include "flexattn/dtype.h"
#include "flexattn/jit.h"
#include "jit/driver_api.h"

namespace flexattn::cp::kernels {

// The NVRTC source and its entry points (the compile test builds it for sm_80 and sm_90a).
const std::string& source();
jit::KernelRequest request(const std::string& arch);

// Rows are (bh, row) with bh over B·H; "row0" is where a piece's rows start in a larger buffer.
// acc_out [BH, L, dv] f32, acc_lse [BH, L] f32 += the partial (part_out [BH, rows, dv] in `dtype`,
// part_lse [BH, rows]) by the merge rule; −inf partial rows are skipped whatever part_out holds.
void fold(const void* part_out, const float* part_lse, float* acc_out, float* acc_lse, int64_t bh, int64_t rows,
          int64_t row0, int64_t L, int64_t dv, DType dtype, jit::CUstream stream);
// dst [BH, L, inner] f32 at row0 += src [BH, rows, inner] in `dtype`, contiguous.
void add_rows(float* dst, const void* src, int64_t bh, int64_t rows, int64_t row0, int64_t L, int64_t inner,
              DType dtype, jit::CUstream stream);
// dst (a strided [B, H, rows, inner] view in `dtype`) = src [B·H, rows, inner] f32, contiguous.
void store(void* dst, const int64_t dst_strides[3], const float* src, int64_t B, int64_t H, int64_t rows, int64_t inner,
           DType dtype, jit::CUstream stream);
// dst [BH, rows] = src [BH, L] at row0 (f32), or `value` everywhere when src is null.
void slice_or_fill(float* dst, const float* src, int64_t bh, int64_t rows, int64_t row0, int64_t L, float value,
                   jit::CUstream stream);

}  // namespace flexattn::cp::kernels
