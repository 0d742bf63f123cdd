// Matrix products of many tokens (prefill, verification, large decode batches) on tensor
// cores through cuBLAS: y[T][rows] = x[T][cols] . W^T with F32 results.
//
//   F32 weights:   SGEMM-equivalent GemmEx (32F inputs, no TF32)
//   F16 weights:   x -> F16, F16 x F16 -> F32
//   BF16 weights:  x -> BF16, BF16 x BF16 -> F32
//   quantized:     W's rows dequantized to BF16 into scratch first, then as BF16
//
// cuBLAS is column-major: the row-major W[rows][cols] is a column-major cols x rows
// matrix, so C (rows x T, = row-major y[T][rows]) = op_T(W) . x with lda = ldb = cols.
// Plain C++ (the handle is opaque); scratch is sized once by the caller.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf/tensor_type.h"
#include "gpu/device.h"
#include "gpu/formats/weight_layout.h"

namespace tandem::gpu {

class gemm_engine {
 public:
  // weight_scratch: the largest rows * cols of a quantized matrix; act_scratch: the largest
  // T * cols of an activation.
  gemm_engine(size_t max_weight_elems, size_t max_act_elems);
  ~gemm_engine();
  gemm_engine(const gemm_engine&) = delete;
  gemm_engine& operator=(const gemm_engine&) = delete;

  size_t scratch_bytes() const { return weight_scratch_.bytes() + act_scratch_.bytes() + cublas_workspace_.bytes(); }

  // y[T][rows] = x . W[row0 .. row0 + rows)^T, W in its device layout at `base` (a row range
  // serves one part of a fused matrix).
  void matmul(const matrix_layout& w, const void* base, int64_t row0, int32_t rows, const float* x, int32_t n_tok,
              float* y, stream_handle s);
  // Binds the cuBLAS handle to `s` with this engine's workspace (matmul does it when the
  // stream changes; call it before a graph capture so that the capture records no setup).
  void bind_stream(stream_handle s);

 private:
  void* handle_ = nullptr;          // cublasHandle_t
  stream_handle stream_ = nullptr;  // the stream the handle is bound to
  bool stream_set_ = false;
  device_buffer weight_scratch_, act_scratch_, cublas_workspace_;
};

}  // namespace tandem::gpu
