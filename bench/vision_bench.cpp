// Image encode time of a projector file (engine/vision): preprocessing and the encoder's
// forward pass over every tile of a test image of the given size (idefics3: the overview and
// the slices; one tile for the other families), as bench/compare_vision.py runs it beside
// llama.cpp's llama-mtmd-cli. Prints one JSON line.
//
//   vision_bench MMPROJ [--image WxH] [--threads N] [--repeat R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/vision/vision_encoder.h"

using namespace tandem;
using clock_type = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: vision_bench MMPROJ [--image WxH] [--threads N] [--repeat R]\n");
    return 2;
  }
  uint32_t w = 640, h = 480;
  int threads = 0, repeat = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--image")) std::sscanf(argv[i + 1], "%ux%u", &w, &h);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  const auto p = vision::projector::load(argv[1]);
  thread_pool pool(threads);
  vision::rgb_image img{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + i / 7) % 251);

  std::vector<double> pre_ms, enc_ms;
  uint32_t patches = 0, tokens = 0, tiles = 0;  // the whole image's
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = clock_type::now();
    const vision::image_tiles pre = vision::preprocess_tiles(*p, img);
    const auto t1 = clock_type::now();
    patches = tokens = 0;
    tiles = static_cast<uint32_t>(pre.tiles.size());
    for (const vision::image_tile& px : pre.tiles) {
      const auto emb = vision::encode(*p, px, pool);
      patches += px.width / p->hparams().patch_size * (px.height / p->hparams().patch_size);
      tokens += static_cast<uint32_t>(emb.size() / p->hparams().n_embd_text);
    }
    const auto t2 = clock_type::now();
    pre_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    enc_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    std::fprintf(stderr, "vision_bench: run %d: preprocess %.1f ms, encode %.1f ms (%u tiles, %u tokens)\n", r + 1,
                 pre_ms.back(), enc_ms.back(), tiles, tokens);
  }
  std::sort(pre_ms.begin(), pre_ms.end());
  std::sort(enc_ms.begin(), enc_ms.end());
  const auto& hp = p->hparams();
  std::printf("{\"family\": \"%s\", \"image_size\": %u, \"tiles\": %u, \"patches\": %u, \"tokens\": %u, "
              "\"threads\": %d, \"preprocess_ms\": %.2f, \"encode_ms\": %.2f, \"encode_ms_min\": %.2f}\n",
              vision::family_name(hp.family), hp.image_size, tiles, patches, tokens, pool.size(),
              pre_ms[pre_ms.size() / 2], enc_ms[enc_ms.size() / 2], enc_ms.front());
  return 0;
}
