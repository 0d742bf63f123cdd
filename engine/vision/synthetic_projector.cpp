#include "engine/vision/synthetic_projector.h"

#include <cmath>
#include <stdexcept>

#include "engine/synthetic/synthetic_weights.h"

namespace tandem::vision {

void qwen25vl_shape(synthetic_projector_spec& s, uint32_t n_embd_text) {
  s.family = "qwen2.5vl";
  s.image_size = 560;
  s.patch_size = 14;
  s.n_embd = 1280;
  s.n_ff = 3420;
  s.n_layer = 32;
  s.n_head = 16;
  s.n_merge = 2;
  s.n_wa_pattern = 8;
  s.n_embd_text = n_embd_text;
}

void qwen2vl_shape(synthetic_projector_spec& s, uint32_t n_embd_text) {
  qwen25vl_shape(s, n_embd_text);
  s.family = "qwen2vl";
  s.n_ff = 5120;
  s.n_wa_pattern = 0;
}

namespace {

// Qwen-VL's tensors as llama.cpp's converter writes them: the Conv3D patch kernel split in
// two 2-D kernels, q/k/v/out with biases, the merger's ln_q as v.post_ln, its MLP as mm.0
// (4E -> 4E) and mm.2 (4E -> text width). Qwen2.5-VL: RMS norms without biases, SwiGLU FFNs
// with biases; Qwen2-VL: LayerNorms and fc1/fc2 (ffn_up, ffn_down) with biases.
void add_qwen(gguf::writer& w, const synthetic_projector_spec& s, weight_maker& m) {
  const bool v25 = s.family == "qwen2.5vl";
  const int64_t E = s.n_embd, F = s.n_ff, P = s.patch_size, M = 4 * E, T = s.n_embd_text;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(E));
  auto vec = [&](const std::string& name, int64_t n, float lo, float hi) {
    w.add_tensor(name, tensor_type::f32, {n}, m.norm(n, lo, hi));
  };
  auto mat = [&](const std::string& name, int64_t cols, int64_t rows, float scale) {
    w.add_tensor(name, s.type, {cols, rows}, m.matrix(s.type, cols, rows, scale));
  };
  for (const char* name : {"v.patch_embd.weight", "v.patch_embd.weight.1"}) {
    w.add_tensor(name, s.type, {P, P, 3, E}, m.matrix(s.type, 3 * P * P, E, 1.0f / std::sqrt(6.0f * P * P)));
  }
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    vec(b + "ln1.weight", E, 0.8f, 1.2f);
    if (!v25) vec(b + "ln1.bias", E, -0.1f, 0.1f);
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      mat(b + t + ".weight", E, E, in_scale);
      vec(b + t + ".bias", E, -0.1f, 0.1f);
    }
    vec(b + "ln2.weight", E, 0.8f, 1.2f);
    if (!v25) vec(b + "ln2.bias", E, -0.1f, 0.1f);
    for (const std::string t : {"ffn_gate", "ffn_up"}) {
      if (t == "ffn_gate" && !v25) continue;  // Qwen2-VL's FFN has no gate
      mat(b + t + ".weight", E, F, in_scale);
      vec(b + t + ".bias", F, -0.1f, 0.1f);
    }
    mat(b + "ffn_down.weight", F, E, 1.0f / std::sqrt(static_cast<float>(F)));
    vec(b + "ffn_down.bias", E, -0.1f, 0.1f);
  }
  vec("v.post_ln.weight", E, 0.8f, 1.2f);
  if (!v25) vec("v.post_ln.bias", E, -0.1f, 0.1f);
  mat("mm.0.weight", M, M, 1.0f / std::sqrt(static_cast<float>(M)));
  vec("mm.0.bias", M, -0.1f, 0.1f);
  mat("mm.2.weight", M, T, s.output_scale / std::sqrt(static_cast<float>(M)));
  vec("mm.2.bias", T, -0.1f * s.output_scale, 0.1f * s.output_scale);
}

}  // namespace

