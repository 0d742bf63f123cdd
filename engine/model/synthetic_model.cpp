#include "engine/model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/gguf/quantize.h"

namespace tandem {
namespace {

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest are moved to
// code points 256 and up, so every byte has a visible single-character token.
std::string byte_token(uint8_t b) {
  uint32_t cp;
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) {
    cp = b;
  } else {
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A small byte-level BPE vocabulary: 256 byte tokens, ChatML control tokens, then merges of
// frequent English letter pairs (and space + letter) until n_vocab tokens exist.
void add_generated_vocab(gguf::writer& w, uint32_t n_vocab) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};  // control
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(static_cast<uint8_t>(b)));
    types.push_back(1);  // normal
  }
  if (n_vocab < tokens.size()) {
    throw std::invalid_argument("a generated vocabulary needs at least " + std::to_string(tokens.size()) + " tokens");
  }
  std::vector<std::string> merges;
  const std::string space = byte_token(' ');
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (size_t i = 0; tokens.size() < n_vocab; ++i) {
    const size_t pair = i;  // enumerate (space|letter) x letter pairs in frequency-ish order
    const size_t first = pair / letters.size(), second = pair % letters.size();
    if (first > letters.size()) break;
    const std::string a = first == 0 ? space : std::string(1, letters[first - 1]);
    const std::string b(1, letters[second]);
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  while (tokens.size() < n_vocab) {  // pad with unused tokens
    tokens.push_back("<unused" + std::to_string(tokens.size()) + ">");
    types.push_back(5);
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.token_type", gguf::value_type::int32, types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string(
      "tokenizer.chat_template",
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
}

class weight_maker {
 public:
  explicit weight_maker(uint64_t seed) : rng_(seed) {}

  // Row-major [rows][cols] matrix, entries uniform with the variance of N(0, scale^2).
  std::vector<std::byte> matrix(tensor_type type, int64_t cols, int64_t rows, float scale) {
    std::uniform_real_distribution<float> u(-scale * std::sqrt(3.0f), scale * std::sqrt(3.0f));
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<std::byte> out(row_bytes(type, cols) * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = u(rng_);
      quantize_row(type, row.data(), cols, out.data() + static_cast<size_t>(r) * row_bytes(type, cols));
    }
    return out;
  }

  // F32 norm weights near 1.
  std::vector<std::byte> norm(int64_t n) {
    std::uniform_real_distribution<float> u(0.8f, 1.2f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(rng_);
    std::vector<std::byte> out(v.size() * 4);
    quantize_row(tensor_type::f32, v.data(), n, out.data());
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

void check_row(tensor_type type, int64_t cols, const char* what) {
  if (cols % traits_of(type).block_size != 0) {
    throw std::invalid_argument(std::string(what) + " width " + std::to_string(cols) + " is not a multiple of the " +
                                std::string(traits_of(type).name) + " block size");
  }
}

// Every matrix's type by name: the spec's three types, or its file type's mixture rule.
std::map<std::string, tensor_type> tensor_types(const synthetic_model_spec& s, int64_t q_dim) {
  std::vector<gguf::tensor_desc> descs;
  auto add = [&](std::string name, int64_t cols, tensor_type t) { descs.push_back({std::move(name), 2, cols, t}); };
  add("token_embd.weight", s.n_embd, s.embd_type);
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"})
      add(b + n + ".weight", s.n_embd, s.weight_type);
    add(b + "attn_output.weight", q_dim, s.weight_type);
    add(b + "ffn_down.weight", s.n_ff, s.weight_type);
  }
  if (!s.tied_output) add("output.weight", s.n_embd, s.output_type);
  std::map<std::string, tensor_type> out;
  if (!s.file_type) {
    for (const auto& d : descs) out[d.name] = d.type;
    return out;
  }
  std::sort(descs.begin(), descs.end(),
            [](const auto& a, const auto& b) { return gguf::llama_tensor_order(a.name, b.name); });
  const auto types = gguf::plan_tensor_types(*s.file_type, descs, {s.n_layer, s.n_head, s.n_head_kv});
  for (size_t i = 0; i < descs.size(); ++i) out[descs[i].name] = types[i];
  return out;
}

}  // namespace

gguf::writer make_synthetic_model(const synthetic_model_spec& s, const gguf::file* vocab_from) {
  if (s.n_layer == 0 || s.n_embd == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0) {
    throw std::invalid_argument("every shape must be positive");
  }
  if (s.n_embd % s.n_head != 0) throw std::invalid_argument("n_embd must be a multiple of n_head");
  if (s.n_head % s.n_head_kv != 0) throw std::invalid_argument("n_head must be a multiple of n_head_kv");
  const uint32_t head_dim = s.n_embd / s.n_head;
  if (head_dim % 2 != 0) throw std::invalid_argument("head size must be even (RoPE rotates pairs)");
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * head_dim;
  const int64_t kv_dim = static_cast<int64_t>(s.n_head_kv) * head_dim;
  const auto type_of = tensor_types(s, q_dim);
  for (const auto& [name, type] : type_of) {
    const bool down = name.find("ffn_down") != std::string::npos, out = name.find("attn_output") != std::string::npos;
    check_row(type, down ? s.n_ff : out ? q_dim : s.n_embd, down ? "FFN" : "embedding");
  }

  gguf::writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", s.name);
  w.set_u32("llama.block_count", s.n_layer);
  w.set_u32("llama.context_length", s.n_ctx);
  w.set_u32("llama.embedding_length", s.n_embd);
  w.set_u32("llama.feed_forward_length", s.n_ff);
  w.set_u32("llama.attention.head_count", s.n_head);
  w.set_u32("llama.attention.head_count_kv", s.n_head_kv);
  w.set_f32("llama.rope.freq_base", s.rope_freq_base);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32("llama.rope.dimension_count", head_dim);

  uint32_t n_vocab = s.n_vocab;
  if (vocab_from != nullptr) {
    for (const auto& [key, v] : vocab_from->metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, v);
    }
    const auto* tokens = vocab_from->get_array("tokenizer.ggml.tokens");
    if (tokens == nullptr) throw std::invalid_argument("the vocabulary source has no tokenizer.ggml.tokens");
    n_vocab = static_cast<uint32_t>(tokens->items.size());
  } else {
    add_generated_vocab(w, n_vocab);
  }
  w.set_u32("llama.vocab_size", n_vocab);

  const std::optional<gguf::file_type> ft = s.file_type ? s.file_type : [&]() -> std::optional<gguf::file_type> {
    for (const auto& f : gguf::file_types()) {
      if (f.default_type == s.weight_type && f.name == traits_of(s.weight_type).name) return f;
    }
    return std::nullopt;
  }();
  if (ft) w.set_u32("general.file_type", static_cast<uint32_t>(ft->id));

  weight_maker m(s.seed);
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const float ff_scale = 1.0f / std::sqrt(static_cast<float>(s.n_ff));
  auto add_matrix = [&](const std::string& name, int64_t cols, int64_t rows, float scale) {
    const tensor_type t = type_of.at(name);
    w.add_tensor(name, t, {cols, rows}, m.matrix(t, cols, rows, scale));
  };
  add_matrix("token_embd.weight", s.n_embd, n_vocab, 1.0f);
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.add_tensor(b + "attn_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
    add_matrix(b + "attn_q.weight", s.n_embd, q_dim, in_scale);
    add_matrix(b + "attn_k.weight", s.n_embd, kv_dim, in_scale);
    add_matrix(b + "attn_v.weight", s.n_embd, kv_dim, in_scale);
    add_matrix(b + "attn_output.weight", q_dim, s.n_embd, 1.0f / std::sqrt(static_cast<float>(q_dim)));
    w.add_tensor(b + "ffn_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
    add_matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff, in_scale);
    add_matrix(b + "ffn_up.weight", s.n_embd, s.n_ff, in_scale);
    add_matrix(b + "ffn_down.weight", s.n_ff, s.n_embd, ff_scale);
  }
  w.add_tensor("output_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
  if (!s.tied_output) {
    add_matrix("output.weight", s.n_embd, n_vocab, in_scale);
  }
  return w;
}

}  // namespace tandem
