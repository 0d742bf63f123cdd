// Synthetic encoders (bert, nomic-bert) as llama.cpp's converter writes them: the tensor
// names and keys llama.cpp's loader requires (token_embd_norm, position_embd for bert,
// token_types, attn_output_norm and layer_output_norm with biases, <arch>.attention.causal
// false, attention.layer_norm_epsilon, tokenizer.ggml.token_type_count) and a WordPiece
// vocabulary ("bert": words start with U+2581, continuations are bare).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/synthetic/synthetic_weights.h"

namespace tandem {
namespace {

// BERT's layout of specials (llama.cpp's defaults for a "bert" vocabulary): [PAD] 0,
// [unusedN] 1-99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; then every printable ASCII
// character but the upper-case letters (the vocabulary is lower-cased) as a word start and as
// a continuation, a few English words and suffixes, and unused tokens up to n_vocab.
void add_wordpiece_vocab(gguf::writer& w, uint32_t n_vocab) {
  const std::string start = "\xE2\x96\x81";  // U+2581: the word-start mark
  std::vector<std::string> tokens{"[PAD]"};
  std::vector<int32_t> types{3};
  for (int i = 1; i < 100; ++i) {
    tokens.push_back("[unused" + std::to_string(i - 1) + "]");
    types.push_back(3);
  }
  for (const char* s : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    tokens.emplace_back(s);
    types.push_back(s[1] == 'U' ? 2 : 3);
  }
  for (int c = 33; c < 127; ++c) {
    if (c >= 'A' && c <= 'Z') continue;
    tokens.push_back(start + static_cast<char>(c));
    tokens.emplace_back(1, static_cast<char>(c));
    types.insert(types.end(), {1, 1});
  }
  for (const char* word : {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world", "text",
                           "vector", "embed", "model", "search", "query", "document", "and", "of", "to", "in", "is"}) {
    tokens.push_back(start + word);
    types.push_back(1);
  }
  for (const char* suffix : {"ing", "ed", "es", "er", "ly", "dings", "ding"}) {
    tokens.emplace_back(suffix);
    types.push_back(1);
  }
  if (n_vocab < tokens.size()) {
    throw std::invalid_argument("a generated WordPiece vocabulary needs at least " + std::to_string(tokens.size()) +
                                " tokens");
  }
  for (size_t i = tokens.size(); i < n_vocab; ++i) {
    tokens.push_back("[unused" + std::to_string(i) + "]");
    types.push_back(3);
  }
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.token_type", gguf::value_type::int32, types);
  w.set_u32("tokenizer.ggml.token_type_count", 2);
  w.set_u32("tokenizer.ggml.bos_token_id", 101);
  w.set_u32("tokenizer.ggml.cls_token_id", 101);
  w.set_u32("tokenizer.ggml.seperator_token_id", 102);  // llama.cpp's spelling
  w.set_u32("tokenizer.ggml.unknown_token_id", 100);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_u32("tokenizer.ggml.mask_token_id", 103);
}

}  // namespace

gguf::writer make_synthetic_encoder(const synthetic_model_spec& s, const architecture_traits& arch,
                                    const gguf::file* vocab_from) {
  if (s.n_expert > 0) throw std::invalid_argument(s.architecture + " has no mixture of experts");
  const uint32_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * head_dim;
  const int64_t kv_dim = static_cast<int64_t>(s.n_head_kv) * head_dim;
  if (q_dim != s.n_embd) throw std::invalid_argument(s.architecture + " needs heads * head size = n_embd");
  for (auto [t, cols] : {std::pair{s.weight_type, int64_t{s.n_embd}}, std::pair{s.weight_type, int64_t{s.n_ff}},
                         std::pair{s.embd_type, int64_t{s.n_embd}}}) {
    if (cols % traits_of(t).block_size != 0) {
      throw std::invalid_argument("row width " + std::to_string(cols) + " is not a multiple of the " +
                                  std::string(traits_of(t).name) + " block size");
    }
  }
  const bool bert = arch.position_embeddings;  // bert: positions, biases, ungated GELU; nomic-bert: RoPE, SwiGLU
  gguf::writer w;
  const std::string p = s.architecture + ".";
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.name", s.name);
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "context_length", s.n_ctx);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "feed_forward_length", s.n_ff);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  w.set_f32(p + "attention.layer_norm_epsilon", 1e-12f);
  w.set_bool(p + "attention.causal", false);
  if (!bert) {
    w.set_f32(p + "rope.freq_base", s.rope_freq_base);
    w.set_u32(p + "rope.dimension_count", head_dim);
  }
  if (s.pooling_type >= 0) w.set_u32(p + "pooling_type", static_cast<uint32_t>(s.pooling_type));
  uint32_t n_vocab = s.n_vocab;
  if (vocab_from != nullptr) {
    for (const auto& [key, v] : vocab_from->metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, v);
    }
    const auto* tokens = vocab_from->get_array("tokenizer.ggml.tokens");
    if (tokens == nullptr) throw std::invalid_argument("the vocabulary source has no tokenizer.ggml.tokens");
    n_vocab = static_cast<uint32_t>(tokens->items.size());
    if (!vocab_from->get_int("tokenizer.ggml.token_type_count")) w.set_u32("tokenizer.ggml.token_type_count", 2);
  } else {
    add_wordpiece_vocab(w, n_vocab);
  }
  w.set_u32(p + "vocab_size", n_vocab);

  weight_maker m(s.seed);
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const float ff_scale = 1.0f / std::sqrt(static_cast<float>(s.n_ff));
  auto add_matrix = [&](const std::string& name, tensor_type t, int64_t cols, int64_t rows, float scale) {
    w.add_tensor(name, t, {cols, rows}, m.matrix(t, cols, rows, scale));
  };
  auto add_f32 = [&](const std::string& name, int64_t n, float lo, float hi) {
    w.add_tensor(name, tensor_type::f32, {n}, m.norm(n, lo, hi));
  };
  auto add_layer_norm = [&](const std::string& name) {
    add_f32(name + ".weight", s.n_embd, 0.8f, 1.2f);
    add_f32(name + ".bias", s.n_embd, -0.1f, 0.1f);
  };
  add_matrix("token_embd.weight", s.embd_type, s.n_embd, n_vocab, 1.0f);
  w.add_tensor("token_types.weight", tensor_type::f32, {s.n_embd, 2}, m.norm(2 * int64_t{s.n_embd}, -0.5f, 0.5f));
  if (bert) {
    w.add_tensor("position_embd.weight", tensor_type::f32, {s.n_embd, s.n_ctx},
                 m.norm(int64_t{s.n_embd} * s.n_ctx, -0.5f, 0.5f));
  }
  add_layer_norm("token_embd_norm");
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (bert) {
      add_matrix(b + "attn_q.weight", s.weight_type, s.n_embd, q_dim, in_scale);
      add_f32(b + "attn_q.bias", q_dim, -0.2f, 0.2f);
      add_matrix(b + "attn_k.weight", s.weight_type, s.n_embd, kv_dim, in_scale);
      add_f32(b + "attn_k.bias", kv_dim, -0.2f, 0.2f);
      add_matrix(b + "attn_v.weight", s.weight_type, s.n_embd, kv_dim, in_scale);
      add_f32(b + "attn_v.bias", kv_dim, -0.2f, 0.2f);
    } else {
      add_matrix(b + "attn_qkv.weight", s.weight_type, s.n_embd, q_dim + 2 * kv_dim, in_scale);
    }
    add_matrix(b + "attn_output.weight", s.weight_type, q_dim, s.n_embd, in_scale);
    if (bert) add_f32(b + "attn_output.bias", s.n_embd, -0.2f, 0.2f);
    add_layer_norm(b + "attn_output_norm");
    add_matrix(b + "ffn_up.weight", s.weight_type, s.n_embd, s.n_ff, in_scale);
    if (bert) add_f32(b + "ffn_up.bias", s.n_ff, -0.2f, 0.2f);
    if (!bert) add_matrix(b + "ffn_gate.weight", s.weight_type, s.n_embd, s.n_ff, in_scale);
    add_matrix(b + "ffn_down.weight", s.weight_type, s.n_ff, s.n_embd, ff_scale);
    if (bert) add_f32(b + "ffn_down.bias", s.n_embd, -0.2f, 0.2f);
    add_layer_norm(b + "layer_output_norm");
  }
  return w;
}

}  // namespace tandem
