#include "engine/vision/image_prompt.h"

#include <stdexcept>

#include "engine/vision/vision_encoder.h"

namespace tandem::vision {
namespace {

// One marker token by its text, or a clear error.
token_id marker(const tokenizer& tok, std::string_view text) {
  if (auto id = tok.find_token(text)) return *id;
  throw std::runtime_error("the model's vocabulary has no '" + std::string(text) +
                           "' token, which this projector's images need (is --mmproj for this model?)");
}

// Placeholder j of an image: an id within the vocabulary drawn from the pixel hash
// (splitmix64 of the hash and j).
token_id placeholder(const pixel_hash& h, uint32_t j, size_t n_vocab) {
  uint64_t z = h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull) ^ (uint64_t{j} * 0xbf58476d1ce4e5b9ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<token_id>(z % n_vocab);
}

}  // namespace

encoded_image encode_image(const projector& p, std::string_view bytes, const image_limits& limits, thread_pool& pool,
                           uint64_t max_rows) {
  const rgb_image img = decode_image(bytes, limits);
  encoded_image out;
  out.hash = hash_pixels(img);
  image_tiles tiles = preprocess_tiles(p, img);
  const uint64_t rows = qwen_family(p.hparams().family)
                            ? uint64_t{tiles.grid_x} * tiles.grid_y
                            : uint64_t{p.hparams().n_tokens()} * tiles.tiles.size();
  if (rows > max_rows) {
    throw image_error("the image (" + std::to_string(img.width) + "x" + std::to_string(img.height) + ") takes " +
                      std::to_string(rows) + " tokens, more than the " + std::to_string(max_rows) +
                      " the model's context leaves for this request's images");
  }
  out.grid_x = tiles.grid_x;
  out.grid_y = tiles.grid_y;
  for (const auto& t : tiles.tiles) out.tiles.push_back(std::make_shared<const std::vector<float>>(encode(p, t, pool)));
  return out;
}

image_layout::image_layout(const projector& p, const tokenizer& tok)
    : family_(p.hparams().family), n_tile_(p.hparams().n_tokens()) {
  if (family_ == projector_family::gemma3) {
    begin_ = {marker(tok, "<start_of_image>")};
    end_ = {marker(tok, "<end_of_image>")};
    return;
  }
  if (qwen_family(family_)) {
    begin_ = {marker(tok, "<|vision_start|>")};
    end_ = {marker(tok, "<|vision_end|>")};
    return;
  }
  // idefics3: "\n\n" is one token in SmolLM2's vocabulary; a vocabulary without it spells it.
  const token_id fake = marker(tok, "<fake_token_around_image>");
  if (auto nn = tok.find_token("\n\n")) {
    begin_ = {*nn};
  } else {
    begin_ = tok.encode("\n\n", false, false);
  }
  begin_.push_back(fake);
  begin_.push_back(marker(tok, "<global-img>"));
  end_ = {fake};
  row_end_ = tok.encode("\n", false, false);
}

image_prompt image_layout::lay_out(const encoded_image& img, const tokenizer& tok) const {
  image_prompt out;
  uint32_t j = 0;  // placeholders so far
  const auto add_run = [&](const std::shared_ptr<const std::vector<float>>& rows, bool bidirectional) {
    out.runs.push_back(
        {static_cast<int32_t>(out.tokens.size()), static_cast<int32_t>(n_tile_), rows, 0, bidirectional});
    for (uint32_t k = 0; k < n_tile_; ++k) out.tokens.push_back(placeholder(img.hash, j++, tok.vocab_size()));
  };
  const auto add = [&](const std::vector<token_id>& ids) { out.tokens.insert(out.tokens.end(), ids.begin(), ids.end()); };
  if (family_ == projector_family::gemma3) {
    add(begin_);
    add_run(img.tiles.at(0), /*bidirectional=*/true);
    add(end_);
    return out;
  }
  if (qwen_family(family_)) {
    // One run of grid_y rows of grid_x tokens, causal, at multimodal RoPE's grid positions.
    const int32_t n = static_cast<int32_t>(img.grid_x * img.grid_y);
    if (n <= 0 || img.tiles.at(0)->size() < static_cast<size_t>(n)) throw std::runtime_error("an image without rows");
    add(begin_);
    out.runs.push_back({static_cast<int32_t>(out.tokens.size()), n, img.tiles.at(0), 0, false,
                        static_cast<int32_t>(img.grid_x), static_cast<int32_t>(img.grid_y)});
    for (int32_t k = 0; k < n; ++k) out.tokens.push_back(placeholder(img.hash, j++, tok.vocab_size()));
    add(end_);
    return out;
  }
  for (uint32_t y = 0; y < img.grid_y; ++y) {
    for (uint32_t x = 0; x < img.grid_x; ++x) {
      const std::string tag = "<fake_token_around_image><row_" + std::to_string(y + 1) + "_col_" + std::to_string(x + 1) + ">";
      add(tok.encode(tag, false, /*parse_special=*/true));
      add_run(img.tiles.at(1 + size_t{y} * img.grid_x + x), false);
    }
    if (y + 1 != img.grid_y) add(row_end_);
  }
  add(begin_);
  add_run(img.tiles.at(0), false);
  add(end_);
  return out;
}

}  // namespace tandem::vision
