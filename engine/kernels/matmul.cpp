#include "engine/kernels/matmul.h"

#include <algorithm>
#include <span>
#include <stdexcept>

#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/tiled_weights.h"

namespace tandem::kernels {

namespace {

void pack_q8_0_pairs(const std::byte* rows, const std::byte* next_rows, size_t act_stride, int64_t nb, std::byte* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    std::byte* record = dst + static_cast<size_t>(b) * kPackedPairsBlockBytes;
    auto* d = reinterpret_cast<float*>(record + 128);
    std::fill(d, d + 8, 0.0f);
    for (int i = 0; i < 4; ++i) {
      const auto& own = reinterpret_cast<const block_q8_0*>(rows + static_cast<size_t>(i) * act_stride)[b];
      auto* qs = reinterpret_cast<int8_t*>(record) + (i / 2) * 64 + (i % 2) * 16;
      std::copy(own.qs, own.qs + 16, qs);
      std::copy(own.qs + 16, own.qs + 32, qs + 32);
      d[(i % 2) * 4 + i / 2] = f16_to_f32(own.d);
      if (next_rows != nullptr) {
        const auto& next = reinterpret_cast<const block_q8_0*>(next_rows + static_cast<size_t>(i) * act_stride)[b];
        d[(i % 2) * 4 + 2 + i / 2] = f16_to_f32(next.d);
      }
    }
  }
}

}  // namespace

void pack_q8_x4(activation_format format, const std::byte* rows, size_t act_stride, int64_t nb, std::byte* dst,
                packed_layout layout, const std::byte* next_rows) {
  if (layout == packed_layout::token_pairs) {
    if (format != activation_format::q8_0) throw std::invalid_argument("pack_q8_x4: token pairs hold Q8_0 only");
    pack_q8_0_pairs(rows, next_rows, act_stride, nb, dst);
    return;
  }
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + nb * 128);
  auto* s = reinterpret_cast<float*>(dst + nb * 128 + nb * 16);
  for (int i = 0; i < 4; ++i) {
    const std::byte* row = rows + static_cast<size_t>(i) * act_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* src_qs;
      if (format == activation_format::q8_1) {
        const auto& blk = reinterpret_cast<const block_q8_1*>(row)[b];
        src_qs = blk.qs;
        d[b * 4 + i] = f16_to_f32(blk.d);
        s[b * 4 + i] = f16_to_f32(blk.s);
      } else {
        const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        src_qs = blk.qs;
        d[b * 4 + i] = f16_to_f32(blk.d);
        s[b * 4 + i] = 0.0f;
      }
      std::copy(src_qs, src_qs + kBlock, qs + (b * 4 + i) * kBlock);
    }
  }
}

static_assert(kPackedRowsBlockBytes * (kSuperBlock / kBlock) == 4 * sizeof(block_q8_k),
              "a packed_layout::rows group is four Q8_K rows");

namespace {

constexpr size_t kCacheLine = 64;
std::byte* align_to_line(std::byte* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return p + ((kCacheLine - a % kCacheLine) % kCacheLine);
}

// Weight rows per cache tile of the matrix-matrix path: 64 rows are 23 KB of Q4_1 or 39 KB of
// Q8_0 at SmolLM2's width (576), which the token groups then reuse from L1/L2.
constexpr int64_t kRowTile = 64;

// Tiles per cache block of the tiled path: 64 rows, whose records (20 KB of Q4_1, 35 KB of
// Q8_0 at width 576) each group of eight tokens passes over before the next group.
constexpr int64_t kTilesPerBlock = 4;

// Converts every token's activation row: fn(t, thread) on the pool from eight tokens up,
// inline below that (a fork-join costs more than a few rows).
template <class Fn>
void for_each_token(thread_pool& pool, int64_t n_tok, const Fn& fn) {
  if (n_tok >= 8) {
    pool.parallel_for(n_tok, fn);
  } else {
    for (int64_t t = 0; t < n_tok; ++t) fn(t, 0);
  }
}

// All outputs' rows in one parallel pass of about pool.size() * 8 tasks. Rows go in units of
// unit_rows (1, or a tile); output j owns tasks [first_task[j], first_task[j + 1]), each
// covering per_task(units of j) units, at least min_units.
struct task_split {
  int64_t unit_rows;
  int64_t min_units;
  int64_t target_tasks;

