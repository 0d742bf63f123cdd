#include "gpu/formats/weight_layout.h"

#include <cstring>
#include <stdexcept>

namespace tandem::gpu {
namespace {

// One plane: `bytes` bytes per block, taken from offset `from` of each ggml block.
struct plane_source {
  uint32_t from, bytes;
};

struct type_planes {
  int64_t block_elems = 0;  // elements per layout block
  uint32_t ggml_bytes = 0;  // bytes those elements take in a ggml row
  int n = 0;
  plane_source planes[kMaxPlanes];
};

// nullopt-like: block_elems 0 for a type without a device layout.
type_planes planes_of(tensor_type type) {
  switch (type) {
    case tensor_type::f32:
      return {32, 128, 1, {{0, 128}}};
    case tensor_type::f16:
    case tensor_type::bf16:
      return {32, 64, 1, {{0, 64}}};
    case tensor_type::q4_0:  // d | qs[16]
      return {32, 18, 2, {{2, 16}, {0, 2}}};
    case tensor_type::q4_1:  // d | m | qs[16]
      return {32, 20, 2, {{4, 16}, {0, 4}}};
    case tensor_type::q5_0:  // d | qh[4] | qs[16]
      return {32, 22, 3, {{6, 16}, {2, 4}, {0, 2}}};
    case tensor_type::q8_0:  // d | qs[32]
      return {32, 34, 2, {{2, 32}, {0, 2}}};
    case tensor_type::q4_k:
      return {256, 144, 1, {{0, 144}}};
    case tensor_type::q5_k:
      return {256, 176, 1, {{0, 176}}};
    case tensor_type::q6_k:  // ql[128] | qh[64] | scales[16] | d
      return {256, 210, 2, {{0, 208}, {208, 2}}};
    default:
      return {};
  }
}

constexpr size_t kPlaneAlign = 256;

size_t align_up(size_t n) { return (n + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign; }

}  // namespace

bool device_supports(tensor_type type) { return planes_of(type).block_elems > 0; }

std::string device_type_list() {
  std::string out;
  for (tensor_type t : kWeightTypes) {
    if (!device_supports(t)) continue;
    if (!out.empty()) out += ", ";
    std::string name(traits_of(t).name);
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    out += name;
  }
  return out;
}

matrix_layout layout_of(tensor_type type, int64_t rows, int64_t cols) {
  const type_planes tp = planes_of(type);
  const std::string name(traits_of(type).name);
  if (tp.block_elems == 0) {
    throw std::invalid_argument("the CUDA backend cannot read " + name + " weights (it reads " + device_type_list() +
                                ")");
  }
  if (rows < 0 || cols <= 0 || cols % fmt::kChunk != 0 || cols % tp.block_elems != 0) {
    throw std::invalid_argument("the CUDA backend needs " + name + " matrix rows of a multiple of " +
                                std::to_string(tp.block_elems > fmt::kChunk ? tp.block_elems : fmt::kChunk) +
                                " elements, not " + std::to_string(cols));
  }
  matrix_layout l;
  l.type = type, l.rows = rows, l.cols = cols;
  l.blocks_per_row = cols / tp.block_elems;
  l.n_planes = tp.n;
  size_t at = 0;
  for (int p = 0; p < tp.n; ++p) {
    l.plane_offset[p] = at;
    l.block_bytes[p] = tp.planes[p].bytes;
    at = align_up(at + static_cast<size_t>(rows) * static_cast<size_t>(l.plane_row_bytes(p)));
  }
  l.bytes = at == 0 ? kPlaneAlign : at;
  return l;
}

void repack_rows(const matrix_layout& l, int64_t row0, int64_t n, const std::byte* ggml, std::byte* out) {
  if (row0 < 0 || n < 0 || row0 + n > l.rows) throw std::invalid_argument("repack_rows: rows out of range");
  const type_planes tp = planes_of(l.type);
  const size_t src_row = static_cast<size_t>(l.blocks_per_row) * tp.ggml_bytes;
  for (int p = 0; p < l.n_planes; ++p) {
    const uint32_t from = tp.planes[p].from, bytes = tp.planes[p].bytes;
    for (int64_t r = 0; r < n; ++r) {
      const std::byte* src = ggml + static_cast<size_t>(r) * src_row;
      std::byte* dst =
          out + l.plane_offset[p] + static_cast<size_t>(row0 + r) * static_cast<size_t>(l.plane_row_bytes(p));
      if (bytes == tp.ggml_bytes) {  // the plane is ggml's block itself: one copy per row
        std::memcpy(dst, src, src_row);
        continue;
      }
      for (int64_t b = 0; b < l.blocks_per_row; ++b) {
        std::memcpy(dst + static_cast<size_t>(b) * bytes, src + static_cast<size_t>(b) * tp.ggml_bytes + from, bytes);
      }
    }
  }
}

fmt::matrix_view view_of(const matrix_layout& l, const void* base) {
  fmt::matrix_view v;
  for (int p = 0; p < l.n_planes; ++p) {
    v.plane[p] = static_cast<const uint8_t*>(base) + l.plane_offset[p];
    v.row_bytes[p] = l.plane_row_bytes(p);
  }
  return v;
}

}  // namespace tandem::gpu
