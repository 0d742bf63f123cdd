// Synthetic projector files of real shapes (`tandem gen-model --mmproj`, tests): random
// weights under the keys and tensor names llama.cpp's libmtmd reads, so both load the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/tensor_type.h"

namespace tandem::vision {

struct synthetic_projector_spec {
  // "gemma3", "idefics3" (SmolVLM's: set the shapes below to its own), "qwen2vl" or
  // "qwen2.5vl" (qwen2vl_shape() and qwen25vl_shape() set theirs)
  std::string family = "gemma3";
  // gemma3's SigLIP-so400m by default (Gemma 3 4B's projector: 2560-wide language model).
  uint32_t image_size = 896, patch_size = 14;
  uint32_t n_embd = 1152, n_ff = 4304, n_layer = 27, n_head = 16;
  uint32_t n_merge = 4;
  uint32_t longest_edge = 0;  // idefics3: clip.vision.preproc_image_size (0: not written)
  uint32_t n_embd_text = 2560;
  uint32_t n_wa_pattern = 8;  // qwen2.5vl: every 8th layer attends to the whole image
  // The projection's weights times this: below 1, image rows small beside the text's, so a
  // small language model's reply stays text-like (fidelity tests compare continuations).
  float output_scale = 1.0f;
  tensor_type type = tensor_type::f16;  // the matrices (vectors are f32, as convert_hf_to_gguf writes them)
  uint64_t seed = 1;
};

// Qwen2.5-VL's vision tower (3B and 7B alike: 1280 wide, 32 layers of 16 heads, FFN 3420,
// full attention every 8th layer, the image_size key 560) mapping to n_embd_text (3B: 2048,
// 7B: 3584).
void qwen25vl_shape(synthetic_projector_spec& s, uint32_t n_embd_text = 2048);

// Qwen2-VL's vision tower (2B and 7B alike: 1280 wide, 32 layers of 16 heads, FFN 5120, every
// layer attending to the whole image) mapping to n_embd_text (2B: 1536, 7B: 3584).
void qwen2vl_shape(synthetic_projector_spec& s, uint32_t n_embd_text = 1536);

gguf::writer make_projector(const synthetic_projector_spec& spec);
void write_projector(const synthetic_projector_spec& spec, const std::filesystem::path& path);

}  // namespace tandem::vision
