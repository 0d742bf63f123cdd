#include "gpu/plan/step_packing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tandem::gpu {

packed_step measure_step(const step_input& in, const pack_options& o) {
  const int64_t bt = o.block_tokens;
  packed_step ps;
  ps.n_layers = in.n_layers;
  size_t width = 1;
  for (const auto& sq : in.seqs) {
    const int64_t end = static_cast<int64_t>(sq.start_pos) + static_cast<int64_t>(sq.tokens.size());
    if (sq.start_pos < 0) throw std::invalid_argument("forward: negative start position");
    if (static_cast<int64_t>(sq.blocks.size()) * bt < end) {
      throw std::invalid_argument("forward: block table of sequence " + std::to_string(sq.seq) +
                                  " does not cover position " + std::to_string(end - 1));
    }
    for (int32_t b : sq.blocks) {
      if (b < 0 || b >= o.n_blocks) throw std::invalid_argument("forward: bad block id");
    }
    for (int32_t tok : sq.tokens) {
      if (tok < 0 || static_cast<uint32_t>(tok) >= o.n_vocab) {
        throw std::invalid_argument("forward: token id " + std::to_string(tok) + " outside the vocabulary");
      }
    }
    ps.first_row.push_back(static_cast<int32_t>(ps.n_rows));
    const int64_t rows = sq.tokens.empty() ? 0 : sq.want_all_logits ? static_cast<int64_t>(sq.tokens.size()) : 1;
    ps.n_rows_of.push_back(static_cast<int32_t>(rows));
    ps.n_tokens += static_cast<int64_t>(sq.tokens.size());
    ps.n_rows += rows;
    width = std::max(width, sq.blocks.size());
    ps.max_keys = std::max(ps.max_keys, static_cast<int32_t>(end));
  }
  ps.n_real_rows = static_cast<int32_t>(ps.n_rows);
  const size_t n = in.seqs.size();
  if (o.pad_to > 0) {
    if (o.pad_to < n || !is_decode_step(in))
      throw std::invalid_argument("forward: padding needs a decode step that fits");
    if (o.scratch_block < 0 && o.pad_to > n) throw std::invalid_argument("forward: padding needs a scratch block");
    ps.n_tokens = ps.n_rows = o.pad_to;
  }
  if (o.table_width > 0) {
    if (o.table_width < width) throw std::invalid_argument("forward: block table wider than the captured width");
    width = o.table_width;
  }
  ps.table_width = static_cast<uint32_t>(width);
  const step_limits& lim = o.limits;
  if (ps.n_tokens > lim.max_tokens || ps.n_rows > lim.max_logit_rows || std::max<size_t>(n, o.pad_to) > lim.max_seqs ||
      width > lim.max_table_width) {
    throw std::invalid_argument("forward: the step exceeds the GPU worker's limits");
  }
  return ps;
}

bool is_decode_step(const step_input& in) {
  if (in.seqs.empty() || in.n_layers != 0) return false;
  return std::all_of(in.seqs.begin(), in.seqs.end(), [](const seq_step& s) { return s.tokens.size() == 1; });
}

packed_step pack_step(const step_input& in, const pack_options& o, const step_arrays& out) {
  packed_step ps = measure_step(in, o);
  const int32_t bt = static_cast<int32_t>(o.block_tokens);
  const size_t width = ps.table_width;
  int64_t t = 0, r = 0;
  for (size_t i = 0; i < in.seqs.size(); ++i) {
    const auto& sq = in.seqs[i];
    const auto n = static_cast<int64_t>(sq.tokens.size());
    for (int64_t j = 0; j < n; ++j, ++t) {
      const int32_t p = sq.start_pos + static_cast<int32_t>(j);
      out.tokens[t] = sq.tokens[static_cast<size_t>(j)];
      out.positions[t] = p;
      out.row_seq[t] = static_cast<int32_t>(i);
      out.slots[t] = sq.blocks[static_cast<size_t>(p / bt)] * bt + p % bt;
      if (sq.want_all_logits || j == n - 1) out.out_rows[r++] = static_cast<int32_t>(t);
    }
    int32_t* row = out.tables + i * width;
    std::copy(sq.blocks.begin(), sq.blocks.end(), row);
    std::fill(row + sq.blocks.size(), row + width, 0);
  }
  // Padded decode rows: token 0 at position 0 of the scratch block, each its own "sequence".
  for (auto i = static_cast<int64_t>(in.seqs.size()); i < static_cast<int64_t>(o.pad_to); ++i, ++t, ++r) {
    out.tokens[t] = 0;
    out.positions[t] = 0;
    out.row_seq[t] = static_cast<int32_t>(i);
    out.slots[t] = o.scratch_block * bt;
    out.out_rows[r] = static_cast<int32_t>(t);
    int32_t* row = out.tables + i * width;
    row[0] = o.scratch_block;
    std::fill(row + 1, row + width, 0);
  }
  return ps;
}

}  // namespace tandem::gpu
