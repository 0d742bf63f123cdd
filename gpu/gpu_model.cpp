#include "gpu/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpu/plan/launch_config.h"
#include "gpu/plan/matrix_stacks.h"

namespace tandem::gpu {
namespace {

device_buffer upload_now(const void* host, size_t bytes, stream_handle s) {
  device_buffer b(bytes);
  copy_to_device_async(b.data(), host, bytes, s);
  return b;
}

device_buffer upload_floats(const std::vector<float>& v, stream_handle s, size_t& total) {
  total += v.size() * sizeof(float);
  return upload_now(v.data(), v.size() * sizeof(float), s);
}

// The layout of `parts` stacked by rows; names the matrix in the error when the device
// cannot read it.
matrix_layout stacked_layout(tensor_type type, int64_t rows, int64_t cols, const std::string& what) {
  try {
    return layout_of(type, rows, cols);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("gpu_model: " + what + ": " + e.what());
  }
}

}  // namespace

std::vector<device_matrix> gpu_model::make_stacks(const std::vector<matrix_part>& parts, const std::string& what,
                                                  const fill_fn& fill) {
  std::vector<device_matrix> out;
  for (const auto& g : plan_matrix_stacks(parts, kMaxGemvOutputs)) {
    device_matrix m;
    int64_t rows = 0;
    for (size_t i : g) m.part_end[m.n_parts++] = static_cast<int32_t>(rows += parts[i].rows);
    m.layout = stacked_layout(parts[g[0]].type, rows, parts[g[0]].cols, what);
    fill(m, g);
    for (int k = 0; k < 4; ++k) {
      m.variant[k] = pick_gemv_variant(m.layout.type, static_cast<int32_t>(m.layout.rows),
                                       static_cast<int32_t>(m.layout.cols), 1 << k, sm_count_);
    }
    weight_bytes_ += m.layout.bytes;
    out.push_back(std::move(m));
  }
  return out;
}

gpu_model::gpu_model(const model_config& config, const model_weights& weights, const gpu_model_options& options)
    : config_(config), options_(options) {
  check_shape();
  stream up;
  // Each matrix is repacked on the host into its device layout, then copied (start-up only).
  std::vector<std::byte> staging;
  auto upload = [&](const std::vector<const kernels::weight_view*>& views, const std::string& what) {
    std::vector<matrix_part> parts;
    for (const auto* v : views) parts.push_back({v->type, v->rows, v->cols});
    return make_stacks(parts, what, [&](device_matrix& m, const std::vector<size_t>& members) {
      staging.assign(m.layout.bytes, std::byte{0});
      int64_t row0 = 0;
      for (size_t i : members) {
        const kernels::weight_view& v = *views[i];
        if (v.stride != row_bytes(v.type, v.cols)) throw std::invalid_argument("gpu_model: " + what + ": padded rows");
        repack_rows(m.layout, row0, v.rows, v.data, staging.data());
        row0 += v.rows;
      }
      m.bytes = upload_now(staging.data(), staging.size(), up.handle());
      up.synchronize();  // the staging buffer is reused by the next matrix
    });
  };
  // The matrices as for_each_matrix walks them: consecutive ones that read one input become
  // one group (stacked where their types agree), placed by the group's first role. A role
  // this backend has no place for is refused by name, not left behind.
  std::vector<std::vector<const kernels::weight_view*>> groups;
  std::vector<std::pair<matrix_role, int32_t>> group_of;  // (first role, layer)
  size_t max_w = 0;
  tandem::for_each_matrix(weights, [&](const const_matrix_ref& m) {
    const bool joins = !groups.empty() && group_of.back().second == m.layer &&
                       matrix_input_group(group_of.back().first) == matrix_input_group(m.role);
    if (!joins) groups.emplace_back(), group_of.emplace_back(m.role, m.layer);
    groups.back().push_back(&m.view);
    const bool multiplied = m.role != matrix_role::token_embd;
    if (multiplied && device_matrix::fmt_is_quantized(m.view.type)) {
      max_w = std::max(max_w, static_cast<size_t>(m.view.rows * m.view.cols));
    }
  });
  tied_ = weights.output.data == weights.token_embd.data;
  layers_.resize(weights.layers.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [role, li] = group_of[g];
    const std::string what =
        (li >= 0 ? "layer " + std::to_string(li) + " " : std::string()) + std::string(matrix_role_name(role));
    if (role == matrix_role::output && tied_) continue;  // the head is token_embd's bytes
    auto stacks = upload(groups[g], what);
    switch (role) {
      case matrix_role::token_embd:
        token_embd_ = std::move(stacks[0]);
        break;
      case matrix_role::output:
        output_ = std::move(stacks[0]);
        break;
      case matrix_role::attn_q:
        layers_[static_cast<size_t>(li)].qkv = std::move(stacks);
        break;
      case matrix_role::attn_output:
        layers_[static_cast<size_t>(li)].wo = std::move(stacks[0]);
        break;
      case matrix_role::ffn_gate:
        layers_[static_cast<size_t>(li)].gate_up = std::move(stacks);
        break;
      case matrix_role::ffn_down:
        layers_[static_cast<size_t>(li)].w_down = std::move(stacks[0]);
        break;
      default:
        throw std::invalid_argument("gpu_model: the CUDA backend has no place for " + what + " matrices");
    }
  }
  output_norm_ = upload_floats(weights.output_norm, up.handle(), weight_bytes_);
  if (!weights.rope_freqs.empty()) rope_freqs_ = upload_floats(weights.rope_freqs, up.handle(), weight_bytes_);
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const layer_weights& w = weights.layers[i];
    layer& l = layers_[i];
    if (w.ffn != ffn_kind::dense) throw std::invalid_argument("gpu_model: the CUDA backend runs dense FFN layers only");
    auto optional = [&](const std::vector<float>& v) {
      return v.empty() ? device_buffer{} : upload_floats(v, up.handle(), weight_bytes_);
    };
    l.attn_norm = upload_floats(w.attn_norm, up.handle(), weight_bytes_);
    l.ffn_norm = upload_floats(w.ffn_norm, up.handle(), weight_bytes_);
    l.bq = optional(w.bq), l.bk = optional(w.bk), l.bv = optional(w.bv);
    l.q_norm = optional(w.q_norm), l.k_norm = optional(w.k_norm);
    l.post_attn_norm = optional(w.post_attn_norm), l.post_ffn_norm = optional(w.post_ffn_norm);
  }
  up.synchronize();
  finish_setup(max_w);
}

