#include "gpu/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpu/plan/launch_config.h"

namespace tandem::gpu {
namespace {

device_buffer upload_now(const void* host, size_t bytes, stream_handle s) {
  device_buffer b(bytes);
  copy_to_device_async(b.data(), host, bytes, s);
  return b;
}

device_buffer upload_matrix(const kernels::weight_view& w, stream_handle s, size_t& total) {
  const size_t bytes = w.stride * static_cast<size_t>(w.rows);
  total += bytes;
  return upload_now(w.data, bytes, s);
}

device_buffer upload_floats(const std::vector<float>& v, stream_handle s, size_t& total) {
  total += v.size() * sizeof(float);
  return upload_now(v.data(), v.size() * sizeof(float), s);
}

}  // namespace

gpu_model::gpu_model(const model_config& config, const model_weights& weights, const gpu_model_options& options)
    : config_(config), options_(options) {
  check_shape();
  stream up;
  // Weights, once. Host memory here is the mapped GGUF file (pageable): start-up only.
  token_embd_ = upload_matrix(weights.token_embd, up.handle(), weight_bytes_);
  embd_type_ = weights.token_embd.type;
  output_norm_ = upload_floats(weights.output_norm, up.handle(), weight_bytes_);
  tied_ = weights.output.data == weights.token_embd.data;
  output_type_ = weights.output.type;
  if (!tied_) output_ = upload_matrix(weights.output, up.handle(), weight_bytes_);
  if (!weights.rope_freqs.empty()) rope_freqs_ = upload_floats(weights.rope_freqs, up.handle(), weight_bytes_);
  for (const layer_weights& w : weights.layers) {
    layer l;
    l.attn_norm = upload_floats(w.attn_norm, up.handle(), weight_bytes_);
    l.ffn_norm = upload_floats(w.ffn_norm, up.handle(), weight_bytes_);
    l.wq = upload_matrix(w.wq, up.handle(), weight_bytes_), l.tq = w.wq.type;
    l.wk = upload_matrix(w.wk, up.handle(), weight_bytes_), l.tk = w.wk.type;
    l.wv = upload_matrix(w.wv, up.handle(), weight_bytes_), l.tv = w.wv.type;
    l.wo = upload_matrix(w.wo, up.handle(), weight_bytes_), l.to = w.wo.type;
    l.w_gate = upload_matrix(w.w_gate, up.handle(), weight_bytes_), l.tg = w.w_gate.type;
    l.w_up = upload_matrix(w.w_up, up.handle(), weight_bytes_), l.tu = w.w_up.type;
    l.w_down = upload_matrix(w.w_down, up.handle(), weight_bytes_), l.td = w.w_down.type;
    layers_.push_back(std::move(l));
  }
  up.synchronize();

  size_t max_w = 0;
  auto consider = [&](const kernels::weight_view& w) {
    if (w.type != tensor_type::f32 && w.type != tensor_type::f16 && w.type != tensor_type::bf16) {
      max_w = std::max(max_w, static_cast<size_t>(w.rows * w.cols));
    }
  };
  consider(weights.output);
  for (const layer_weights& w : weights.layers) {
    for (const auto* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) consider(*m);
  }
  finish_setup(max_w);
}

gpu_model::gpu_model(const model_config& config, const synthetic_weights& sw, const gpu_model_options& options)
    : config_(config), options_(options) {
  check_shape();
  const model_config& c = config_;
  stream up;
  uint64_t seed = sw.seed;
  auto random_matrix = [&](tensor_type type, int64_t rows, int64_t cols) {
    device_buffer b(row_bytes(type, cols) * static_cast<size_t>(rows));
    launch_random_weights(type, b.data(), rows, cols, seed++, up.handle());
    weight_bytes_ += b.bytes();
    return b;
  };
  const std::vector<float> ones(c.n_embd, 1.0f);
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  embd_type_ = output_type_ = sw.head_type;
  token_embd_ = random_matrix(sw.head_type, V, E);
  tied_ = c.tied_output;
  if (!tied_) output_ = random_matrix(sw.head_type, V, E);
  output_norm_ = upload_floats(ones, up.handle(), weight_bytes_);
  const tensor_type t = sw.weight_type;
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    layer l;
    l.attn_norm = upload_floats(ones, up.handle(), weight_bytes_);
    l.ffn_norm = upload_floats(ones, up.handle(), weight_bytes_);
    l.wq = random_matrix(t, Q, E), l.tq = t;
    l.wk = random_matrix(t, KV, E), l.tk = t;
    l.wv = random_matrix(t, KV, E), l.tv = t;
    l.wo = random_matrix(t, E, Q), l.to = t;
    l.w_gate = random_matrix(t, F, E), l.tg = t;
    l.w_up = random_matrix(t, F, E), l.tu = t;
    l.w_down = random_matrix(t, E, F), l.td = t;
    layers_.push_back(std::move(l));
  }
  up.synchronize();
  auto quant = [](tensor_type x) { return x != tensor_type::f32 && x != tensor_type::f16 && x != tensor_type::bf16; };
  size_t max_w = 0;
  if (quant(t)) max_w = static_cast<size_t>(std::max({Q * E, F * E}));
  if (quant(sw.head_type)) max_w = std::max(max_w, static_cast<size_t>(V * E));
  finish_setup(max_w);
}