  struct range {
    size_t output;
    int64_t begin, end;  // units
  };

  int64_t per_task(int64_t units) const {
    return std::max<int64_t>(min_units, (units + target_tasks - 1) / target_tasks);
  }
  // Fills first_task ([outputs + 1]); returns the number of tasks.
  int64_t plan(std::span<const matmul_output> outputs, std::vector<int64_t>& first_task) const {
    first_task.assign(1, 0);
    for (const auto& o : outputs) {
      const int64_t units = o.w.rows / unit_rows;
      const int64_t per = per_task(units);
      first_task.push_back(first_task.back() + (units + per - 1) / per);
    }
    return first_task.back();
  }
  range of(int64_t task, std::span<const matmul_output> outputs, const std::vector<int64_t>& first_task) const {
    size_t j = 0;
    while (task >= first_task[j + 1]) ++j;
    const int64_t units = outputs[j].w.rows / unit_rows;
    const int64_t begin = (task - first_task[j]) * per_task(units);
    return {j, begin, std::min(units, begin + per_task(units))};
  }
};

// Which converted input rows output j reads: all n_tok of a shared input, or (own_input,
// matmul_each) its own row j alone.
struct output_tokens {
  int64_t first, count;
};
output_tokens tokens_of(size_t j, bool own_input, int64_t n_tok) {
  return own_input ? output_tokens{static_cast<int64_t>(j), 1} : output_tokens{0, n_tok};
}

// The tiled path (tiled_weights.h): activations into tiled rows, then per task a run of
// tiles, each block of tiles passed over by every group of up to eight tokens.
// n_rows: the input rows to convert (n_tok, or one per output with own_input).
void tiled_matmul(std::span<const matmul_output> outputs, const dot_kernels& kernels, tiled_fn kernel, const float* x,
                  int64_t x_stride, int64_t n_rows, bool own_input, thread_pool& pool, matmul_scratch& scratch) {
  const weight_view& w = outputs[0].w;
  const activation_format format = activation_format_for(w.type);
  const size_t row_stride = activation_row_bytes(format, w.cols);
  const size_t act_stride = tiled_act_row_bytes(w.type, w.cols);
  scratch.acts.resize(row_stride * static_cast<size_t>(n_rows));
  scratch.packed.resize(act_stride * static_cast<size_t>(n_rows));
  for_each_token(pool, n_rows, [&](int64_t t, int) {
    std::byte* row = scratch.acts.data() + static_cast<size_t>(t) * row_stride;
    kernels.convert_activation(format, x + t * x_stride, row, w.cols);
    tile_activation_row(w.type, row, w.cols, scratch.packed.data() + static_cast<size_t>(t) * act_stride);
  });
  const std::byte* acts = scratch.packed.data();
  const int64_t nb = w.cols / tiled_record_elements(w.type);
  const size_t tile_bytes = static_cast<size_t>(nb) * tiled_record_bytes(w.type);

  const task_split split{kTileRows, 1, static_cast<int64_t>(pool.size()) * 8};
  pool.parallel_for(split.plan(outputs, scratch.first_task), [&](int64_t task, int) {
    const auto [j, t0, t1] = split.of(task, outputs, scratch.first_task);
    const matmul_output& o = outputs[j];
    const auto [a0, n_tok] = tokens_of(j, own_input, n_rows);
    const int64_t n_tiles = o.w.rows / kTileRows;
    for (int64_t b0 = t0; b0 < t1; b0 += kTilesPerBlock) {
      const int64_t b1 = std::min(t1, b0 + kTilesPerBlock);
      for (int64_t g = 0; g < n_tok; g += kTiledMaxTokens) {
        const int n = static_cast<int>(std::min<int64_t>(kTiledMaxTokens, n_tok - g));
        for (int64_t tile = b0; tile < b1; ++tile) {
          // The first token group brings the tiles in: each is offered the one after it, which
          // the kernel asks for a few lines per block while it computes (tile_prefetch) or,
          // where a one-pass step reads its records in order, leaves to the hardware prefetcher.
          const std::byte* next =
              g == 0 && tile + 1 < n_tiles ? o.w.tiled + static_cast<size_t>(tile + 1) * tile_bytes : nullptr;
          kernel(nb, o.w.tiled + static_cast<size_t>(tile) * tile_bytes, acts + static_cast<size_t>(a0 + g) * act_stride,
                 act_stride, n, o.y + g * o.y_stride + tile * kTileRows, o.y_stride, next);
        }
      }
    }
  });
}

}  // namespace