gpu_model::gpu_model(const model_config& config, const synthetic_weights& sw, const gpu_model_options& options)
    : config_(config), options_(options) {
  check_shape();
  const model_config& c = config_;
  stream up;
  uint64_t seed = sw.seed;
  auto random = [&](const std::vector<matrix_part>& parts, const std::string& what) {
    return make_stacks(parts, what, [&](device_matrix& m, const std::vector<size_t>&) {
      m.bytes = device_buffer(m.layout.bytes);
      launch_random_weights(m.layout, m.bytes.data(), seed++, up.handle());
    });
  };
  const std::vector<float> ones(c.n_embd, 1.0f);
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  auto type_of = [&](const std::vector<tensor_type>& per_layer, tensor_type fallback, uint32_t i) {
    return per_layer.empty() ? fallback : per_layer[i % per_layer.size()];
  };
  token_embd_ = std::move(random({{sw.head_type, V, E}}, "token_embd")[0]);
  tied_ = c.tied_output;
  if (!tied_) output_ = std::move(random({{sw.output_type.value_or(sw.head_type), V, E}}, "output")[0]);
  output_norm_ = upload_floats(ones, up.handle(), weight_bytes_);
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    const tensor_type t = sw.weight_type;
    layer l;
    l.attn_norm = upload_floats(ones, up.handle(), weight_bytes_);
    l.ffn_norm = upload_floats(ones, up.handle(), weight_bytes_);
    l.qkv = random({{t, Q, E}, {t, KV, E}, {type_of(sw.attn_v_types, t, i), KV, E}}, "attention q/k/v");
    l.wo = std::move(random({{t, E, Q}}, "attn_output")[0]);
    l.gate_up = random({{t, F, E}, {t, F, E}}, "ffn gate/up");
    l.w_down = std::move(random({{type_of(sw.ffn_down_types, t, i), E, F}}, "ffn_down")[0]);
    layers_.push_back(std::move(l));
  }
  up.synchronize();
  size_t max_w = 0;
  auto consider = [&](const device_matrix& m) {
    if (!m.quantized()) return;
    for (int k = 0; k < m.n_parts; ++k) {
      const int32_t rows = m.part_end[k] - (k ? m.part_end[k - 1] : 0);
      max_w = std::max(max_w, static_cast<size_t>(rows) * static_cast<size_t>(m.layout.cols));
    }
  };
  consider(token_embd_);
  if (!tied_) consider(output_);
  for (const layer& l : layers_) {
    for (const auto& m : l.qkv) consider(m);
    for (const auto& m : l.gate_up) consider(m);
    consider(l.wo), consider(l.w_down);
  }
  finish_setup(max_w);
}

