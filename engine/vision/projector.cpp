#include "engine/vision/projector.h"

#include <cmath>

#include "engine/gguf/quantize.h"

namespace tandem::vision {

namespace {

using gguf::format_error;

// What a projector file may declare (SigLIP-so400m is 1152 wide, 27 deep, 896 pixels).
constexpr uint32_t kMaxEmbd = 8192, kMaxFf = 32768, kMaxLayers = 96, kMaxImage = 4096, kMaxPatch = 64;

struct reader {
  const gguf::file& f;

  uint32_t u32(const std::string& key, uint32_t lo, uint32_t hi) const {
    const auto v = f.get_int(key);
    if (!v) throw format_error("projector file: missing " + key);
    if (*v < lo || *v > hi) {
      throw format_error("projector file: " + key + " = " + std::to_string(*v) + " is outside [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "]");
    }
    return static_cast<uint32_t>(*v);
  }

  std::array<float, 3> triple(const std::string& key, std::array<float, 3> fallback) const {
    const gguf::array_value* a = f.get_array(key);
    if (!a) return fallback;
    if (a->items.size() != 3) throw format_error("projector file: " + key + " must hold 3 numbers");
    std::array<float, 3> out{};
    for (int i = 0; i < 3; ++i) {
      const auto x = a->items[i].as_float();
      if (!x || !std::isfinite(*x)) throw format_error("projector file: " + key + " must hold 3 numbers");
      out[i] = static_cast<float>(*x);
    }
    return out;
  }

  const gguf::tensor_info& tensor(const std::string& name, std::array<int64_t, 4> ne) const {
    const gguf::tensor_info* t = f.find_tensor(name);
    if (!t) throw format_error("projector file: missing tensor " + name);
    if (t->ne != ne) {
      auto shape = [](const std::array<int64_t, 4>& s) {
        return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" + std::to_string(s[3]);
      };
      throw format_error("projector file: tensor " + name + " is " + shape(t->ne) + ", expected " + shape(ne));
    }
    return *t;
  }

  // A matrix of `rows` rows of `cols` inputs, read in place by the matmul kernels.
  kernels::weight_view mat(const std::string& name, int64_t cols, int64_t rows) const {
    const auto& t = tensor(name, {cols, rows, 1, 1});
    return {t.type, cols, rows, t.data};
  }