void matmul(const weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y, int64_t y_stride,
            const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch, large_step_rule rule) {
  const matmul_output out{w, y, y_stride};
  matmul(std::span<const matmul_output>(&out, 1), x, x_stride, n_tok, kernels, pool, scratch, rule);
}

namespace {

// One summation order for all n_tok tokens (large: the large-step kernels, dot_kernels.h).
// With own_input, output j reads input row j alone (one token each; n_tok = outputs' count).
void matmul_in_order(std::span<const matmul_output> outputs, const float* x, int64_t x_stride, int64_t n_tok,
                     bool large, const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch,
                     bool own_input = false) {
  const weight_view& w = outputs[0].w;
  const int64_t step_tokens = own_input ? 1 : n_tok;  // the tokens each product sees
  if (const tiled_fn kernel = kernels.tiled_for_step(w.type, large, step_tokens); kernel != nullptr) {
    bool all_tiled = true;
    for (const auto& o : outputs) all_tiled = all_tiled && o.w.tiled != nullptr;
    if (all_tiled) return tiled_matmul(outputs, kernels, kernel, x, x_stride, n_tok, own_input, pool, scratch);
  }
  const order_kernels& order = kernels.in_order(w.type, large);
  const row_dot_fn dot = order.row;
  if (dot == nullptr) throw std::runtime_error("matmul: unsupported weight type");

  // 1. Activations into the weight's partner format: acts[t] = convert(x[t]).
  const activation_format format = activation_format_for(w.type);
  const size_t act_stride = activation_row_bytes(format, w.cols);
  scratch.acts.resize(act_stride * static_cast<size_t>(n_tok));
  std::byte* acts = scratch.acts.data();
  for_each_token(pool, n_tok, [&](int64_t t, int) {
    kernels.convert_activation(format, x + t * x_stride, acts + static_cast<size_t>(t) * act_stride, w.cols);
  });

  // 2. With a matrix-matrix kernel, full groups of four tokens are packed for it; the rest
  //    (and everything without one) goes through the row kernel. Both give the same bits.
  //    Q8_K rows need no packing: a group is four converted rows (packed_layout::rows).
  const group_dot_fn group = order.group;
  const group_rows4_fn group4 = order.rows4;
  const group_rows4x2_fn group8 = order.rows4x2;
  const int64_t n_groups = group != nullptr && !own_input ? n_tok / 4 : 0;
  const int64_t nb = w.cols / kBlock;
  const packed_layout layout = kernels.packed_layout_for(w.type);
  const size_t group_bytes = static_cast<size_t>(nb) * packed_block_bytes(layout);
  std::byte* packed = nullptr;
  if (n_groups > 0 && layout == packed_layout::rows) {
    packed = acts;
  } else if (n_groups > 0) {
    // On a cache line: the group kernels' 32-byte loads then never straddle two lines.
    scratch.packed.resize(group_bytes * static_cast<size_t>(n_groups) + kCacheLine);
    packed = align_to_line(scratch.packed.data());
    pool.parallel_for(n_groups, [&](int64_t g, int) {
      const std::byte* rows = acts + static_cast<size_t>(g * 4) * act_stride;
      pack_q8_x4(format, rows, act_stride, nb, packed + static_cast<size_t>(g) * group_bytes, layout,
                 g + 1 < n_groups ? rows + 4 * act_stride : nullptr);
    });
  }

  // 3. Output rows in chunks, one chunk per task, all outputs in one parallel pass. Within a
  //    chunk: for each token group, all the chunk's rows (the group's activations stay in L1
  //    while weight rows stream by).
  const task_split split{1, 4, static_cast<int64_t>(pool.size()) * 8};
  pool.parallel_for(split.plan(outputs, scratch.first_task), [&](int64_t task, int) {
    const auto [out_index, r0, r1] = split.of(task, outputs, scratch.first_task);
    const weight_view& wj = outputs[out_index].w;
    float* y = outputs[out_index].y;
    const int64_t y_stride = outputs[out_index].y_stride;
    auto row = [&](int64_t r) { return wj.row(r); };
    float out[kMaxActsPerDot];
    // Rows in tiles that stay in cache while every token group passes over them (a task's
    // whole chunk may not: the output head's is ~2 MB), then four rows at a time.
    for (int64_t t0 = r0; t0 < r1; t0 += kRowTile) {
      const int64_t t1 = std::min(r1, t0 + kRowTile);
      for (int64_t g = 0; g < n_groups; ++g) {
        const std::byte* p = packed + static_cast<size_t>(g) * group_bytes;
        int64_t r = t0;
        if (group8 != nullptr && g + 1 < n_groups) {
          // Two groups at once (eight tokens); rows left over go through the group kernel.
          for (; r + 4 <= t1; r += 4) {
            group8(w.cols, row(r), wj.stride, p, p + group_bytes, y + g * 4 * y_stride + r, y_stride);
          }
          for (; r < t1; ++r) {
            for (int h = 0; h < 2; ++h) {
              group(w.cols, row(r), p + h * group_bytes, out);
              for (int i = 0; i < 4; ++i) y[((g + h) * 4 + i) * y_stride + r] = out[i];
            }
          }
          ++g;  // the pair's second group is done
          continue;
        }
        if (group4 != nullptr) {
          float out16[16];  // [row][token]
          for (; r + 4 <= t1; r += 4) {
            group4(w.cols, row(r), wj.stride, p, out16);
            for (int j = 0; j < 4; ++j) {
              for (int i = 0; i < 4; ++i) y[(g * 4 + i) * y_stride + r + j] = out16[j * 4 + i];
            }
          }
        }
        for (; r < t1; ++r) {
          group(w.cols, row(r), p, out);
          for (int i = 0; i < 4; ++i) y[(g * 4 + i) * y_stride + r] = out[i];
        }
      }
    }
    // Tokens left over (all of them in decode): the row kernel, up to four tokens at once.
    const auto [a0, n_out_tok] = tokens_of(out_index, own_input, n_tok);
    const int64_t t_rest = n_groups * 4;
    for (int64_t t0 = t_rest; t0 < n_out_tok; t0 += kMaxActsPerDot) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxActsPerDot, n_out_tok - t0));
      const std::byte* a = acts + static_cast<size_t>(a0 + t0) * act_stride;
      for (int64_t r = r0; r < r1; ++r) {
        dot(w.cols, row(r), a, act_stride, n, out);
        for (int i = 0; i < n; ++i) y[(t0 + i) * y_stride + r] = out[i];
      }
    }
  });
}

}  // namespace

