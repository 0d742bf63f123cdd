#include "engine/model/model.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/gguf/quantize.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/tiled_weights.h"
#include "engine/kv/kv_window.h"
#include "engine/attention/attention.h"

namespace tandem {
namespace {

// Below this many tokens, element-wise work stays on the calling thread.
constexpr int64_t kParallelRowThreshold = 4;

// Largest head size the attention scratch on the stack allows.
constexpr int32_t kMaxHeadDim = 512;

// Marks whole pages of a read-only file mapping as the first to reclaim (MADV_COLD: kept
// while memory is plentiful; the page cache keeps them for other readers).
void advise_cold(const std::byte* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLD);
}

struct tiled_region {
  zeroed_pages anonymous;
  std::unique_ptr<tiled_cache_file> file;
  tiled_origin origin = tiled_origin::none;
  size_t kept_twice = 0;  // of its bytes, those of matrices whose GGUF rows prompt steps still read
};

// Re-lays every matrix the CPU's tiled kernels take (kernels/tiled_weights.h) into one
// region, in parallel, and points the views at it. The views keep `data` (the GGUF layout)
// for everything else: embedding rows, GPU upload. With a `cache_dir`, a current cache file
// is mapped instead of tiling; else the tiled region is written to a new one meanwhile.
tiled_region tile_weights(model_weights& w, const kernels::dot_kernels& k, thread_pool& pool,
                          const std::filesystem::path& source, const std::filesystem::path& cache_dir) {
  // Every matrix a product reads: all but the embedding table, which is gathered by row (a
  // tied head is `output`, a view of the same bytes).
  std::vector<kernels::weight_view*> views;
  // An expert stack only when each expert's rows are whole tiles (cut per expert as it runs).
  for_each_matrix(w, [&](const matrix_ref& m) {
    if (m.role != matrix_role::token_embd && k.tiles(m.view.type, m.view.cols) && kernels::tileable(m.view) &&
        (m.slices == 1 || experts::whole_tiles_per_expert(m.view, m.slices))) {
      views.push_back(&m.view);
    }
  });
  // The plan: each matrix's type, shape and offset in the region (the cache file checks it).
  std::vector<size_t> offset;
  std::vector<uint64_t> plan;
  size_t total = 0, kept_twice = 0;
  for (const auto* v : views) {
    offset.push_back(total);
    plan.insert(plan.end(), {static_cast<uint64_t>(v->type), static_cast<uint64_t>(v->rows),
                             static_cast<uint64_t>(v->cols), static_cast<uint64_t>(total)});
    total += (kernels::tiled_bytes(*v) + 63) / 64 * 64;
    if (k.reads_rows_when_tiled(v->type)) kept_twice += kernels::tiled_bytes(*v);
  }
  tiled_region region;
  if (total == 0) return region;
  region.kept_twice = kept_twice;
  if (!cache_dir.empty() && !source.empty()) {
    region.file = tiled_cache_file::open_existing(cache_dir, source, plan, total);
    if (region.file != nullptr) {
      for (size_t i = 0; i < views.size(); ++i) views[i]->tiled = region.file->records() + offset[i];
      region.origin = tiled_origin::cache_read;
      return region;
    }
    region.file = tiled_cache_file::create(cache_dir, source, plan, total);
  }
  region.anonymous = zeroed_pages(total);
  region.origin = region.file != nullptr ? tiled_origin::cache_written : tiled_origin::anonymous;
  std::byte* base = region.anonymous.as<std::byte>();
  for (size_t i = 0; i < views.size(); ++i) views[i]->tiled = base + offset[i];
  struct piece {
    const kernels::weight_view* v;
    std::byte* dst;
    int64_t tile_begin, tile_end;
  };
  std::vector<piece> pieces;
  constexpr int64_t kTilesPerPiece = 64;
  for (size_t i = 0; i < views.size(); ++i) {
    const int64_t tiles = views[i]->rows / kernels::kTileRows;
    for (int64_t t = 0; t < tiles; t += kTilesPerPiece) {
      pieces.push_back({views[i], base + offset[i], t, std::min(tiles, t + kTilesPerPiece)});
    }
  }
  pool.parallel_for(static_cast<int64_t>(pieces.size()), [&](int64_t i, int) {
    const piece& p = pieces[static_cast<size_t>(i)];
    kernels::tile_weight(*p.v, p.dst, p.tile_begin, p.tile_end);
  });
  if (region.file != nullptr) {
    region.file->write_in_background(base);
    // The next start reads the cache file, not these ranges of the GGUF: under memory
    // pressure the kernel should drop them first, not the file being written (except where
    // prompt steps still read the rows, dot_kernels::tiled_small_steps_only).
    for (const auto* v : views) {
      if (!k.reads_rows_when_tiled(v->type)) advise_cold(v->data, static_cast<size_t>(v->rows) * v->stride);
    }
  }
  return region;
}

// The RoPE of the global or the local layers as llama.cpp's context sets it up. YaRN: the
// blend on (ext_factor 1), the correction dims for the layers' base, and a magnitude of
// get_mscale(factor) / (1 + 0.1 ln factor) times rope.scaling.attn_factor, which the kernel
// multiplies by 1 + 0.1 ln factor again (ggml's rope_yarn).
kernels::rope_params rope_of(const model_config& c, std::span<const float> freq_factors, bool local) {
  kernels::rope_params p{static_cast<int32_t>(c.n_rot), local ? c.rope_freq_base_swa : c.rope_freq_base,
                         local ? c.rope_freq_scale_swa : c.rope_freq_scale(), freq_factors, c.rope_attn_factor};
  if (c.rope_scaling != rope_scaling_type::yarn) return p;
  p.ext_factor = 1.0f;
  const float factor = 1.0f / c.rope_freq_scale();
  const float mscale = factor <= 1.0f ? 1.0f : std::fma(0.1f, std::log(factor), 1.0f);
  p.mscale = mscale * (1.0f / std::fma(0.1f, std::log(factor), 1.0f)) * c.rope_attn_factor;
  kernels::yarn_corr_dims(p.n_rot, c.yarn_original_ctx(), p.freq_base, model_config::kYarnBetaFast,
                          model_config::kYarnBetaSlow, p.corr_low, p.corr_high);
  return p;
}

}  // namespace