  std::vector<float> vec(const std::string& name, int64_t n) const {
    const auto& t = tensor(name, {n, 1, 1, 1});
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, n, out.data());
    return out;
  }
};

// A bias where the file has one (libmtmd reads these as optional), else empty.
std::vector<float> optional_vec(const reader& r, const std::string& name, int64_t n) {
  return r.f.find_tensor(name) ? r.vec(name, n) : std::vector<float>{};
}

// One encoder block's tensors (v.blk.N.*): LayerNorms and an ungated FFN (SigLIP's, Qwen2-VL's),
// or with `swiglu` Qwen2.5-VL's RMS norms (their biases optional) and gated FFN.
vit_layer read_layer(const reader& r, uint32_t il, int64_t E, int64_t F, bool swiglu) {
  const std::string b = "v.blk." + std::to_string(il) + ".";
  vit_layer L;
  L.ln1_w = r.vec(b + "ln1.weight", E);
  L.ln1_b = swiglu ? optional_vec(r, b + "ln1.bias", E) : r.vec(b + "ln1.bias", E);
  L.ln2_w = r.vec(b + "ln2.weight", E);
  L.ln2_b = swiglu ? optional_vec(r, b + "ln2.bias", E) : r.vec(b + "ln2.bias", E);
  L.q = r.mat(b + "attn_q.weight", E, E);
  L.k = r.mat(b + "attn_k.weight", E, E);
  L.v = r.mat(b + "attn_v.weight", E, E);
  L.out = r.mat(b + "attn_out.weight", E, E);
  L.q_b = r.vec(b + "attn_q.bias", E);
  L.k_b = r.vec(b + "attn_k.bias", E);
  L.v_b = r.vec(b + "attn_v.bias", E);
  L.out_b = r.vec(b + "attn_out.bias", E);
  if (swiglu) {
    L.gate = r.mat(b + "ffn_gate.weight", E, F);
    L.gate_b = r.vec(b + "ffn_gate.bias", F);
  }
  L.up = r.mat(b + "ffn_up.weight", E, F);
  L.up_b = r.vec(b + "ffn_up.bias", F);
  L.down = r.mat(b + "ffn_down.weight", F, E);
  L.down_b = r.vec(b + "ffn_down.bias", E);
  return L;
}

// Qwen2-VL's and Qwen2.5-VL's vision towers (llama.cpp's converter: two conv kernels for the
// temporal patch, fused qkv split into q, k, v, the merger's ln_q as v.post_ln, its MLP as mm.0
// and mm.2). What sets 2.5 apart is data: RMS norms, SwiGLU, window attention.
void load_qwen(vision_hparams& hp, projector& p, const reader& r, projector_family family) {
  const gguf::file& f = r.f;
  const bool v25 = family == projector_family::qwen25vl;
  hp.family = family;
  if (v25 && (f.get_bool("clip.use_silu") != true || f.get_bool("clip.use_gelu") == true)) {
    throw format_error("projector file: qwen2.5vl needs clip.use_silu (its FFN is SwiGLU)");
  }
  if (!v25 && (f.get_bool("clip.use_silu") == true || f.get_bool("clip.use_gelu") == true)) {
    // libmtmd's default activation, quick GELU, is Qwen2-VL's (its converter sets neither key)
    throw format_error("projector file: qwen2vl's FFN is quick GELU; clip.use_silu and clip.use_gelu are not supported");
  }
  hp.rms_norm = v25;
  hp.quick_gelu = !v25;
  hp.n_merge = 2;  // libmtmd's graph merges 2 x 2 whatever the file says
  if (f.get_int("clip.vision.spatial_merge_size")) r.u32("clip.vision.spatial_merge_size", 2, 2);
  if (v25) {
    hp.n_wa_pattern = r.u32("clip.vision.n_wa_pattern", 0, kMaxLayers);
  } else if (f.get_int("clip.vision.n_wa_pattern")) {
    // libmtmd would build window attention without the window layout's inputs
    r.u32("clip.vision.n_wa_pattern", 0, 0);
  }
  hp.window = 112;  // libmtmd's for Qwen2.5-VL (its window_size); the file has no key
  hp.filter = resample_filter::bicubic;
  // libmtmd's limits for Qwen-VL: 8 to 4096 tokens of (patch * 2)^2 pixels.
  const uint32_t area = (hp.patch_size * 2) * (hp.patch_size * 2);
  hp.min_pixels = 8 * area;
  hp.max_pixels = 4096 * area;
  if (hp.head_dim() % 4 || hp.head_dim() > 1024) {
    throw format_error("projector file: the head width must be a multiple of 4 (2-D rotary), at most 1024");
  }
  if (!v25) {
    // The converter writes Qwen2-VL's feed_forward_length from its config's hidden_size, the
    // language model's width (1536 for 2B), not the FFN's (5120): libmtmd reads the width
    // from the tensors, and so does Tandem.
    const gguf::tensor_info* up = f.find_tensor("v.blk.0.ffn_up.weight");
    if (!up) throw format_error("projector file: missing tensor v.blk.0.ffn_up.weight");
    if (up->ne[1] < 1 || up->ne[1] > kMaxFf) throw format_error("projector file: v.blk.0.ffn_up.weight has a bad width");
    hp.n_ff = static_cast<uint32_t>(up->ne[1]);
  }
  if (hp.n_ff == hp.n_embd) {
    // libmtmd swaps ffn_up and ffn_down of such a file (an old converter's naming), so its
    // meaning is ambiguous
    throw format_error("projector file: the FFN width equals embedding_length");
  }
  if (f.find_tensor("v.patch_embd.bias")) throw format_error("projector file: a Qwen-VL tower has no v.patch_embd.bias");
  if (f.find_tensor("v.pre_ln.weight")) throw format_error("projector file: v.pre_ln is not supported for Qwen-VL");

  const int64_t E = hp.n_embd, F = hp.n_ff, P = hp.patch_size;
  const auto& p0 = r.tensor("v.patch_embd.weight", {P, P, 3, E});
  const auto& p1 = r.tensor("v.patch_embd.weight.1", {P, P, 3, E});
  p.patch = kernels::weight_view(p0.type, 3 * P * P, E, p0.data);
  p.patch1 = kernels::weight_view(p1.type, 3 * P * P, E, p1.data);
  p.layers.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) p.layers[il] = read_layer(r, il, E, F, /*swiglu=*/v25);
  if (f.find_tensor("v.post_ln.weight")) {  // the merger's ln_q; optional, as in libmtmd
    p.post_ln_w = r.vec("v.post_ln.weight", E);
    p.post_ln_b = v25 ? optional_vec(r, "v.post_ln.bias", E) : r.vec("v.post_ln.bias", E);
  }
  // The merger: [4E] -> mm.0 -> [M] -> GELU -> mm.2 -> [T]
  // A merger matrix's output width (its row count), which the file chooses: bounded.
  const auto out_width = [&](const std::string& name) {
    const gguf::tensor_info* t = f.find_tensor(name);
    if (!t) throw format_error("projector file: missing tensor " + name);
    const int64_t w = t->ne[1];
    if (w < 1 || w > kMaxEmbd * 4) throw format_error("projector file: " + name + " has a bad width");
    return w;
  };
  const int64_t M = out_width("mm.0.weight");
  p.proj = r.mat("mm.0.weight", 4 * E, M);
  p.proj_b = r.vec("mm.0.bias", M);
  const int64_t T = out_width("mm.2.weight");
  p.proj2 = r.mat("mm.2.weight", M, T);
  p.proj2_b = r.vec("mm.2.bias", T);
  hp.merger_width = static_cast<uint32_t>(M);
  hp.n_embd_text = static_cast<uint32_t>(T);
}

}  // namespace

