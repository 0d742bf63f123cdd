// The vision encoder's forward pass: an image, preprocessed as the projector's family wants,
// in; one embedding per image token, in the language model's width, out. Plain C++ over the
// engine's matmul kernels and thread pool (no actors): the vision room's caller decides
// where it runs (off the scheduler's step loop).
//
//   preprocess(img)  [3][S][S] floats      (S = image_size: resized, padded, normalized;
//                                           Qwen-VL: [3][h][w], the image's own size)
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
//   Qwen-VL:  (qwen_vit.h) H = X·patchᵀ + X·patch1ᵀ, no bias, no learned positions, patches in
//             window order; the blocks with 2-D rotary Q and K; qwen25vl: RMS norms, attention
//             within windows (all layers but every n_wa_pattern-th), SiLU(A·gateᵀ + b) *
//             (A·upᵀ + b); qwen2vl: LayerNorms, every layer whole, quick GELU(A·upᵀ + b);
//             post norm; each 2x2 patches [N/4][4E] x mm.0ᵀ + b, GELU, x mm.2ᵀ + b ->
//             [N/4][n_embd_text], back in raster order of the merged grid
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/kernels/dot_kernels.h"
#include "engine/platform/thread_pool.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/projector.h"

namespace tandem::vision {

// One tile of an image: [3][height][width] floats, normalized.
struct image_tile {
  std::vector<float> pixels;
  uint32_t width = 0, height = 0;
};

// An image as the encoder takes it: tiles, each encoded on its own.
//   gemma3:   one tile of S x S (the image fitted inside, padded black)
//   idefics3: the whole image resized to one S x S tile first, then grid_y rows of grid_x
//             tiles cut from it resized to the longest edge (libmtmd's order)
//   Qwen-VL: one tile of the resized image's size, which encodes to grid_y rows of grid_x
//             merged tokens (width / (patch * 2) by height / (patch * 2)), in raster order
struct image_tiles {
  std::vector<image_tile> tiles;
  uint32_t grid_x = 0, grid_y = 0;  // idefics3's slices, Qwen-VL's merged tokens; 0 for gemma3
};
image_tiles preprocess_tiles(const projector& p, const rgb_image& img);

// The first tile alone (all of gemma3's input).
std::vector<float> preprocess(const projector& p, const rgb_image& img);

// One tile: [n_tokens][n_embd_text] (Qwen-VL: [grid_x * grid_y][n_embd_text]), as
// preprocess_tiles() gives it.
std::vector<float> encode(const projector& p, const image_tile& tile, thread_pool& pool,
                          const kernels::dot_kernels& kernels = kernels::best_dot_kernels());

// A fixed-size family's tile by its pixels alone ([3][S][S]; Qwen-VL's needs its size: throws).
std::vector<float> encode(const projector& p, const std::vector<float>& pixels, thread_pool& pool,
                          const kernels::dot_kernels& kernels = kernels::best_dot_kernels());

// Qwen-VL: the merged-token grid {grid_x, grid_y} an image of width x height encodes to
// (before decoding it: admission's bound on its tokens).
std::pair<uint32_t, uint32_t> qwen_token_grid(const projector& p, uint32_t width, uint32_t height);

}  // namespace tandem::vision