void gpu_model::check_shape() {
  const model_config& c = config_;
  if (c.arch == nullptr) {
    throw std::invalid_argument("gpu_model: unknown architecture '" + c.architecture + "'");
  }
  if (c.head_dim % 32 != 0 || c.head_dim > 256) {
    throw std::invalid_argument("gpu_model: head size " + std::to_string(c.head_dim) +
                                " is not a multiple of 32 up to 256");
  }
  if (c.rope_scaling == rope_scaling_type::yarn) throw std::invalid_argument("gpu_model: YaRN RoPE is not supported");
  if (c.arch->embeddings_only || !c.causal) {
    throw std::invalid_argument("gpu_model: encoders (" + c.architecture + ") run on the CPU only");
  }
  if (c.arch->attention_sinks || c.arch->activation == ffn_activation::swiglu_oai) {
    throw std::invalid_argument("gpu_model: gpt-oss's attention sinks and clamped SwiGLU are not supported");
  }
  if (options_.limits.max_table_width == 0) {
    options_.limits.max_table_width = (std::max(c.n_ctx_train, 1u) + options_.block_tokens - 1) / options_.block_tokens;
  }
  sm_count_ = memory_info().sm_count;
}

void gpu_model::for_each_device_matrix(const std::function<void(device_matrix&)>& fn) {
  fn(token_embd_);
  if (!tied_) fn(output_);
  for (layer& l : layers_) {
    for (auto& m : l.qkv) fn(m);
    fn(l.wo);
    for (auto& m : l.gate_up) fn(m);
    fn(l.w_down);
  }
}

void gpu_model::finish_setup(size_t max_w) {
  const model_config& c = config_;
  // Workspace for the largest step, then the KV pool from what is left.
  const model_shape shape{c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab};
  plan_ = plan_workspace(shape, options_.limits);
  work_ = device_buffer(plan_.total);
  if (options_.bf16_shadow) {
    // Large steps multiply BF16 copies of the quantized matrices, made once here, instead of
    // dequantizing a whole matrix into scratch before every product.
    stream up;
    for_each_device_matrix([&](device_matrix& m) {
      // An untied embedding is only gathered from, never multiplied.
      if (!m.quantized() || (&m == &token_embd_ && !tied_)) return;
      m.shadow = device_buffer(static_cast<size_t>(m.layout.rows) * static_cast<size_t>(m.layout.cols) * 2);
      launch_dequantize_bf16(m.layout, m.bytes.data(), 0, m.layout.rows, m.shadow.as<uint16_t>(), up.handle());
      weight_bytes_ += m.shadow.bytes();
      shadow_bytes_ += m.shadow.bytes();
    });
    up.synchronize();
    if (!options_.keep_dequantize_scratch) max_w = 0;
  }
  // GEMM scratch: the largest quantized matrix as BF16 (none with the copies, as gpu_sizing
  // plans it), the largest activation as 16 bits.
  const size_t max_rows = std::max(options_.limits.max_tokens, options_.limits.max_logit_rows);
  gemm_ = std::make_unique<gemm_engine>(max_w, max_rows * std::max({c.n_embd, c.q_dim(), c.n_ff}));
  const size_t scratch_bytes = plan_.total + gemm_->scratch_bytes();
  const kv_geometry geo{c.n_layer, c.n_head_kv, c.head_dim, options_.block_tokens, kv_dtype_bytes(options_.kv_dtype)};
  n_blocks_ = options_.n_blocks;
  if (n_blocks_ <= 0) {
    const device_memory_info mem = memory_info();
    memory_budget budget;
    budget.total_bytes = mem.total_bytes;
    // Weights and workspace are allocated already: count them against the share, not free.
    budget.free_bytes = mem.free_bytes + weight_bytes_ + scratch_bytes;
    budget.utilization = options_.gpu_memory_utilization;
    budget.weight_bytes = weight_bytes_;
    budget.workspace_bytes = scratch_bytes;
    const kv_plan kv = plan_kv_pool(geo, budget);
    if (kv.n_blocks <= 1)
      throw std::runtime_error("gpu_model: " + (kv.why.empty() ? "no room for a KV block" : kv.why));
    n_blocks_ = kv.n_blocks - 1;  // one is the scratch block
  }
  kv_ = device_buffer(geo.block_bytes() * (static_cast<size_t>(n_blocks_) + 1));
  const uint32_t slots = std::max(options_.staging_slots, 1u);
  for (uint32_t i = 0; i < slots; ++i) staging_.emplace_back(plan_.sampled - plan_.tokens);
  if (options_.cuda_graphs) {
    // Buffers are allocated once, above, and never again: graphs stay valid for the
    // model's life (graph_cache::invalidate is for a model that reallocates).
    const step_limits& lim = options_.limits;
    graph_options go;
    go.max_batch = std::min({256u, lim.max_seqs, lim.max_tokens, lim.max_logit_rows});
    go.max_width = lim.max_table_width;
    graphs_ = std::make_unique<graph_cache<cuda_graph>>(go, slots);
  }
}

