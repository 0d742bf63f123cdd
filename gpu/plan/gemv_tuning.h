// Launch shapes of the GEMV (decode and small-batch matrix products), chosen by measurement:
// gpu_bench --tune times every variant on the shapes of real models and prints the winners
// as lines of gpu/plan/gemv_table.inc, the checked-in table this file reads. A shape the
// table lacks gets a rule of thumb (enough warps in flight to cover the device).
//
// A variant: each warp-group of `warps_per_row` warps computes `rows_per_warp` rows, its
// warps splitting the row's 64-element chunks (a short matrix, such as the K/V projection
// with 512-1,024 rows, otherwise leaves the device idle); tokens are taken up to
// gemv_token_tile(n) at a time, the weights read once per tile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/tensor_type.h"

namespace tandem::gpu {

struct gemv_variant {
  uint8_t rows_per_warp = 1;  // 1 or 2
  uint8_t warps_per_row = 1;  // 1, 2 or 4
};

inline bool operator==(gemv_variant a, gemv_variant b) {
  return a.rows_per_warp == b.rows_per_warp && a.warps_per_row == b.warps_per_row;
}

// Every variant the kernels are compiled for, in the order gpu_bench tries them. (C++17:
// nvcc reads this header.)
const std::vector<gemv_variant>& gemv_variants();

// Tokens per pass for n tokens: 1, 2, 4 or 8 (n > 8 runs in tiles of 8).
int32_t gemv_token_tile(int32_t n_tok);

struct gemv_table_entry {
  tensor_type type;
  int32_t rows, cols;
  int32_t token_tile;  // 1, 2, 4, 8
  gemv_variant variant;
};

// The variant for a product: the table's entry for (type, rows, cols, tile), else the
// rule of thumb for the device's multiprocessor count.
gemv_variant pick_gemv_variant(tensor_type type, int32_t rows, int32_t cols, int32_t n_tok, int32_t sm_count);
gemv_variant rule_of_thumb(int32_t rows, int32_t n_tok, int32_t sm_count);

// The checked-in table, and a table measured in this process (gpu_bench) that takes
// precedence over it.
const std::vector<gemv_table_entry>& checked_in_gemv_table();
void set_measured_gemv_table(std::vector<gemv_table_entry> entries);

// One line of gemv_table.inc for an entry: {tensor_type::q4_k, 4096, 4096, 1, {1, 2}},
std::string gemv_table_line(const gemv_table_entry& e);

}  // namespace tandem::gpu
