#include "gpu/plan/gemv_tuning.h"

#include <algorithm>
#include <cstdio>

namespace tandem::gpu {
namespace {

const std::vector<gemv_table_entry> kCheckedIn = {
#include "gpu/plan/gemv_table.inc"
};

// Set once by gpu_bench before any model exists; read by every launch after.
std::vector<gemv_table_entry>& measured() {
  static std::vector<gemv_table_entry> table;
  return table;
}

const gemv_table_entry* find(const std::vector<gemv_table_entry>& table, tensor_type type, int32_t rows, int32_t cols,
                             int32_t tile) {
  for (const gemv_table_entry& e : table) {
    if (e.type == type && e.rows == rows && e.cols == cols && e.token_tile == tile) return &e;
  }
  return nullptr;
}

}  // namespace

const std::vector<gemv_variant>& gemv_variants() {
  static const std::vector<gemv_variant> variants = {{1, 1}, {2, 1}, {1, 2}, {1, 4}};
  return variants;
}

int32_t gemv_token_tile(int32_t n_tok) {
  if (n_tok <= 1) return 1;
  if (n_tok <= 2) return 2;
  if (n_tok <= 4) return 4;
  return 8;
}

const std::vector<gemv_table_entry>& checked_in_gemv_table() { return kCheckedIn; }

void set_measured_gemv_table(std::vector<gemv_table_entry> entries) { measured() = std::move(entries); }

gemv_variant rule_of_thumb(int32_t rows, int32_t n_tok, int32_t sm_count) {
  // Aim for at least 16 warps per multiprocessor: split rows across warps while one warp
  // per row would leave fewer; share activations between two rows once the tile is wide
  // enough for their loads to matter and rows are plentiful.
  const int64_t want_warps = 16LL * std::max(sm_count, 1);
  if (rows >= 2 * want_warps && gemv_token_tile(n_tok) >= 4) return {2, 1};
  if (rows >= want_warps) return {1, 1};
  if (2LL * rows >= want_warps) return {1, 2};
  return {1, 4};
}

gemv_variant pick_gemv_variant(tensor_type type, int32_t rows, int32_t cols, int32_t n_tok, int32_t sm_count) {
  const int32_t tile = gemv_token_tile(n_tok);
  if (const auto* e = find(measured(), type, rows, cols, tile)) return e->variant;
  if (const auto* e = find(checked_in_gemv_table(), type, rows, cols, tile)) return e->variant;
  return rule_of_thumb(rows, n_tok, sm_count);
}

std::string gemv_table_line(const gemv_table_entry& e) {
  std::string name(traits_of(e.type).name);
  for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  char buf[160];
  std::snprintf(buf, sizeof buf, "{tensor_type::%s, %d, %d, %d, {%d, %d}},", name.c_str(), e.rows, e.cols, e.token_tile,
                e.variant.rows_per_warp, e.variant.warps_per_row);
  return buf;
}

}  // namespace tandem::gpu