kv_layer gpu_model::kv_of(uint32_t l) const {
  // Layer l's K then V, each [n_blocks + 1][n_head_kv][block_tokens][head_dim] elements of
  // the cache's type (the kernels take byte addresses through the uint16_t pointers).
  const size_t eb = kv_dtype_bytes(options_.kv_dtype);
  const size_t per =
      (static_cast<size_t>(n_blocks_) + 1) * config_.n_head_kv * options_.block_tokens * config_.head_dim * eb;
  auto* base = kv_.as<char>() + size_t{2} * l * per;
  kv_layer kv;
  kv.k = reinterpret_cast<uint16_t*>(base);
  kv.v = reinterpret_cast<uint16_t*>(base + per);
  kv.n_head_kv = static_cast<int32_t>(config_.n_head_kv);
  kv.head_dim = static_cast<int32_t>(config_.head_dim);
  kv.block_tokens = static_cast<int32_t>(options_.block_tokens);
  kv.dtype = options_.kv_dtype;
  return kv;
}

void gpu_model::project(const device_matrix* const* ms, size_t n, const float* x, int32_t n_tok, float* const* outs,
                        stream_handle s) {
  const bool gemm = n_tok >= options_.gemm_min_tokens;
  gemv_activations acts{x, nullptr, nullptr};
  for (size_t i = 0; i < n && !gemm; ++i) {
    if (ms[i]->quantized() && acts.q == nullptr) {
      auto* q = reinterpret_cast<int8_t*>(static_cast<char*>(work_.data()) + plan_.act_q);
      launch_quantize_q8(x, n_tok, static_cast<int32_t>(ms[i]->layout.cols), q, fbuf(plan_.act_ds), s);
      acts.q = q, acts.ds = fbuf(plan_.act_ds);
    }
  }
  int tile_index = 0;
  while ((1 << tile_index) < gemv_token_tile(n_tok)) ++tile_index;
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    const device_matrix& m = *ms[i];
    if (gemm) {
      const bool shadow = use_shadow_ && m.shadow.bytes() > 0;
      const matrix_layout dense = shadow ? layout_of(tensor_type::bf16, m.layout.rows, m.layout.cols) : m.layout;
      for (int32_t k = 0; k < m.n_parts; ++k) {
        const int32_t row0 = k ? m.part_end[k - 1] : 0;
        gemm_->matmul(dense, shadow ? m.shadow.data() : m.bytes.data(), row0, m.part_end[k] - row0, x, n_tok, outs[o++],
                      s);
      }
    } else {
      gemv_outputs go;
      go.n = m.n_parts;
      for (int32_t k = 0; k < m.n_parts; ++k) go.y[k] = outs[o++], go.end[k] = m.part_end[k];
      launch_gemv(m.layout, m.bytes.data(), acts, n_tok, go, m.variant[tile_index], s);
    }
  }
}