void gpu_model::check_shape() {
  const model_config& c = config_;
  if (c.architecture != "llama") {
    throw std::invalid_argument("gpu_model: the CUDA backend runs the llama architecture only, not '" + c.architecture +
                                "' (run it on the CPU backend)");
  }
  if (c.head_dim % 32 != 0 || c.head_dim > 256) {
    throw std::invalid_argument("gpu_model: head size " + std::to_string(c.head_dim) +
                                " is not a multiple of 32 up to 256");
  }
  if (c.rope_scaling == rope_scaling_type::yarn) throw std::invalid_argument("gpu_model: YaRN RoPE is not supported");
  if (options_.limits.max_table_width == 0) {
    options_.limits.max_table_width = (std::max(c.n_ctx_train, 1u) + options_.block_tokens - 1) / options_.block_tokens;
  }
  sm_count_ = memory_info().sm_count;
}

void gpu_model::finish_setup(size_t max_w) {
  const model_config& c = config_;
  // Workspace for the largest step, then the KV pool from what is left.
  const model_shape shape{c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab};
  plan_ = plan_workspace(shape, options_.limits);
  work_ = device_buffer(plan_.total);
  // GEMM scratch: the largest quantized matrix as BF16, the largest activation as 16 bits.
  const size_t max_rows = std::max(options_.limits.max_tokens, options_.limits.max_logit_rows);
  gemm_ = std::make_unique<gemm_engine>(max_w, max_rows * std::max({c.n_embd, c.q_dim(), c.n_ff}));
  const size_t scratch_bytes = plan_.total + gemm_->scratch_bytes();
  const kv_geometry geo{c.n_layer, c.n_head_kv, c.head_dim, options_.block_tokens, 2};
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
  const size_t per =
      (static_cast<size_t>(n_blocks_) + 1) * config_.n_head_kv * options_.block_tokens * config_.head_dim;
  auto* base = kv_.as<uint16_t>() + size_t{2} * l * per;
  return {base, base + per, static_cast<int32_t>(config_.n_head_kv), static_cast<int32_t>(config_.head_dim),
          static_cast<int32_t>(options_.block_tokens)};
}

void gpu_model::matmul(tensor_type type, const device_buffer& w, int32_t rows, int32_t cols, const float* x,
                       int32_t n_tok, float* y, stream_handle s) {
  if (n_tok >= options_.gemm_min_tokens) {
    gemm_->matmul(type, w.data(), rows, cols, x, n_tok, y, s);
  } else {
    launch_gemv(type, w.data(), rows, cols, x, n_tok, y, s);
  }
}

void gpu_model::enqueue_copy_block(int32_t src, int32_t dst, stream_handle s) {
  if (src < 0 || dst < 0 || src >= n_blocks_ || dst >= n_blocks_)
    throw std::invalid_argument("copy_block: bad block id");
  // A block is contiguous within each layer's K and V: [n_head_kv][block_tokens][head_dim].
  const size_t block_elems = static_cast<size_t>(config_.n_head_kv) * options_.block_tokens * config_.head_dim;
  for (uint32_t l = 0; l < config_.n_layer; ++l) {
    const kv_layer kv = kv_of(l);
    for (uint16_t* base : {kv.k, kv.v}) {
      copy_on_device_async(base + static_cast<size_t>(dst) * block_elems, base + static_cast<size_t>(src) * block_elems,
                           block_elems * sizeof(uint16_t), s);
    }
  }
}

float* gpu_model::logits() const { return fbuf(plan_.logits); }
int32_t* gpu_model::sampled() const { return ibuf(plan_.sampled); }

