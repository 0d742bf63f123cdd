#include "gpu/gemm.h"

#include <cublas_v2.h>

#include <string>

#include "gpu/kernels.h"
#include "gpu/plan/gpu_sizing.h"

namespace tandem::gpu {
namespace {

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw cuda_error(std::string(what) + ": cuBLAS status " + std::to_string(st));
}

}  // namespace

gemm_engine::gemm_engine(size_t max_weight_elems, size_t max_act_elems)
    : weight_scratch_(max_weight_elems * 2), act_scratch_(max_act_elems * 2), cublas_workspace_(kCublasWorkspaceBytes) {
  cublasHandle_t h = nullptr;
  check_blas(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  check_blas(cublasSetWorkspace(h, cublas_workspace_.data(), cublas_workspace_.bytes()), "cublasSetWorkspace");
}

gemm_engine::~gemm_engine() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void gemm_engine::bind_stream(stream_handle s) {
  if (stream_set_ && s == stream_) return;
  auto* h = static_cast<cublasHandle_t>(handle_);
  // cublasSetStream drops the handle back to cuBLAS's own workspace pool, which would
  // allocate (inside a CUDA graph capture too): put ours back each time.
  check_blas(cublasSetStream(h, s), "cublasSetStream");
  check_blas(cublasSetWorkspace(h, cublas_workspace_.data(), cublas_workspace_.bytes()), "cublasSetWorkspace");
  stream_ = s;
  stream_set_ = true;
}

void gemm_engine::matmul(const matrix_layout& w, const void* base, int64_t row0, int32_t rows, const float* x,
                         int32_t n_tok, float* y, stream_handle s) {
  if (rows <= 0 || n_tok <= 0) return;
  if (row0 < 0 || row0 + rows > w.rows) throw cuda_error("gemm: rows out of range");
  bind_stream(s);
  auto* h = static_cast<cublasHandle_t>(handle_);
  const float one = 1.0f, zero = 0.0f;
  const auto cols = static_cast<int32_t>(w.cols);
  // Float layouts are ggml's rows, so a row range is an offset.
  const void* a = static_cast<const char*>(base) + w.plane_offset[0] + row0 * w.plane_row_bytes(0);
  const void* b = x;
  cudaDataType_t ab_type = CUDA_R_32F;
  if (w.type != tensor_type::f32) {
    const size_t n_act = static_cast<size_t>(n_tok) * cols;
    if (n_act * 2 > act_scratch_.bytes()) throw cuda_error("gemm: activation scratch too small");
    const bool bf16 = w.type != tensor_type::f16;
    launch_to_half(x, n_act, act_scratch_.as<uint16_t>(), bf16, s);
    b = act_scratch_.data();
    ab_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (w.type != tensor_type::f16 && w.type != tensor_type::bf16) {
      if (static_cast<size_t>(rows) * cols * 2 > weight_scratch_.bytes()) {
        throw cuda_error("gemm: weight scratch too small");
      }
      launch_dequantize_bf16(w, base, row0, rows, weight_scratch_.as<uint16_t>(), s);
      a = weight_scratch_.data();
    }
  }
  check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n_tok, cols, &one, a, ab_type, cols, b, ab_type, cols,
                          &zero, y, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
}

}  // namespace tandem::gpu