std::vector<std::array<int32_t, 4>> mrope_positions(const seq_step& s) {
  std::vector<std::array<int32_t, 4>> out;
  append_mrope_positions(s, out);
  return out;
}

void append_mrope_positions(const seq_step& s, std::vector<std::array<int32_t, 4>>& all) {
  const int32_t n = static_cast<int32_t>(s.tokens.size());
  const size_t base = all.size();
  all.resize(base + static_cast<size_t>(n));
  const auto out = all.begin() + static_cast<std::ptrdiff_t>(base);
  // Grid runs in order of their offsets (disjoint: embedding_row_pointers checks).
  std::vector<const embedding_rows*> grids;
  for (const embedding_rows& e : s.embeddings) {
    if (e.grid_w <= 0 && e.grid_h <= 0) continue;
    const int64_t whole = int64_t{e.grid_w} * e.grid_h;
    if (e.grid_w <= 0 || e.grid_h <= 0 || e.first < 0 || e.count < 0 || e.first + int64_t{e.count} > whole) {
      throw std::invalid_argument("forward: an image run of sequence " + std::to_string(s.seq) +
                                  " does not fit its grid");
    }
    grids.push_back(&e);
  }
  std::sort(grids.begin(), grids.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  int32_t shift = s.rope_shift;
  int32_t j = 0;
  auto text_until = [&](int32_t end) {
    for (; j < end; ++j) {
      const int32_t p = s.start_pos + j + shift;
      out[j] = {p, p, p, p};
    }
  };
  for (const embedding_rows* e : grids) {
    text_until(e->offset);
    // p0: the run's first token (first rows before this step) as text.
    const int32_t p0 = s.start_pos + e->offset - e->first + shift;
    for (int32_t k = 0; k < e->count; ++k, ++j) {
      const int32_t i = e->first + k;
      out[j] = {p0, p0 + i / e->grid_w, p0 + i % e->grid_w, 0};
    }
    if (e->first + e->count == e->grid_w * e->grid_h) shift += rope_shift_after(*e);  // the run ends here
  }
  text_until(n);
}

std::vector<const float*> embedding_row_pointers(const seq_step& s, int64_t n_embd) {
  std::vector<const float*> rows(s.tokens.size(), nullptr);
  for (const embedding_rows& e : s.embeddings) {
    const bool fits = e.offset >= 0 && e.count > 0 && static_cast<size_t>(e.offset) + e.count <= s.tokens.size();
    if (!fits || e.rows == nullptr || e.first < 0 ||
        e.rows->size() < (static_cast<size_t>(e.first) + static_cast<size_t>(e.count)) * static_cast<size_t>(n_embd)) {
      throw std::invalid_argument("forward: embedding rows of sequence " + std::to_string(s.seq) +
                                  " do not fit its new tokens or the model's width");
    }
    for (int32_t k = 0; k < e.count; ++k) {
      const float*& slot = rows[static_cast<size_t>(e.offset + k)];
      if (slot != nullptr) throw std::invalid_argument("forward: overlapping embedding rows");
      slot = e.rows->data() + static_cast<size_t>(e.first + k) * static_cast<size_t>(n_embd);
    }
  }
  return rows;
}

model::model(gguf::file file, const model_options& options)
    : file_(std::move(file)),
      config_(read_model_config(file_)),
      weights_(model_weights::from_gguf(file_, config_, options.context_length)),
      pool_owner_(options.pool ? options.pool : shared_thread_pool(options.n_threads)),
      pool_(*pool_owner_),
      llama_cpp_order_(options.llama_cpp_attention_order),
      kernels_(kernels::best_dot_kernels()) {
  if (config_.head_dim % 16 != 0 || config_.head_dim > static_cast<uint32_t>(kMaxHeadDim)) {
    throw std::invalid_argument("model: head size " + std::to_string(config_.head_dim) +
                                " is not a multiple of 16 up to 512");
  }
  if (options.tiled_weights) {
    auto region = tile_weights(weights_, kernels_, pool_, file_.path(), options.tiled_cache_dir);
    tiled_ = std::move(region.anonymous);
    tiled_file_ = std::move(region.file);
    tiled_origin_ = region.origin;
    tiled_kept_twice_ = region.kept_twice;
  }
  swa_rope_differs_ = config_.has_swa() && (config_.rope_freq_base_swa != config_.rope_freq_base ||
                                            config_.rope_freq_scale_swa != config_.rope_freq_scale());
  routes_.resize(config_.n_layer);
}

std::unique_ptr<model> model::open(const std::filesystem::path& path, const model_options& options) {
  return std::make_unique<model>(gguf::file::open(path), options);
}

std::shared_ptr<const lora::adapter> model::load_adapter(const std::filesystem::path& path) const {
  return lora::adapter::load(path, config_, weights_, kernels_);
}

void model::matmul(const kernels::weight_view& w, const std::vector<float>& x, int64_t n_tok, std::vector<float>& y) {
  kernels::matmul(w, x.data(), w.cols, n_tok, y.data(), w.rows, kernels_, pool_, buf_.mm);
}

void model::matmul_shared(const std::vector<float>& x, int64_t n_tok,
                          std::initializer_list<kernels::matmul_output> outputs) {
  const auto& first = *outputs.begin();
  bool same = true;
  for (const auto& o : outputs) same = same && o.w.type == first.w.type && o.w.cols == first.w.cols;
  if (same) {
    kernels::matmul(std::span<const kernels::matmul_output>(outputs.begin(), outputs.size()), x.data(), first.w.cols,
                    n_tok, kernels_, pool_, buf_.mm);
  } else {
    for (const auto& o : outputs) {
      kernels::matmul(o.w, x.data(), o.w.cols, n_tok, o.y, o.y_stride, kernels_, pool_, buf_.mm);
    }
  }
}

void model::forward(const step_input& in, kv_pool& cache, step_output& out) {
  const model_config& c = config_;
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(),
                F = c.has_experts() ? 0 : c.n_ff;  // the dense FFN's width
  const int bt = cache.block_tokens();

  // Flatten the batch: token t belongs to sequence seq[t] at position pos[t].
  int64_t T = 0;
  int32_t max_keys = 0;
  for (const auto& s : in.seqs) {
    const int64_t end = static_cast<int64_t>(s.start_pos) + static_cast<int64_t>(s.tokens.size());
    if (s.start_pos < 0) throw std::invalid_argument("forward: negative start position");
    if (static_cast<int64_t>(s.blocks.size()) * bt < end) {
      throw std::invalid_argument("forward: block table of sequence " + std::to_string(s.seq) +
                                  " does not cover position " + std::to_string(end - 1));
    }
    for (int32_t b : s.blocks) {
      if (b < 0 || b >= cache.n_blocks()) throw std::invalid_argument("forward: bad block id");
    }
    if (cache.has_local_pool()) check_local_table(s, cache);
    if (!c.causal && s.start_pos != 0 && !s.tokens.empty()) {
      throw std::invalid_argument("forward: sequence " + std::to_string(s.seq) +
                                  " of a bidirectional model must come whole in one step, from position 0");
    }
    if (s.adapter < -1 || s.adapter >= static_cast<int32_t>(adapters_.size())) {
      throw std::invalid_argument("forward: sequence " + std::to_string(s.seq) + " names adapter " +
                                  std::to_string(s.adapter) + " of " + std::to_string(adapters_.size()));
    }
    if (c.arch->embeddings_only && !s.want_hidden && !s.tokens.empty()) {
      throw std::invalid_argument("forward: '" + c.architecture + "' has no output head (embeddings only)");
    }
    T += static_cast<int64_t>(s.tokens.size());
    max_keys = std::max(max_keys, static_cast<int32_t>(end));
  }
  out.n_vocab = static_cast<int32_t>(c.n_vocab);
  out.first_row.assign(in.seqs.size(), 0);
  out.n_rows.assign(in.seqs.size(), 0);
  out.n_embd = static_cast<int32_t>(E);
  out.first_hidden.assign(in.seqs.size(), 0);
  out.hidden.clear();
  if (T == 0) {
    out.logits.clear();
    return;
  }

  auto& b = buf_;
  b.x.resize(T * E);
  b.h.resize(T * E);
  b.q.resize(T * Q);
  b.k.resize(T * KV);
  b.v.resize(T * KV);
  b.attn.resize(T * Q);
  b.proj.resize(T * E);
  b.gate.resize(T * F);
  b.up.resize(T * F);
  b.rope.resize(T * c.n_rot);
  b.attn_scratch.resize(static_cast<size_t>(pool_.size()));
  b.q16.resize(static_cast<size_t>(pool_.size()) * c.q_dim());
  b.q8.resize(static_cast<size_t>(pool_.size()) * c.q_dim() / kernels::kBlock * sizeof(kernels::block_q8_0));
  b.pos.resize(T);
  b.key_end.resize(T);
  b.seq.resize(T);
  b.single_order.resize(T);

  // Token embeddings (or the step's embedding rows) and per-token positions.
  {
    int64_t t = 0;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const auto& s = in.seqs[i];
      const std::vector<const float*> given = embedding_row_pointers(s, E);
      for (size_t j = 0; j < s.tokens.size(); ++j, ++t) {
        b.pos[t] = s.start_pos + static_cast<int32_t>(j);
        b.key_end[t] = b.pos[t] + 1;
        b.seq[t] = static_cast<int32_t>(i);
        b.single_order[t] = llama_cpp_order_ && (s.tokens.size() == 1 || s.decode_numerics) ? 1 : 0;
        if (given[j] != nullptr) {  // already in embedding space: no lookup, no scaling
          std::copy(given[j], given[j] + E, &b.x[t * E]);
          continue;
        }
        const int32_t tok = s.tokens[j];
        if (tok < 0 || static_cast<uint32_t>(tok) >= c.n_vocab) {
          throw std::invalid_argument("forward: token id " + std::to_string(tok) + " outside the vocabulary");
        }
        dequantize_row(weights_.token_embd.type, weights_.token_embd.row(tok), E, &b.x[t * E]);
        if (c.arch->scale_embeddings) {
          const float scale = std::sqrt(static_cast<float>(E));
          for (int64_t e = 0; e < E; ++e) b.x[t * E + e] *= scale;
        }
      }
    }
  }
  // Bidirectional embedding runs: their tokens see the whole run (its keys are stored by
  // this step, which holds the run through its end).
  {
    int64_t t0 = 0;
    for (const auto& s : in.seqs) {
      for (const embedding_rows& e : s.embeddings) {
        if (!e.bidirectional) continue;
        for (int32_t k = 0; k < e.count; ++k) b.key_end[t0 + e.offset + k] = s.start_pos + e.offset + e.count;
      }
      t0 += static_cast<int64_t>(s.tokens.size());
    }
  }
  if (c.arch->encoder_inputs) add_encoder_inputs(T);

  // Each token row's adapter: the step's rows grouped by adapter once, for every hook.
  auto adapter_of = [&](const seq_step& s) {
    return s.adapter >= 0 ? adapters_[static_cast<size_t>(s.adapter)].get() : nullptr;
  };
  row_adapter_.assign(static_cast<size_t>(T), nullptr);
  row_scale_.assign(static_cast<size_t>(T), 0.0f);
  // How llama.cpp would multiply each row's update (lora::step_updates::plan): alone in a
  // one-token step, and a sequence's only output row alone in the last layer's FFN.
  std::vector<uint8_t> lora_order(static_cast<size_t>(T), 0);
  if (!adapters_.empty()) {
    for (int64_t t = 0; t < T; ++t) {
      const auto& s = in.seqs[static_cast<size_t>(b.seq[t])];
      row_adapter_[static_cast<size_t>(t)] = adapter_of(s);
      row_scale_[static_cast<size_t>(t)] = s.adapter_scale;
      const bool one_output = !s.want_hidden && (!s.want_all_logits || s.tokens.size() == 1) &&
                              b.pos[t] == s.start_pos + static_cast<int32_t>(s.tokens.size()) - 1;
      if (llama_cpp_order_) {
        lora_order[static_cast<size_t>(t)] = (b.single_order[t] != 0 ? lora::step_updates::kSingleRow : 0) |
                                             (one_output ? lora::step_updates::kSingleOutput : 0);
      }
    }
  }
  lora_.plan(row_adapter_, row_scale_, lora_order,
             static_cast<int32_t>(in.n_layers > 0 ? std::min(in.n_layers, c.n_layer) : c.n_layer) - 1);

  auto for_rows = [&](int64_t n, const auto& fn) {
    if (n < kParallelRowThreshold) {
      for (int64_t t = 0; t < n; ++t) fn(t);
    } else {
      pool_.parallel_for(n, [&](int64_t t, int) { fn(t); });
    }
  };

  // h = norm(x) on every row, four rows per task (kernels::rms_norm_rows).
  auto norm_rows = [&](const std::vector<float>& weight) {
    for_rows((T + 3) / 4, [&](int64_t g) {
      const int64_t t0 = 4 * g;
      kernels::rms_norm_rows(&b.x[t0 * E], weight.data(), &b.h[t0 * E], std::min<int64_t>(4, T - t0), E, c.rms_eps);
    });
  };

  const kernels::rope_params rope = rope_of(c, weights_.rope_freqs, false);
  if (c.arch->mrope) {
    b.mpos.clear();  // keeps its capacity from step to step
    for (const auto& s : in.seqs) append_mrope_positions(s, b.mpos);
    for_rows(T, [&](int64_t t) {
      kernels::rope_angles_sections(rope, b.mpos[t].data(), c.rope_sections.data(), &b.rope[t * c.n_rot]);
    });
  } else if (c.arch->rope != rope_style::none) {
    for_rows(T, [&](int64_t t) { kernels::rope_angles(rope, b.pos[t], &b.rope[t * c.n_rot]); });
  }
  if (swa_rope_differs_) {
    b.rope_swa.resize(T * c.n_rot);
    const kernels::rope_params local = rope_of(c, weights_.rope_freqs, true);
    for_rows(T, [&](int64_t t) { kernels::rope_angles(local, b.pos[t], &b.rope_swa[t * c.n_rot]); });
  }

  const uint32_t n_run = in.n_layers > 0 ? std::min(in.n_layers, c.n_layer) : c.n_layer;
  if (cache.n_layer() < n_run) throw std::invalid_argument("forward: the KV cache has fewer layers than the step runs");
  for (uint32_t l = 0; l < n_run; ++l) {
    const layer_weights& w = weights_.layers[l];

    // Attention block: x += Wo · attn(rope(Wq h), rope(Wk h), Wv h), h = norm(x).
    // (norm_placement post: h = x, and x = layer_norm(x + ...) after each add.)
    if (w.attn_norm.empty()) {
      residual_as_input(T);
    } else {
      norm_rows(w.attn_norm);
    }
    matmul_shared(b.h, T, {{w.wq, b.q.data(), Q}, {w.wk, b.k.data(), KV}, {w.wv, b.v.data(), KV}});
    const auto li = static_cast<int32_t>(l);
    lora_update(li, matrix_role::attn_q, b.h, E, b.q.data(), Q);
    lora_update(li, matrix_role::attn_k, b.h, E, b.k.data(), KV);
    lora_update(li, matrix_role::attn_v, b.h, E, b.v.data(), KV);
    attention_layer(l, in, cache, T);
    matmul(w.wo, b.attn, T, b.proj);
    lora_update(li, matrix_role::attn_output, b.attn, Q, b.proj.data(), E);
    add_sublayer_output(w.bo, w.post_attn_norm, T, w.attn_out_norm, w.attn_out_norm_b);

    // Feed-forward block: x += ffn(norm(x)), through the layer kind's hook.
    if (w.ffn_norm.empty()) {
      residual_as_input(T);
    } else {
      norm_rows(w.ffn_norm);
    }
    switch (w.ffn) {
      case ffn_kind::dense:
        if (w.w_gate.rows > 0) {
          ffn_dense(w, T);
        } else {
          ffn_ungated(w, T);
        }
        break;
      case ffn_kind::moe:
        ffn_moe(w, T);
        break;
    }
    add_sublayer_output(w.b_down, w.post_ffn_norm, T, w.layer_out_norm, w.layer_out_norm_b);
  }

  // Output head on the requested rows only: h[r] = norm(x[token of r]); an embedding
  // sequence's rows go normed to out.hidden instead (pooled by the caller, no head).
  int64_t n_out = 0;
  {
    int64_t n_hidden = 0;
    for (const auto& s : in.seqs) n_hidden += s.want_hidden ? static_cast<int64_t>(s.tokens.size()) : 0;
    out.hidden.resize(static_cast<size_t>(n_hidden * E));
    int64_t t = 0, h = 0;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const auto n = static_cast<int64_t>(in.seqs[i].tokens.size());
      if (in.seqs[i].want_hidden) {
        out.first_hidden[i] = static_cast<int32_t>(h);
        out.first_row[i] = static_cast<int32_t>(n_out);
        for (int64_t u = t; u < t + n; ++u, ++h) {
          if (weights_.output_norm.empty()) {  // an encoder's hidden states are the last block's output
            std::copy(&b.x[u * E], &b.x[u * E] + E, &out.hidden[h * E]);
          } else {
            kernels::rms_norm(&b.x[u * E], weights_.output_norm.data(), &out.hidden[h * E], E, c.rms_eps);
          }
        }
        t += n;
        continue;
      }
      const int64_t first = in.seqs[i].want_all_logits ? t : t + n - 1;
      out.first_row[i] = static_cast<int32_t>(n_out);
      out.n_rows[i] = n == 0 ? 0 : static_cast<int32_t>(t + n - first);
      for (int64_t u = first; n > 0 && u < t + n; ++u, ++n_out) {
        kernels::rms_norm(&b.x[u * E], weights_.output_norm.data(), &b.h[n_out * E], E, c.rms_eps);
        row_adapter_[static_cast<size_t>(n_out)] = adapter_of(in.seqs[i]);
        row_scale_[static_cast<size_t>(n_out)] = in.seqs[i].adapter_scale;
        lora_order[static_cast<size_t>(n_out)] =
            llama_cpp_order_ && t + n - first == 1 ? lora::step_updates::kSingleRow : 0;  // its only output row
      }
      t += n;
    }
  }
  out.logits.resize(static_cast<size_t>(n_out) * c.n_vocab);
  if (n_out == 0) return;  // a step of embedding sequences only
  kernels::matmul(weights_.output, b.h.data(), E, n_out, out.logits.data(), c.n_vocab, kernels_, pool_, b.mm);
  if (!lora_.empty()) {  // the head's rows: the first n_out entries, rewritten above
    lora_head_.plan(std::span(row_adapter_).first(static_cast<size_t>(n_out)),
                    std::span(row_scale_).first(static_cast<size_t>(n_out)),
                    std::span(lora_order).first(static_cast<size_t>(n_out)));
    if (!lora_head_.empty()) {
      lora_head_.apply(-1, matrix_role::output, b.h.data(), E, out.logits.data(), c.n_vocab, kernels_, pool_);
    }
  }
  if (c.final_logit_softcap > 0.0f) {
    const float cap = c.final_logit_softcap, inv = 1.0f / cap;
    for (float& l : out.logits) l = std::tanh(l * inv) * cap;
  }
}

