// A vision projector file (llama.cpp's "mmproj" GGUF, `clip.*` keys): the ViT image encoder
// and the projector that maps its patches into the language model's embedding space.
//
// Families (clip.projector_type), the data that sets them apart:
//   gemma3    SigLIP at a fixed resolution (896: 64x64 patches of 14), mean-pooled n_merge x
//             n_merge (4: 256 tokens), RMS-normed, projected by mm.input_projection.
//   idefics3  (SmolVLM) SigLIP on tiles of image_size (512: 32x32 patches of 16): the image
//             resized so its longer side is preproc_image_size, cut into tiles, plus the whole
//             image as one tile first; each tile's patches pixel-shuffled n_merge x n_merge
//             into one token (4: 64 tokens) and projected by mm.model.fc.
//   qwen25vl  (Qwen2.5-VL, clip.projector_type "qwen2.5vl_merger") a ViT at the image's own
//             resolution (resized to multiples of 2 patches, within min/max pixels): two patch
//             kernels summed, 2-D rotary positions, RMS norms, SwiGLU FFNs, window attention
//             (windows of `window` pixels) on all layers but every n_wa_pattern-th; each 2x2
//             patches concatenated and through mm.0, GELU, mm.2.
//   qwen2vl   (Qwen2-VL, "qwen2vl_merger") the same tower and merger with LayerNorms, a quick-
//             GELU FFN without a gate, and every layer attending to the whole image.
// The weights stay in the mapped file; 2-D ones are read by the engine's matmul kernels in
// their stored type (f32, f16, bf16 or a quantized type), 1-D ones are copied as floats.
// Every dimension the file declares is bounded and every tensor's shape checked on load, so
// a hostile file is a clear error, never an allocation it chose.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kernels/matmul.h"
#include "engine/vision/resample.h"

namespace tandem::vision {

enum class projector_family { gemma3, idefics3, qwen2vl, qwen25vl };
const char* family_name(projector_family f);

// Qwen2-VL's and Qwen2.5-VL's: an image at its own size (a grid of merged tokens, not fixed
// tiles), placed in the language model by multimodal RoPE.
constexpr bool qwen_family(projector_family f) {
  return f == projector_family::qwen2vl || f == projector_family::qwen25vl;
}

struct vision_hparams {
  projector_family family = projector_family::gemma3;
  uint32_t image_size = 0;  // the encoder's input side, pixels
  uint32_t patch_size = 0;
  uint32_t n_embd = 0;      // ViT width
  uint32_t n_ff = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_merge = 1;     // patches per side merged into one token (gemma3 pools, idefics3 shuffles)
  uint32_t longest_edge = 0;  // idefics3: the resized image's longer side (clip.vision.preproc_image_size)
  uint32_t n_embd_text = 0; // the language model's width (projector output)
  // qwen_family: the image's own size, resized to multiples of patch * n_merge whose area
  // lies in [min_pixels, max_pixels] (libmtmd's: 8 to 4096 tokens, whatever the file says);
  // window attention in windows of `window` pixels on every layer il with
  // (il + 1) % n_wa_pattern != 0 (0: none, as in qwen2vl); qwen25vl's norms are RMS norms.
  uint32_t min_pixels = 0, max_pixels = 0;
  uint32_t n_wa_pattern = 0;
  uint32_t window = 0;
  uint32_t merger_width = 0;  // mm.0's output width
  bool rms_norm = false;
  bool quick_gelu = false;    // an ungated FFN's activation: x·σ(1.702x) (qwen2vl), else GELU (tanh)
  float eps = 1e-6f;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  resample_filter filter = resample_filter::bilinear;

  // The fixed-size families' input (qwen_family's varies with the image: vision_encoder.h).
  uint32_t grid() const { return image_size / patch_size; }  // patches per side
  uint32_t n_patches() const { return grid() * grid(); }
  uint32_t n_tokens() const { return n_patches() / (n_merge * n_merge); }  // image tokens out (per tile)
  uint32_t head_dim() const { return n_embd / n_head; }
};

// One encoder block. The norms are LayerNorms, or RMS norms where hparams.rms_norm (their
// biases then may be empty); the FFN is GELU(up) (quick GELU where hparams.quick_gelu), or
// SiLU(gate) * up where `gate` has data (SwiGLU).
struct vit_layer {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;                   // [n_embd]; _b may be empty
  kernels::weight_view q, k, v, out;                               // [n_embd] -> [n_embd]
  std::vector<float> q_b, k_b, v_b, out_b;                         // [n_embd]
  kernels::weight_view gate, up, down;                             // [n_embd] -> [n_ff] -> [n_embd]
  std::vector<float> gate_b, up_b, down_b;                         // [n_ff], [n_ff], [n_embd]
};

class projector {
 public:
  // Throws gguf::format_error naming the key or tensor that is missing, out of bounds or of
  // the wrong shape.
  static std::unique_ptr<projector> load(const std::filesystem::path& path);
  static std::unique_ptr<projector> from(gguf::file file);

  const vision_hparams& hparams() const { return hp_; }

  // Weights (GGUF orientation: rows of `cols` inputs).
  kernels::weight_view patch;           // [n_embd] rows of [3][patch][patch]
  kernels::weight_view patch1;          // qwen_family: the second kernel, summed with the first
  std::vector<float> patch_b;           // [n_embd]; qwen_family: empty
  std::vector<float> pos;               // [n_patches][n_embd]; qwen_family: empty (rotary)
  std::vector<vit_layer> layers;
  std::vector<float> post_ln_w, post_ln_b;  // [n_embd]; empty: no final norm
  std::vector<float> soft_norm_w;           // gemma3: [n_embd]
  kernels::weight_view proj;                // [n_embd_text] rows of [n_embd] (gemma3) or
                                            // [n_embd * n_merge^2] (idefics3); qwen_family:
                                            // mm.0, [merger_width] rows of [n_embd * 4]
  std::vector<float> proj_b;                // qwen_family: [merger_width]
  kernels::weight_view proj2;               // qwen_family: mm.2, [n_embd_text] rows of [merger_width]
  std::vector<float> proj2_b;               // qwen_family: [n_embd_text]

 private:
  explicit projector(gguf::file f) : file_(std::move(f)) {}
  gguf::file file_;
  vision_hparams hp_;
  std::vector<std::byte> proj_t_;  // gemma3's projection, transposed to rows of n_embd inputs
};

}  // namespace tandem::vision