gguf::writer make_projector(const synthetic_projector_spec& s) {
  gguf::writer w;
  w.set_string("general.architecture", "clip");
  const bool gemma3 = s.family == "gemma3", qwen2 = s.family == "qwen2vl", qwen = qwen2 || s.family == "qwen2.5vl";
  if (!gemma3 && !qwen && s.family != "idefics3") throw std::invalid_argument("no projector family " + s.family);
  w.set_string("general.name", "synthetic " + s.family + " projector");
  w.set_string("clip.projector_type", qwen ? s.family + "_merger" : s.family);
  w.set_bool("clip.has_vision_encoder", true);
  w.set_bool("clip.has_text_encoder", false);
  if (!qwen2) w.set_bool(qwen ? "clip.use_silu" : "clip.use_gelu", true);  // qwen2vl: neither (quick GELU)
  w.set_u32("clip.vision.image_size", s.image_size);
  w.set_u32("clip.vision.patch_size", s.patch_size);
  w.set_u32("clip.vision.embedding_length", s.n_embd);
  // llama.cpp's converter writes Qwen2-VL's from its config's hidden_size: the language
  // model's width, not the FFN's. So does this, as the loaders must read the tensors.
  w.set_u32("clip.vision.feed_forward_length", qwen2 ? s.n_embd_text : s.n_ff);
  w.set_u32("clip.vision.block_count", s.n_layer);
  w.set_u32("clip.vision.attention.head_count", s.n_head);
  w.set_u32("clip.vision.projection_dim", s.n_embd_text);
  w.set_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  if (qwen) {
    if (!qwen2) w.set_u32("clip.vision.n_wa_pattern", s.n_wa_pattern);
    // CLIP's mean and std, as Qwen-VL's preprocessor_config has them
    w.set_array("clip.vision.image_mean", gguf::value_type::float32,
                std::vector<float>{0.48145466f, 0.4578275f, 0.40821073f});
    w.set_array("clip.vision.image_std", gguf::value_type::float32,
                std::vector<float>{0.26862954f, 0.26130258f, 0.27577711f});
    weight_maker m(s.seed);
    add_qwen(w, s, m);
    return w;
  }
  if (s.n_merge != 4 || !gemma3) w.set_u32("clip.vision.projector.scale_factor", s.n_merge);
  if (!gemma3 && s.longest_edge) w.set_u32("clip.vision.preproc_image_size", s.longest_edge);
  w.set_array("clip.vision.image_mean", gguf::value_type::float32, std::vector<float>{0.5f, 0.5f, 0.5f});
  w.set_array("clip.vision.image_std", gguf::value_type::float32, std::vector<float>{0.5f, 0.5f, 0.5f});

  weight_maker m(s.seed);
  const int64_t E = s.n_embd, F = s.n_ff, P = s.patch_size, G = s.image_size / s.patch_size;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(E));
  auto vec = [&](const std::string& name, int64_t n, float lo, float hi) {
    w.add_tensor(name, tensor_type::f32, {n}, m.norm(n, lo, hi));
  };
  w.add_tensor("v.patch_embd.weight", s.type, {P, P, 3, E}, m.matrix(s.type, 3 * P * P, E, 1.0f / std::sqrt(3.0f * P * P)));
  vec("v.patch_embd.bias", E, -0.1f, 0.1f);
  w.add_tensor("v.position_embd.weight", tensor_type::f32, {E, G * G}, m.matrix(tensor_type::f32, E, G * G, 0.5f));
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    vec(b + "ln1.weight", E, 0.8f, 1.2f);
    vec(b + "ln1.bias", E, -0.1f, 0.1f);
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      w.add_tensor(b + t + ".weight", s.type, {E, E}, m.matrix(s.type, E, E, in_scale));
      vec(b + t + ".bias", E, -0.1f, 0.1f);
    }
    vec(b + "ln2.weight", E, 0.8f, 1.2f);
    vec(b + "ln2.bias", E, -0.1f, 0.1f);
    w.add_tensor(b + "ffn_up.weight", s.type, {E, F}, m.matrix(s.type, E, F, in_scale));
    vec(b + "ffn_up.bias", F, -0.1f, 0.1f);
    w.add_tensor(b + "ffn_down.weight", s.type, {F, E}, m.matrix(s.type, F, E, 1.0f / std::sqrt(static_cast<float>(F))));
    vec(b + "ffn_down.bias", E, -0.1f, 0.1f);
  }
  vec("v.post_ln.weight", E, 0.8f, 1.2f);
  vec("v.post_ln.bias", E, -0.1f, 0.1f);
  if (!gemma3) {  // idefics3: [n_embd_text] rows over the n_merge^2 shuffled patches
    const int64_t in = E * s.n_merge * s.n_merge;
    w.add_tensor("mm.model.fc.weight", s.type, {in, static_cast<int64_t>(s.n_embd_text)},
                 m.matrix(s.type, in, s.n_embd_text, s.output_scale / std::sqrt(static_cast<float>(in))));
    return w;
  }
  vec("mm.soft_emb_norm.weight", E, 0.8f, 1.2f);
  // Stored [E][n_embd_text] (ne0 = text width), as ggml multiplies by its transpose.
  w.add_tensor("mm.input_projection.weight", s.type, {static_cast<int64_t>(s.n_embd_text), E},
               m.matrix(s.type, s.n_embd_text, E, s.output_scale * in_scale));
  return w;
}

void write_projector(const synthetic_projector_spec& spec, const std::filesystem::path& path) {
  make_projector(spec).write(path);
}

}  // namespace tandem::vision
