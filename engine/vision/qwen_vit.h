// Qwen2-VL's and Qwen2.5-VL's parts of the vision pass that the SigLIP families lack
// (vision_encoder.cpp runs the blocks; these are its hooks): the dynamic input size, the
// window layout of the patches, 2-D rotary positions and attention within windows.
//
// Layout. The resized image is gy x gx patches, my x mx merged tokens (2 x 2 patches each).
// Windows are `win` x `win` merged tokens (112 px: 4 x 4), the last row and column of them
// cut short by the image's edge; without window layers (qwen2vl), one window of the whole
// image. The pass keeps its tokens in window order: window by window
// (row by row of windows), within a window its merged tokens row by row, within a merged
// token its 4 patches (dy, dx) = (0,0), (0,1), (1,0), (1,1). So a window's patches are one
// contiguous range, a merged token's 4 patches one row of 4E floats, and only the merger's
// output goes back to raster order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/platform/thread_pool.h"
#include "engine/vision/projector.h"

namespace tandem::vision::qwen {

// libmtmd's calc_size_preserved_ratio with align = patch * 2: both sides rounded to the
// alignment (at least one), then, where the area is above max_pixels or below min_pixels,
// scaled by the ratio that brings it within them (floored, resp. ceiled, to the alignment).
// Float arithmetic as there, so both pick the same size. {width, height}
std::pair<uint32_t, uint32_t> resized_size(const vision_hparams& hp, uint32_t width, uint32_t height);

struct window_layout {
  int64_t gx = 0, gy = 0;                   // patches per row, per column
  int64_t mx = 0, my = 0;                   // merged tokens per row, per column
  std::vector<int32_t> patch_y, patch_x;    // [N] the patch row and column at each place
  std::vector<int64_t> bounds;              // [n_windows + 1] window w is places [bounds[w], bounds[w+1])
  std::vector<int32_t> place_of_token;      // [mx*my] raster merged token -> its place (in merged tokens)
};
window_layout make_layout(const vision_hparams& hp, uint32_t width, uint32_t height);

// ggml's rope_multi in vision mode, in place on x [N][E] (heads of D): in each head, pair
// (j, j + D/2) for j < D/2 turns by angle pos * 10000^(-4 i / D), pos the patch row for
// j < D/4 (i = j) and its column after (i = j - D/4); the angles as ggml's cache computes
// them (a float theta multiplied down pair by pair, cosf and sinf).
void rope_2d(float* x, const window_layout& l, int64_t E, int64_t n_head, thread_pool& pool);

// O = softmax(Q_h K_hᵀ / √D) V_h per head, each window's queries over its own keys only:
// one task per (window, head), with its own [D][n] and [n] buffers (n: the window's patches,
// 64 for Qwen2.5-VL's 14-pixel patches).
void window_attention(const float* q, const float* k, const float* v, float* o, int64_t E, int64_t n_head,
                      const std::vector<int64_t>& bounds, thread_pool& pool);

}  // namespace tandem::vision::qwen
