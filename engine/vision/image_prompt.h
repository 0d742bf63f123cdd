// An image as the language model reads it: encoded (its tiles' embeddings, in the model's
// width) and laid out in the prompt as libmtmd lays it out, with the marker tokens of the
// projector's family around runs of placeholder tokens whose rows are the embeddings.
//
//   gemma3    <start_of_image> [256 rows, bidirectional] <end_of_image>
//   idefics3  for each slice row y, col x: <fake_token_around_image><row_y_col_x> [64 rows]
//             ("\n" after each row but the last), then "\n\n" <fake_token_around_image>
//             <global-img> [overview: 64 rows] <fake_token_around_image>
//   Qwen-VL   <|vision_start|> [grid_y rows of grid_x rows, causal, at multimodal RoPE's grid
//             positions: embedding_rows::grid_w, grid_h] <|vision_end|>
//
// The placeholders' ids come from the hash of the decoded pixels (hash_pixels), so the
// prefix cache, which keys blocks by token ids, finds the same image at the same place and
// never a different one (nor text: a collision needs every id of a block to agree).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ids.h"
#include "engine/model/step.h"
#include "engine/platform/thread_pool.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/image_decode.h"
#include "engine/vision/projector.h"

namespace tandem::vision {

struct encoded_image {
  // Each tile's rows [n_tokens][n_embd_text]; idefics3: the overview first, then the slices
  // row by row (preprocess_tiles' order).
  std::vector<std::shared_ptr<const std::vector<float>>> tiles;
  uint32_t grid_x = 0, grid_y = 0;  // idefics3: its slices; Qwen-VL: its merged tokens (rows of grid_x); 0 for gemma3
  pixel_hash hash;
};

// Decodes (bounded by `limits`: throws image_error), preprocesses and encodes one image. An
// image whose rows (its tiles' tokens, markers apart) would be more than max_rows is refused
// with an image_error before it is encoded: the language model's context bounds the work.
encoded_image encode_image(const projector& p, std::string_view bytes, const image_limits& limits, thread_pool& pool,
                           uint64_t max_rows = UINT64_MAX);

// An image's tokens, and the runs of its placeholders that take a tile's rows (offsets
// within `tokens`: the caller shifts them to prompt positions).
struct image_prompt {
  std::vector<token_id> tokens;
  std::vector<embedding_rows> runs;
};

class image_layout {
 public:
  // The family's marker tokens, found in the vocabulary; throws std::runtime_error naming a
  // token the vocabulary lacks (a projector paired with the wrong model).
  image_layout(const projector& p, const tokenizer& tok);
  image_prompt lay_out(const encoded_image& img, const tokenizer& tok) const;
  // Tokens a tile takes (fixed-size families; Qwen-VL's vary with the image).
  uint32_t n_tokens_per_tile() const { return n_tile_; }

 private:
  projector_family family_;
  uint32_t n_tile_ = 0;
  std::vector<token_id> begin_, end_;  // gemma3: around the run; idefics3: around the overview
  std::vector<token_id> row_end_;      // idefics3: after a row of slices but the last
};

}  // namespace tandem::vision