namespace {

void check_one_type(std::span<const matmul_output> outputs) {
  const weight_view& w = outputs[0].w;
  for (const auto& o : outputs) {
    if (o.w.type != w.type || o.w.cols != w.cols) {
      throw std::invalid_argument("matmul: outputs of one pass need one weight type and width");
    }
  }
}

}  // namespace

void matmul_each(std::span<const matmul_output> outputs, const float* x, int64_t x_stride,
                 const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch, large_step_rule rule) {
  if (outputs.empty()) return;
  check_one_type(outputs);
  const bool large = dot_kernels::large_order_tokens(outputs[0].w.type, 1, rule) > 0;
  matmul_in_order(outputs, x, x_stride, static_cast<int64_t>(outputs.size()), large, kernels, pool, scratch, true);
}

void matmul(std::span<const matmul_output> outputs, const float* x, int64_t x_stride, int64_t n_tok,
            const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch, large_step_rule rule) {
  if (n_tok <= 0 || outputs.empty()) return;
  const weight_view& w = outputs[0].w;
  check_one_type(outputs);
  // The step's leading tokens in llama.cpp's large-step order, the rest in the ordinary one.
  const int64_t n_large = dot_kernels::large_order_tokens(w.type, n_tok, rule);
  if (n_large > 0) matmul_in_order(outputs, x, x_stride, n_large, true, kernels, pool, scratch);
  if (n_large == n_tok) return;
  std::vector<matmul_output> rest(outputs.begin(), outputs.end());
  for (auto& o : rest) o.y += n_large * o.y_stride;
  matmul_in_order(rest, x + n_large * x_stride, x_stride, n_tok - n_large, false, kernels, pool, scratch);
}

}  // namespace tandem::kernels