void gpu_model::project(const std::vector<device_matrix>& ms, const float* x, int32_t n_tok, float* const* outs,
                        stream_handle s) {
  const device_matrix* ptrs[kMaxGemvOutputs];
  for (size_t i = 0; i < ms.size(); ++i) ptrs[i] = &ms[i];
  project(ptrs, ms.size(), x, n_tok, outs, s);
}

void gpu_model::matmul(const device_matrix& w, const float* x, int32_t n_tok, float* y, stream_handle s) {
  const device_matrix* ptr = &w;
  project(&ptr, 1, x, n_tok, &y, s);
}

void gpu_model::enqueue_copy_block(int32_t src, int32_t dst, stream_handle s) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_)
    throw std::invalid_argument("copy_block: bad block id");
  // A block is contiguous within each layer's K and V: [n_head_kv][block_tokens][head_dim].
  const size_t block_bytes = static_cast<size_t>(config_.n_head_kv) * options_.block_tokens * config_.head_dim *
                             kv_dtype_bytes(options_.kv_dtype);
  for (uint32_t l = 0; l < config_.n_layer; ++l) {
    const kv_layer kv = kv_of(l);
    for (auto* base : {reinterpret_cast<char*>(kv.k), reinterpret_cast<char*>(kv.v)}) {
      copy_on_device_async(base + static_cast<size_t>(dst) * block_bytes, base + static_cast<size_t>(src) * block_bytes,
                           block_bytes, s);
    }
  }
}

float* gpu_model::logits() const { return fbuf(plan_.logits); }
int32_t* gpu_model::sampled() const { return ibuf(plan_.sampled); }

step_rows gpu_model::enqueue_forward(const step_input& in, stream_handle s, uint32_t slot) {
  for (const seq_step& sq : in.seqs) {
    if (!sq.embeddings.empty()) {
      throw std::invalid_argument("gpu_model: the CUDA backend does not take embedding rows yet");
    }
  }
  pack_options po;
  po.block_tokens = options_.block_tokens;
  po.n_blocks = n_blocks_;
  po.n_vocab = config_.n_vocab;
  po.limits = options_.limits;
  // Everything is validated here, before anything is enqueued.
  const packed_step shape = measure_step(in, po);
  step_rows rows;
  rows.first_row = shape.first_row;
  rows.n_rows_of = shape.n_rows_of;
  rows.n_rows = shape.n_real_rows;
  if (shape.n_tokens == 0) return rows;

  graph_decision d;
  if (graphs_) {
    d = graphs_->decide(slot, static_cast<uint32_t>(in.seqs.size()), shape.table_width, is_decode_step(in));
  }
  if (d.action != graph_action::eager) {
    po.pad_to = d.bucket;
    po.table_width = d.width;
    po.scratch_block = n_blocks_;
  }
  pinned_buffer& stage = staging_[slot % staging_.size()];
  auto host = [&](size_t offset) { return reinterpret_cast<int32_t*>(stage.as<char>() + (offset - plan_.tokens)); };
  packed_step ps = pack_step(in, po,
                             {host(plan_.tokens), host(plan_.positions), host(plan_.row_seq), host(plan_.slots),
                              host(plan_.out_rows), host(plan_.tables)});
  // Prompt chunks, verification and mixed steps: the tiled attention's tiles travel in the
  // same copy. Decode steps (graphed or not) keep the split-K decode kernel.
  int32_t n_tiles = 0;
  if (plan_.max_tiles > 0 && !is_decode_step(in)) {
    const auto tiles = plan_prefill_tiles(host(plan_.row_seq), host(plan_.positions), ps.n_tokens,
                                          prefill_tile_tokens(config_.n_head, config_.n_head_kv));
    if (tiles.size() > plan_.max_tiles) throw std::logic_error("gpu_model: more prefill tiles than planned");
    std::memcpy(host(plan_.tiles), tiles.data(), tiles.size() * sizeof(prefill_tile));
    n_tiles = static_cast<int32_t>(tiles.size());
  }
  switch (d.action) {
    case graph_action::eager:
      enqueue_packed(ps, stage, n_tiles, s);
      ++graph_counts_.eager;
      break;
    case graph_action::replay:
      graphs_->find(slot, d)->launch(s);
      ++graph_counts_.replays;
      break;
    case graph_action::capture: {
      // The graph serves every later step of this bucket up to the captured width, so its
      // attention split plan covers the width's whole capacity, not this step's context.
      ps.max_keys = static_cast<int32_t>(d.width * options_.block_tokens);
      gemm_->bind_stream(s);
      cuda_graph g = cuda_graph::capture(s, [&] { enqueue_packed(ps, stage, n_tiles, s); });
      graphs_->store(slot, d, std::move(g)).launch(s);
      ++graph_counts_.captures;
      break;
    }
  }
  return rows;
}