step_rows gpu_model::enqueue_forward(const step_input& in, stream_handle s, uint32_t slot) {
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
  switch (d.action) {
    case graph_action::eager:
      enqueue_packed(ps, stage, s);
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
      cuda_graph g = cuda_graph::capture(s, [&] { enqueue_packed(ps, stage, s); });
      graphs_->store(slot, d, std::move(g)).launch(s);
      ++graph_counts_.captures;
      break;
    }
  }
  return rows;
}

void gpu_model::enqueue_packed(const packed_step& ps, const pinned_buffer& stage, stream_handle s) {
  const model_config& c = config_;
  const int32_t E = static_cast<int32_t>(c.n_embd), Q = static_cast<int32_t>(c.q_dim());
  const int32_t KV = static_cast<int32_t>(c.kv_dim()), F = static_cast<int32_t>(c.n_ff);
  const int64_t T = ps.n_tokens;
  copy_to_device_async(ibuf(plan_.tokens), stage.data(), plan_.sampled - plan_.tokens, s);

  float *x = fbuf(plan_.x), *h = fbuf(plan_.h), *q = fbuf(plan_.q), *k = fbuf(plan_.k), *v = fbuf(plan_.v);
  float *attn = fbuf(plan_.attn), *gate = fbuf(plan_.gate), *up = fbuf(plan_.up);
  const int32_t nt = static_cast<int32_t>(T);
  launch_embed_rows(embd_type_, token_embd_.data(), ibuf(plan_.tokens), nt, E, x, s);

  const float freq_scale = c.rope_scaling == rope_scaling_type::linear ? 1.0f / c.rope_scaling_factor : 1.0f;
  const auto* factors = rope_freqs_.bytes() ? rope_freqs_.as<float>() : nullptr;
  const rope_args rq{static_cast<int32_t>(c.n_head),
                     static_cast<int32_t>(c.head_dim),
                     static_cast<int32_t>(c.n_rot),
                     c.rope_freq_base,
                     freq_scale,
                     factors};
  rope_args rk = rq;
  rk.n_heads = static_cast<int32_t>(c.n_head_kv);
  const split_plan sp =
      plan_attention_splits(static_cast<uint32_t>(T * c.n_head), static_cast<uint32_t>(ps.max_keys),
                            options_.block_tokens, static_cast<uint32_t>(sm_count_), options_.limits.max_splits);
  const attention_args aa{static_cast<int32_t>(c.n_head), 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                          static_cast<int32_t>(ps.table_width), static_cast<int32_t>(sp.n_splits),
                          static_cast<int32_t>(sp.keys_per_split)};

  const uint32_t n_run = ps.n_layers > 0 ? std::min(ps.n_layers, c.n_layer) : c.n_layer;
  for (uint32_t li = 0; li < n_run; ++li) {
    const layer& w = layers_[li];
    launch_rms_norm(x, w.attn_norm.as<float>(), h, nt, E, c.rms_eps, s);
    matmul(w.tq, w.wq, Q, E, h, nt, q, s);
    matmul(w.tk, w.wk, KV, E, h, nt, k, s);
    matmul(w.tv, w.wv, KV, E, h, nt, v, s);
    launch_rope(q, ibuf(plan_.positions), nt, rq, s);
    launch_rope(k, ibuf(plan_.positions), nt, rk, s);
    const kv_layer kv = kv_of(li);
    launch_kv_store(k, v, ibuf(plan_.slots), nt, kv, s);
    launch_paged_attention(q, ibuf(plan_.positions), ibuf(plan_.row_seq), ibuf(plan_.tables), nt, kv, aa,
                           fbuf(plan_.partials), attn, s);
    matmul(w.to, w.wo, E, Q, attn, nt, h, s);
    launch_add(x, h, static_cast<size_t>(T) * E, s);

    launch_rms_norm(x, w.ffn_norm.as<float>(), h, nt, E, c.rms_eps, s);
    matmul(w.tg, w.w_gate, F, E, h, nt, gate, s);
    matmul(w.tu, w.w_up, F, E, h, nt, up, s);
    launch_swiglu(gate, up, static_cast<size_t>(T) * F, s);
    matmul(w.td, w.w_down, E, F, gate, nt, h, s);
    launch_add(x, h, static_cast<size_t>(T) * E, s);
  }

  // Output head on the rows that want logits.
  const int32_t no = static_cast<int32_t>(ps.n_rows);
  launch_gather_rows(x, ibuf(plan_.out_rows), no, E, h, s);
  launch_rms_norm(h, output_norm_.as<float>(), h, no, E, c.rms_eps, s);
  matmul(output_type_, tied_ ? token_embd_ : output_, static_cast<int32_t>(c.n_vocab), E, h, no, fbuf(plan_.logits), s);
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
