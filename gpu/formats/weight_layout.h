// How a weight matrix lies in device memory. ggml's blocks of 18, 20, 22, 34 and 210 bytes
// cannot be read with aligned 16-byte loads, so at upload each matrix is split into planes,
// each a [rows][blocks per row][bytes per block] array starting 256-byte aligned:
//
//   type            planes (bytes per 32- or 256-element block)
//   F32 F16 BF16    elements (128 / 64 / 64 per 32)
//   Q4_0            quants 16 | d 2
//   Q4_1            quants 16 | d, m 4
//   Q5_0            quants 16 | fifth bits 4 | d 2
//   Q8_0            quants 32 | d 2
//   Q4_K Q5_K       ggml's block, 144 / 176 (already multiples of 16)
//   Q6_K            ql, qh, scales 208 | d 2
//
// The quant bytes keep ggml's order within a block, so gpu/formats/block_math.h reads them
// as engine/gguf/quantize.cpp does. A layout holds the same bytes as the ggml rows plus at
// most 255 bytes of alignment per plane. Rows must be a multiple of 64 elements (every
// matrix of the architectures Tandem runs is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/gguf/tensor_type.h"
#include "gpu/formats/block_math.h"

namespace tandem::gpu {

inline constexpr int kMaxPlanes = 3;

struct matrix_layout {
  tensor_type type = tensor_type::f32;
  int64_t rows = 0, cols = 0;
  int64_t blocks_per_row = 0;  // 32-element blocks (float and 32-block types) or 256-element super-blocks
  int n_planes = 0;
  size_t plane_offset[kMaxPlanes] = {};  // from the matrix's first byte, 256-byte aligned
  uint32_t block_bytes[kMaxPlanes] = {};
  size_t bytes = 0;  // the whole allocation

  int64_t plane_row_bytes(int p) const { return blocks_per_row * block_bytes[p]; }
  int64_t n_chunks() const { return cols / fmt::kChunk; }
};

// The weight types the CUDA backend reads.
bool device_supports(tensor_type type);
// "f32, f16, bf16, q4_0, ..." for error messages.
std::string device_type_list();

// The layout of a rows x cols matrix of `type`. Throws std::invalid_argument naming the
// problem when the type has no device layout or cols is not a multiple of 64 (and of 256
// for the K-quants).
matrix_layout layout_of(tensor_type type, int64_t rows, int64_t cols);

// Writes rows [row0, row0 + n) of the device layout from n consecutive ggml rows
// (row_bytes(type, cols) each). `out` is the whole matrix's buffer (layout.bytes).
void repack_rows(const matrix_layout& layout, int64_t row0, int64_t n, const std::byte* ggml, std::byte* out);

// The view kernels read: plane pointers into the allocation at `base`.
fmt::matrix_view view_of(const matrix_layout& layout, const void* base);

}  // namespace tandem::gpu