void gpu_model::enqueue_packed(const packed_step& ps, const pinned_buffer& stage, int32_t n_tiles, stream_handle s) {
  const model_config& c = config_;
  const int32_t E = static_cast<int32_t>(c.n_embd);
  const int64_t T = ps.n_tokens;
  copy_to_device_async(ibuf(plan_.tokens), stage.data(), plan_.sampled - plan_.tokens, s);

  float *x = fbuf(plan_.x), *h = fbuf(plan_.h), *q = fbuf(plan_.q), *k = fbuf(plan_.k), *v = fbuf(plan_.v);
  float* attn = fbuf(plan_.attn);
  const int32_t nt = static_cast<int32_t>(T);
  launch_embed_rows(token_embd_.layout, token_embd_.bytes.data(), ibuf(plan_.tokens), nt, x, s);
  const architecture_traits& arch = *c.arch;
  if (arch.scale_embeddings) launch_scale(x, static_cast<size_t>(T) * E, std::sqrt(static_cast<float>(E)), s);

  const float freq_scale = c.rope_scaling == rope_scaling_type::linear ? 1.0f / c.rope_scaling_factor : 1.0f;
  const auto* factors = rope_freqs_.bytes() ? rope_freqs_.as<float>() : nullptr;
  rope_args rq;
  rq.n_heads = static_cast<int32_t>(c.n_head);
  rq.head_dim = static_cast<int32_t>(c.head_dim);
  rq.n_rot = static_cast<int32_t>(c.n_rot);
  rq.freq_base = c.rope_freq_base;
  rq.freq_scale = freq_scale;
  rq.freq_factors = factors;
  rq.mscale = c.rope_attn_factor;
  rq.neox = arch.rope == rope_style::neox;
  rope_args rk = rq;
  rk.n_heads = static_cast<int32_t>(c.n_head_kv);
  // Sliding-window layers: their own RoPE base and scale, and attention over the window
  // only (splits planned over the visible keys; the table entries before the window are
  // never read).
  rope_args rq_local = rq, rk_local = rk;
  rq_local.freq_base = rk_local.freq_base = c.rope_freq_base_swa;
  rq_local.freq_scale = rk_local.freq_scale = c.rope_freq_scale_swa;
  // The scale multiplies q before the dot products (the kernel folds it into q), which is
  // the query pre-scaling gemma3 asks for too.
  const float scale = c.attention_scale > 0.0f ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  auto attention_for = [&](uint32_t window) {
    const split_plan sp =
        plan_attention_splits(static_cast<uint32_t>(T) * attention_blocks_per_token(c.n_head, c.n_head_kv),
                              attention_visible_keys(static_cast<uint32_t>(ps.max_keys), window), options_.block_tokens,
                              static_cast<uint32_t>(sm_count_), options_.limits.max_splits);
    attention_args a;
    a.n_head = static_cast<int32_t>(c.n_head);
    a.scale = scale;
    a.table_width = static_cast<int32_t>(ps.table_width);
    a.n_splits = static_cast<int32_t>(sp.n_splits);
    a.keys_per_split = static_cast<int32_t>(sp.keys_per_split);
    a.window = static_cast<int32_t>(window);
    return a;
  };
  const attention_args aa_global = attention_for(0), aa_local = attention_for(c.n_swa);
  const int32_t hd = static_cast<int32_t>(c.head_dim);

  // h = norm(h) when the file has a post-norm, then x += h.
  auto add_sublayer = [&](const device_buffer& post_norm) {
    if (post_norm.bytes()) launch_rms_norm(h, post_norm.as<float>(), h, nt, E, c.rms_eps, s);
    launch_add(x, h, static_cast<size_t>(T) * E, s);
  };

  const uint32_t n_run = ps.n_layers > 0 ? std::min(ps.n_layers, c.n_layer) : c.n_layer;
  for (uint32_t li = 0; li < n_run; ++li) {
    const layer& w = layers_[li];
    launch_rms_norm(x, w.attn_norm.as<float>(), h, nt, E, c.rms_eps, s);
    float* const qkv[3] = {q, k, v};
    project(w.qkv, h, nt, qkv, s);
    if (w.bq.bytes()) launch_add_bias(q, w.bq.as<float>(), nt, static_cast<int32_t>(c.q_dim()), s);
    if (w.bk.bytes()) launch_add_bias(k, w.bk.as<float>(), nt, static_cast<int32_t>(c.kv_dim()), s);
    if (w.bv.bytes()) launch_add_bias(v, w.bv.as<float>(), nt, static_cast<int32_t>(c.kv_dim()), s);
    if (w.q_norm.bytes()) {
      launch_rms_norm(q, w.q_norm.as<float>(), q, nt * static_cast<int32_t>(c.n_head), hd, c.rms_eps, s);
      launch_rms_norm(k, w.k_norm.as<float>(), k, nt * static_cast<int32_t>(c.n_head_kv), hd, c.rms_eps, s);
    }
    const bool local = c.is_swa(li);
    const attention_args& aa = local ? aa_local : aa_global;
    launch_rope(q, ibuf(plan_.positions), nt, local ? rq_local : rq, s);
    launch_rope(k, ibuf(plan_.positions), nt, local ? rk_local : rk, s);
    const kv_layer kv = kv_of(li);
    launch_kv_store(k, v, ibuf(plan_.slots), nt, kv, s);
    if (n_tiles > 0) {
      launch_prefill_attention(q, ibuf(plan_.positions), ibuf(plan_.tables),
                               reinterpret_cast<const prefill_tile*>(ibuf(plan_.tiles)), n_tiles, kv, aa, attn, s);
    } else {
      launch_paged_attention(q, ibuf(plan_.positions), ibuf(plan_.row_seq), ibuf(plan_.tables), nt, kv, aa,
                             fbuf(plan_.partials), attn, s);
    }
    matmul(w.wo, attn, nt, h, s);
    add_sublayer(w.post_attn_norm);

    // Feed-forward block through the layer kind's hook (dense only on the device so far).
    launch_rms_norm(x, w.ffn_norm.as<float>(), h, nt, E, c.rms_eps, s);
    enqueue_ffn_dense(w, h, nt, s);
    add_sublayer(w.post_ffn_norm);
  }

  // Output head on the rows that want logits.
  const int32_t no = static_cast<int32_t>(ps.n_rows);
  launch_gather_rows(x, ibuf(plan_.out_rows), no, E, h, s);
  launch_rms_norm(h, output_norm_.as<float>(), h, no, E, c.rms_eps, s);
  matmul(tied_ ? token_embd_ : output_, h, no, fbuf(plan_.logits), s);
  if (c.final_logit_softcap > 0.0f) {
    launch_softcap(fbuf(plan_.logits), static_cast<size_t>(no) * c.n_vocab, c.final_logit_softcap, s);
  }
}

void gpu_model::enqueue_ffn_dense(const layer& w, float* h, int32_t nt, stream_handle s) {
  float *gate = fbuf(plan_.gate), *up = fbuf(plan_.up);
  const size_t n = static_cast<size_t>(nt) * config_.n_ff;
  float* const gate_up[2] = {gate, up};
  project(w.gate_up, h, nt, gate_up, s);
  if (config_.arch->activation == ffn_activation::gelu_tanh) {
    launch_geglu(gate, up, n, s);
  } else {
    launch_swiglu(gate, up, n, s);
  }
  matmul(w.w_down, gate, nt, h, s);
}

void gpu_model::forward(const step_input& in, stream& s, step_output& out) {
  const step_rows rows = enqueue_forward(in, s.handle());
  out.n_vocab = static_cast<int32_t>(config_.n_vocab);
  out.first_row = rows.first_row;
  out.n_rows = rows.n_rows_of;
  out.logits.resize(static_cast<size_t>(rows.n_rows) * config_.n_vocab);
  if (rows.n_rows > 0) {
    copy_to_host_async(out.logits.data(), logits(), out.logits.size() * sizeof(float), s.handle());
  }
  s.synchronize();
}

}  // namespace tandem::gpu
