// The vision encoder's forward pass: an image, preprocessed as the projector's family wants,
// in; one embedding per image token, in the language model's width, out. Plain C++ over the
// engine's matmul kernels and thread pool (no actors): the vision room's caller decides
// where it runs (off the scheduler's step loop).
//
//   preprocess(img)  [3][S][S] floats      (S = image_size: resized, padded, normalized)
//   encode(pixels)   [n_tokens][n_embd_text]
//
// The pass, shapes on every buffer (N = patches, E = ViT width, F = FFN width, D = head width):
//   X [N][3*P*P]  patches, each [c][y][x]    H = X·patchᵀ + bias + pos   [N][E]
//   per layer:  A = LN1(H); Q,K,V = A·Wᵀ + b [N][E]; per head softmax(Q_h K_hᵀ/√D) V_h -> O [N][E]
//               H += O·outᵀ + b;  H += GELU(LN2(H)·upᵀ + b) [N][F] · downᵀ + b
//   H = post_LN(H)
//   gemma3:   mean over n_merge x n_merge patches -> [n_tokens][E]; RMS norm x soft_emb_norm;
//             x projᵀ -> [n_tokens][n_embd_text]
//   idefics3: each n_merge x n_merge patches concatenated, row by row -> [n_tokens][E n_merge²];
//             x fcᵀ -> [n_tokens][n_embd_text]
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/dot_kernels.h"
#include "engine/platform/thread_pool.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/projector.h"

namespace tandem::vision {

// An image as the encoder takes it: tiles of [3][S][S] floats, each encoded on its own.
//   gemma3:   one tile (the image fitted inside S x S, padded black)
//   idefics3: the whole image resized to one tile first, then grid_y rows of grid_x tiles cut
//             from it resized to the longest edge (libmtmd's order)
struct image_tiles {
  std::vector<std::vector<float>> tiles;
  uint32_t grid_x = 0, grid_y = 0;  // idefics3's slices; 0 for gemma3
};
image_tiles preprocess_tiles(const projector& p, const rgb_image& img);

// The first tile alone (all of gemma3's input).
std::vector<float> preprocess(const projector& p, const rgb_image& img);

// One tile: [n_tokens][n_embd_text]; `pixels` as preprocess_tiles() gives them.
std::vector<float> encode(const projector& p, const std::vector<float>& pixels, thread_pool& pool,
                          const kernels::dot_kernels& kernels = kernels::best_dot_kernels());

}  // namespace tandem::vision