// The local table covers the step's positions, and every block the window reads from its
// first query on is held (kv_window::first_read).
void model::check_local_table(const seq_step& s, const kv_pool& cache) const {
  const int bt = cache.block_tokens();
  const int64_t end = static_cast<int64_t>(s.start_pos) + static_cast<int64_t>(s.tokens.size());
  if (static_cast<int64_t>(s.local_blocks.size()) * bt < end) {
    throw std::invalid_argument("forward: local block table of sequence " + std::to_string(s.seq) +
                                " does not cover position " + std::to_string(end - 1));
  }
  const auto first = static_cast<int64_t>(kv_window{config_.n_swa}.first_read(static_cast<uint32_t>(s.start_pos)));
  for (size_t i = 0; i < s.local_blocks.size(); ++i) {
    const block_id b = s.local_blocks[i];
    const bool read = static_cast<int64_t>(i + 1) * bt > first && static_cast<int64_t>(i) * bt < end;
    if (b == kNoBlock && !read) continue;
    if (b >= static_cast<block_id>(cache.n_local_blocks())) {
      throw std::invalid_argument("forward: the local block table of sequence " + std::to_string(s.seq) +
                                  " lacks a block its window reads, or names one outside the pool");
    }
  }
}

// b.proj = W_down (act(W_gate h) * (W_up h)) for the T rows of b.h.
void model::ffn_dense(const layer_weights& w, int64_t T) {
  const int64_t F = config_.n_ff;
  auto& b = buf_;
  matmul_shared(b.h, T, {{w.w_gate, b.gate.data(), F}, {w.w_up, b.up.data(), F}});
  const auto li = static_cast<int32_t>(&w - weights_.layers.data());
  lora_update(li, matrix_role::ffn_gate, b.h, config_.n_embd, b.gate.data(), F);
  lora_update(li, matrix_role::ffn_up, b.h, config_.n_embd, b.up.data(), F);
  auto act = [&](int64_t t) { activate(F, &b.gate[t * F], &b.up[t * F]); };
  if (T < kParallelRowThreshold) {
    for (int64_t t = 0; t < T; ++t) act(t);
  } else {
    pool_.parallel_for(T, [&](int64_t t, int) { act(t); });
  }
  matmul(w.w_down, b.gate, T, b.proj);
  lora_update(li, matrix_role::ffn_down, b.gate, F, b.proj.data(), config_.n_embd);
}