const char* family_name(projector_family f) {
  switch (f) {
    case projector_family::gemma3: return "gemma3";
    case projector_family::idefics3: return "idefics3";
    case projector_family::qwen2vl: return "qwen2vl";
    case projector_family::qwen25vl: return "qwen2.5vl";
  }
  return "?";
}

std::unique_ptr<projector> projector::load(const std::filesystem::path& path) {
  return from(gguf::file::open(path));
}

std::unique_ptr<projector> projector::from(gguf::file file) {
  std::unique_ptr<projector> p(new projector(std::move(file)));
  const reader r{p->file_};
  const gguf::file& f = p->file_;

  std::string type = f.get_string("clip.projector_type").value_or(f.get_string("clip.vision.projector_type").value_or(""));
  if (type.empty()) throw format_error("not a projector file: no clip.projector_type (is this the language model?)");
  if (type != "gemma3" && type != "idefics3" && type != "qwen2vl_merger" && type != "qwen2.5vl_merger") {
    throw format_error("projector type '" + type +
                       "' is not supported (supported: gemma3, idefics3, qwen2vl_merger, qwen2.5vl_merger)");
  }
  const bool gemma3 = type == "gemma3", qwen = type == "qwen2vl_merger" || type == "qwen2.5vl_merger";
  if (f.get_bool("clip.has_vision_encoder") == false) throw format_error("projector file has no vision encoder");
  if (!qwen && f.get_bool("clip.use_gelu") != true) {
    throw format_error("projector file: only GELU encoders are supported (clip.use_gelu)");
  }

  vision_hparams& hp = p->hp_;
  hp.family = gemma3 ? projector_family::gemma3 : projector_family::idefics3;
  hp.image_size = r.u32("clip.vision.image_size", 1, kMaxImage);
  hp.patch_size = r.u32("clip.vision.patch_size", 1, kMaxPatch);
  hp.n_embd = r.u32("clip.vision.embedding_length", 1, kMaxEmbd);
  hp.n_ff = r.u32("clip.vision.feed_forward_length", 1, kMaxFf);
  hp.n_layer = r.u32("clip.vision.block_count", 1, kMaxLayers);
  hp.n_head = r.u32("clip.vision.attention.head_count", 1, hp.n_embd);
  if (qwen) {
    // set below
  } else if (gemma3) {
    hp.n_merge = f.get_int("clip.vision.projector.scale_factor") ? r.u32("clip.vision.projector.scale_factor", 1, 64) : 4;
  } else {
    hp.n_merge = r.u32("clip.vision.projector.scale_factor", 2, 64);
    hp.filter = resample_filter::lanczos;  // libmtmd's choice for idefics3
    hp.longest_edge = f.get_int("clip.vision.preproc_image_size")
                          ? r.u32("clip.vision.preproc_image_size", hp.image_size, hp.image_size * 8)
                          : hp.image_size;
  }
  const auto eps = f.get_float("clip.vision.attention.layer_norm_epsilon");
  hp.eps = eps && *eps > 0 && *eps < 1 ? static_cast<float>(*eps) : 1e-6f;
  hp.mean = r.triple("clip.vision.image_mean", hp.mean);
  hp.std = r.triple("clip.vision.image_std", hp.std);
  for (const float s : hp.std) {
    if (!(s > 0)) throw format_error("projector file: clip.vision.image_std must be positive");
  }
  if (hp.n_embd % hp.n_head) throw format_error("projector file: embedding_length is not a multiple of head_count");
  if (hp.image_size % hp.patch_size) throw format_error("projector file: image_size is not a multiple of patch_size");
  if (qwen) {
    load_qwen(hp, *p, r, type == "qwen2vl_merger" ? projector_family::qwen2vl : projector_family::qwen25vl);
    return p;
  }
  if (hp.grid() % hp.n_merge) throw format_error("projector file: the patch grid is not a multiple of scale_factor");

  const int64_t E = hp.n_embd, F = hp.n_ff, P = hp.patch_size;
  // ggml's conv kernel [P][P][3][E] is, row by row, E rows of [3][P][P]: one patch's pixels.
  const auto& pt = r.tensor("v.patch_embd.weight", {P, P, 3, E});
  p->patch = kernels::weight_view(pt.type, 3 * P * P, E, pt.data);
  p->patch_b = r.vec("v.patch_embd.bias", E);
  {
    const auto& t = r.tensor("v.position_embd.weight", {E, hp.n_patches(), 1, 1});
    p->pos.resize(static_cast<size_t>(E) * hp.n_patches());
    for (uint32_t i = 0; i < hp.n_patches(); ++i) {
      dequantize_row(t.type, t.data + i * row_bytes(t.type, E), E, &p->pos[static_cast<size_t>(i) * E]);
    }
  }
  p->layers.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il) p->layers[il] = read_layer(r, il, E, F, /*swiglu=*/false);
  if (f.find_tensor("v.post_ln.weight")) {  // optional, as in libmtmd
    p->post_ln_w = r.vec("v.post_ln.weight", E);
    p->post_ln_b = r.vec("v.post_ln.bias", E);
  }
  if (!gemma3) {
    // idefics3: a plain matrix over the shuffled patches, read in place.
    const int64_t in = E * hp.n_merge * hp.n_merge;
    const gguf::tensor_info* fc = f.find_tensor("mm.model.fc.weight");
    if (!fc) throw format_error("projector file: missing tensor mm.model.fc.weight");
    const int64_t T = fc->ne[1];
    if (T < 1 || T > kMaxEmbd * 4) throw format_error("projector file: mm.model.fc.weight has a bad width");
    p->proj = r.mat("mm.model.fc.weight", in, T);
    hp.n_embd_text = static_cast<uint32_t>(T);
    return p;
  }
  p->soft_norm_w = r.vec("mm.soft_emb_norm.weight", E);

  // gemma3's projection is stored [E][n_embd_text] (ggml transposes it at use): re-laid once
  // here as n_embd_text rows of E floats for the matmul kernels.
  const gguf::tensor_info* pj = f.find_tensor("mm.input_projection.weight");
  if (!pj) throw format_error("projector file: missing tensor mm.input_projection.weight");
  const int64_t T = pj->ne[0];
  if (T < 1 || T > kMaxEmbd * 4) throw format_error("projector file: mm.input_projection.weight has a bad width");
  r.tensor("mm.input_projection.weight", {T, E, 1, 1});
  hp.n_embd_text = static_cast<uint32_t>(T);
  std::vector<float> row(static_cast<size_t>(T));
  p->proj_t_.resize(static_cast<size_t>(T) * E * sizeof(float));
  auto* dst = reinterpret_cast<float*>(p->proj_t_.data());
  for (int64_t e = 0; e < E; ++e) {
    dequantize_row(pj->type, pj->data + e * row_bytes(pj->type, T), T, row.data());
    for (int64_t t = 0; t < T; ++t) dst[t * E + e] = row[static_cast<size_t>(t)];
  }
  p->proj = kernels::weight_view(tensor_type::f32, E, T, p->proj_t_.data());
  return p;
}

}  // namespace tandem::vision