// b.proj = the mixture of the experts each row of b.h is routed to (engine/experts/moe_ffn.h).
void model::ffn_moe(const layer_weights& w, int64_t T) {
  const model_config& c = config_;
  const experts::moe_shape shape{
      c.n_embd, c.n_ff_exp, {c.arch->gating, c.arch->expert_weights_norm, static_cast<int32_t>(c.n_expert_used)}};
  auto& b = buf_;
  moe_.forward(
      w.experts, shape, b.h.data(), T, b.single_order,
      [this](int64_t n, float* g, const float* u) { activate(n, g, u); }, b.proj.data(), kernels_, pool_);
  route_record& r = routes_[static_cast<size_t>(&w - weights_.layers.data())];
  r.choices.assign(moe_.choices().begin(), moe_.choices().end());
  r.experts_run = moe_.groups().experts_used();
}

void model::activate(int64_t n, float* gate, const float* up) const {
  switch (config_.arch->activation) {
    case ffn_activation::gelu_tanh:
      kernels::geglu(n, gate, up);
      break;
    case ffn_activation::swiglu_oai:
      kernels::swiglu_oai(n, gate, up);
      break;
    case ffn_activation::silu:
      kernels_.swiglu(n, gate, up);
      break;
  }
}

void model::add_sublayer_output(const std::vector<float>& bias, const std::vector<float>& post_norm, int64_t T,
                                const std::vector<float>& res_norm, const std::vector<float>& res_norm_b) {
  const int64_t E = config_.n_embd;
  auto& b = buf_;
  auto add = [&](int64_t t) {
    float* p = &b.proj[t * E];
    for (size_t i = 0; i < bias.size(); ++i) p[i] += bias[i];
    if (!post_norm.empty()) kernels::rms_norm(p, post_norm.data(), p, E, config_.rms_eps);
    float* x = &b.x[t * E];
    for (int64_t i = 0; i < E; ++i) x[i] = p[i] + x[i];
    if (!res_norm.empty()) kernels::layer_norm(x, res_norm.data(), res_norm_b.data(), x, E, config_.norm_eps);
  };
  if (T < kParallelRowThreshold) {
    for (int64_t t = 0; t < T; ++t) add(t);
  } else {
    pool_.parallel_for(T, [&](int64_t t, int) { add(t); });
  }
}

void model::attention_layer(uint32_t layer, const step_input& in, kv_pool& cache, int64_t T) {
  const model_config& c = config_;
  const int64_t Q = c.q_dim(), KV = c.kv_dim();
  const int32_t hd = static_cast<int32_t>(c.head_dim);
  const int bt = cache.block_tokens();
  auto& b = buf_;

  const layer_weights& w = weights_.layers[layer];
  const bool local = c.is_swa(layer);
  const bool own_pool = cache.in_local_pool(layer);  // blocks through the local tables
  const auto* rope_of = local && swa_rope_differs_ ? &b.rope_swa : &b.rope;
  const auto rope_apply = c.arch->rope == rope_style::neox ? kernels::rope_apply_neox : kernels::rope_apply;
  const float scale = c.attention_scale;
  auto add_bias = [](float* y, const std::vector<float>& bias) {
    for (size_t i = 0; i < bias.size(); ++i) y[i] += bias[i];
  };
  auto norm_heads = [&](float* x, uint32_t n_heads, const std::vector<float>& weight) {
    for (uint32_t h = 0; h < n_heads; ++h) kernels::rms_norm(x + h * hd, weight.data(), x + h * hd, hd, c.rms_eps);
  };

  // Biases, per-head norms and RoPE on q and k (in the architecture's order), then k and v
  // into the cache at each token's slot.
  auto rope_and_store = [&](int64_t t) {
    float* q = &b.q[t * Q];
    float* k = &b.k[t * KV];
    add_bias(q, w.bq);
    add_bias(k, w.bk);
    add_bias(&b.v[t * KV], w.bv);
    if (!w.q_norm.empty()) {
      norm_heads(q, c.n_head, w.q_norm);
      norm_heads(k, c.n_head_kv, w.k_norm);
    }
    if (c.arch->rope != rope_style::none) {
      const float* cs = &(*rope_of)[t * c.n_rot];
      rope_apply(q, static_cast<int32_t>(c.n_head), hd, static_cast<int32_t>(c.n_rot), cs);
      rope_apply(k, static_cast<int32_t>(c.n_head_kv), hd, static_cast<int32_t>(c.n_rot), cs);
    }
    if (c.arch->query_prescale) {
      for (int64_t i = 0; i < Q; ++i) q[i] *= scale;
    }
    const auto& s = in.seqs[static_cast<size_t>(b.seq[t])];
    const int32_t block =
        static_cast<int32_t>((own_pool ? s.local_blocks : s.blocks)[static_cast<size_t>(b.pos[t] / bt)]);
    const int32_t slot = b.pos[t] % bt;
    if (cache.dtype() == kv_cache_dtype::q8_0) {  // a row of hd / 32 blocks per position
      const int64_t row_blocks = hd / kernels::kBlock;
      for (uint32_t h = 0; h < c.n_head_kv; ++h) {
        kernels_.quantize_q8(&b.k[t * KV + h * hd], cache.k_q8(layer, block, h) + slot * row_blocks, hd, false);
        kernels_.quantize_q8(&b.v[t * KV + h * hd], cache.v_q8(layer, block, h) + slot * row_blocks, hd, false);
      }
      return;
    }
    for (uint32_t h = 0; h < c.n_head_kv; ++h) {
      kernels_.to_f16(hd, &b.k[t * KV + h * hd], cache.k(layer, block, h) + static_cast<int64_t>(slot) * hd);
      kernels::f16_bits v16[kMaxHeadDim];
      kernels_.to_f16(hd, &b.v[t * KV + h * hd], v16);
      kernels::f16_bits* vd = cache.v(layer, block, h) + slot;  // transposed: stride bt
      for (int32_t i = 0; i < hd; ++i) vd[static_cast<int64_t>(i) * bt] = v16[i];
    }
  };
  if (T < kParallelRowThreshold) {
    for (int64_t t = 0; t < T; ++t) rope_and_store(t);
  } else {
    pool_.parallel_for(T, [&](int64_t t, int) { rope_and_store(t); });
  }

  // One task per (token, kv head), taking the query heads that share it; each token sees
  // keys at positions <= its own (and, on a local layer, inside the window); without causal
  // attention every key of its sequence, all stored above (forward() admits such a
  // sequence only whole, from position 0).
  const float softmax_scale = c.arch->query_prescale ? 1.0f : scale;
  const float* sinks = w.attn_sinks.empty() ? nullptr : w.attn_sinks.data();  // [n_head]
  const auto group = static_cast<int>(c.n_head / c.n_head_kv);
  pool_.parallel_for(T * c.n_head_kv, [&](int64_t task, int thread) {
    const int64_t t = task / c.n_head_kv;
    const auto kv_head = static_cast<uint32_t>(task % c.n_head_kv);
    kernels::f16_bits* q16 = &b.q16[static_cast<size_t>(thread) * Q];
    const auto& s = in.seqs[static_cast<size_t>(b.seq[t])];
    const block_table& blocks = own_pool ? s.local_blocks : s.blocks;
    const bool single_token = llama_cpp_order_ && (s.tokens.size() == 1 || s.decode_numerics);
    const int32_t key_end = c.causal ? b.key_end[t] : s.start_pos + static_cast<int32_t>(s.tokens.size());
    for (int g0 = 0; g0 < group; g0 += kMaxGroupedHeads) {
      const int n = std::min(kMaxGroupedHeads, group - g0);
      if (cache.dtype() == kv_cache_dtype::q8_0) {
        const size_t rb = cache.row_bytes();
        std::byte* q8 = &b.q8[static_cast<size_t>(thread) * (static_cast<size_t>(Q) / kernels::kBlock) *
                              sizeof(kernels::block_q8_0)];
        float* outs[kMaxGroupedHeads];
        for (int g = 0; g < n; ++g) {
          const int64_t h = static_cast<int64_t>(kv_head) * group + g0 + g;
          kernels_.quantize_q8(&b.q[t * Q + h * hd], q8 + static_cast<size_t>(g) * rb, hd, false);
          outs[g] = &b.attn[t * Q + h * hd];
        }
        attend_heads_q8(kernels_, cache, layer, blocks, c.first_visible_key(layer, b.pos[t]), key_end, kv_head, q8,
                        n, softmax_scale, sinks == nullptr ? nullptr : sinks + kv_head * group + g0,
                        b.attn_scratch[static_cast<size_t>(thread)], outs);
        continue;
      }
      const kernels::f16_bits* qs[kMaxGroupedHeads];
      float* outs[kMaxGroupedHeads];
      for (int g = 0; g < n; ++g) {
        const int64_t h = static_cast<int64_t>(kv_head) * group + g0 + g;
        kernels_.to_f16(hd, &b.q[t * Q + h * hd], q16 + g * hd);
        qs[g] = q16 + g * hd;
        outs[g] = &b.attn[t * Q + h * hd];
      }
      attend_heads(kernels_, cache, layer, blocks, c.first_visible_key(layer, b.pos[t]), key_end, kv_head, qs, n,
                   softmax_scale, sinks == nullptr ? nullptr : sinks + kv_head * group + g0, single_token,
                   b.attn_scratch[static_cast<size_t>(thread)], outs);
    }
  });
}

}  // namespace tandem
