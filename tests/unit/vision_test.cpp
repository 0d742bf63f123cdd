// engine/vision: resizing against Pillow's own output (tests/data/vision/resize.json, made by
// make_resize_vectors.py there); the projector loader and the encoder's forward pass, checked
// against a naive double-precision reference written here from the architecture's definition
// (loops, no kernels), on synthetic gemma3 projectors small enough to run it; gemma3's and
// idefics3's against libmtmd; and the loader's refusals. The Qwen-VL families are in
// vision_qwen_test.cpp, the SIMD bodies in vision_kernels_test.cpp.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/gguf/quantize.h"
#include "engine/vision/resample.h"
#include "engine/vision/synthetic_projector.h"
#include "engine/kernels/half.h"
#include "engine/vision/vision_encoder.h"
#include "engine/vision/vision_kernels.h"
#include "vision_reference.h"

using namespace tandem;
using namespace tandem::vision;
using namespace tandem::vision::test_support;

namespace {

synthetic_projector_spec tiny(tensor_type type) {
  synthetic_projector_spec s;
  s.image_size = 32;
  s.patch_size = 4;  // 8 x 8 = 64 patches
  s.n_embd = 48;
  s.n_ff = 96;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_merge = 2;  // 16 tokens
  s.n_embd_text = 40;
  s.type = type;
  s.seed = 11;
  return s;
}

// The gemma3 projector's output for `pixels` ([3][S][S]), from the file's tensors.
std::vector<double> reference(const gguf::file& f, const synthetic_projector_spec& s, const std::vector<float>& pixels) {
  const int64_t S = s.image_size, P = s.patch_size, G = S / P, N = G * G, E = s.n_embd, F = s.n_ff, H = s.n_head,
                D = E / H, m = s.n_merge, g = G / m, T = s.n_embd_text;
  const double eps = 1e-6;
  std::vector<double> x(static_cast<size_t>(N * 3 * P * P));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < P; ++y)
        for (int64_t xx = 0; xx < P; ++xx)
          x[static_cast<size_t>(((n * 3 + c) * P + y) * P + xx)] =
              pixels[static_cast<size_t>(c * S * S + ((n / G) * P + y) * S + (n % G) * P + xx)];
  const auto pb = floats_of(f, "v.patch_embd.bias");
  std::vector<double> h = lin(x, N, floats_of(f, "v.patch_embd.weight"), 3 * P * P, E, &pb);
  const auto pos = floats_of(f, "v.position_embd.weight");
  for (size_t i = 0; i < h.size(); ++i) h[i] += pos[i];
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    auto W = [&](const std::string& t) { return floats_of(f, b + t + ".weight"); };
    auto B = [&](const std::string& t) { return floats_of(f, b + t + ".bias"); };
    const auto a = ln(h, N, E, W("ln1"), B("ln1"), eps);
    const auto qb = B("attn_q"), kb = B("attn_k"), vb = B("attn_v"), ob = B("attn_out");
    const auto q = lin(a, N, W("attn_q"), E, E, &qb), k = lin(a, N, W("attn_k"), E, E, &kb), v = lin(a, N, W("attn_v"), E, E, &vb);
    std::vector<double> o(static_cast<size_t>(N * E), 0.0);
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t i = 0; i < N; ++i) {
        std::vector<double> sc(static_cast<size_t>(N));
        double most = -1e300, sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += q[static_cast<size_t>(i * E + hd * D + e)] * k[static_cast<size_t>(j * E + hd * D + e)];
          sc[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(D));
          most = std::max(most, sc[static_cast<size_t>(j)]);
        }
        for (auto& z : sc) sum += z = std::exp(z - most);
        for (int64_t j = 0; j < N; ++j)
          for (int64_t e = 0; e < D; ++e) o[static_cast<size_t>(i * E + hd * D + e)] += sc[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * E + hd * D + e)];
      }
    const auto ao = lin(o, N, W("attn_out"), E, E, &ob);
    for (size_t i = 0; i < h.size(); ++i) h[i] += ao[i];
    const auto a2 = ln(h, N, E, W("ln2"), B("ln2"), eps);
    const auto ub = B("ffn_up"), db = B("ffn_down");
    auto u = lin(a2, N, W("ffn_up"), E, F, &ub);
    for (auto& z : u) z = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * z * (1 + 0.044715 * z * z)));
    const auto d = lin(u, N, W("ffn_down"), F, E, &db);
    for (size_t i = 0; i < h.size(); ++i) h[i] += d[i];
  }
  h = ln(h, N, E, floats_of(f, "v.post_ln.weight"), floats_of(f, "v.post_ln.bias"), eps);
  std::vector<double> t(static_cast<size_t>(g * g * E), 0.0);
  for (int64_t ty = 0; ty < g; ++ty)
    for (int64_t tx = 0; tx < g; ++tx)
      for (int64_t dy = 0; dy < m; ++dy)
        for (int64_t dx = 0; dx < m; ++dx)
          for (int64_t e = 0; e < E; ++e)
            t[static_cast<size_t>((ty * g + tx) * E + e)] += h[static_cast<size_t>(((ty * m + dy) * G + tx * m + dx) * E + e)] / (m * m);
  const auto nw = floats_of(f, "mm.soft_emb_norm.weight");
  for (int64_t r = 0; r < g * g; ++r) {
    double ss = 0;
    for (int64_t e = 0; e < E; ++e) ss += t[static_cast<size_t>(r * E + e)] * t[static_cast<size_t>(r * E + e)];
    const double inv = 1 / std::sqrt(ss / E + eps);
    for (int64_t e = 0; e < E; ++e) t[static_cast<size_t>(r * E + e)] *= inv * nw[static_cast<size_t>(e)];
  }
  const auto pw = floats_of(f, "mm.input_projection.weight");  // [E][T]
  std::vector<double> out(static_cast<size_t>(g * g * T), 0.0);
  for (int64_t r = 0; r < g * g; ++r)
    for (int64_t c = 0; c < T; ++c)
      for (int64_t e = 0; e < E; ++e) out[static_cast<size_t>(r * T + c)] += t[static_cast<size_t>(r * E + e)] * pw[static_cast<size_t>(e * T + c)];
  return out;
}

std::string unbase64(std::string_view b64) { return decode_data_uri("data:;base64," + std::string(b64), 1 << 20); }

}  // namespace

TEST(VisionResample, EqualsPillowForEveryFilterAndDirection) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/data/vision/resize.json");
  ASSERT_TRUE(in) << "tests/data/vision/resize.json";
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = boost::json::parse(text.str()).as_object();
  const auto& cases = doc.at("cases").as_array();
  ASSERT_GE(cases.size(), 12u);
  for (const auto& cv : cases) {
    const auto& c = cv.as_object();
    const auto sw = static_cast<uint32_t>(c.at("src").as_array()[0].as_int64());
    const auto sh = static_cast<uint32_t>(c.at("src").as_array()[1].as_int64());
    const auto dw = static_cast<uint32_t>(c.at("dst").as_array()[0].as_int64());
    const auto dh = static_cast<uint32_t>(c.at("dst").as_array()[1].as_int64());
    const std::string f(c.at("filter").as_string());
    const resample_filter filter = f == "bilinear" ? resample_filter::bilinear
                                   : f == "bicubic" ? resample_filter::bicubic
                                                    : resample_filter::lanczos;
    const rgb_image got = resize(test_image(sw, sh), dw, dh, filter);
    const std::string want = unbase64(c.at("rgb").as_string());
    ASSERT_EQ(got.rgb.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got.rgb[i] != static_cast<uint8_t>(want[i]);
    EXPECT_EQ(differ, 0u) << sw << "x" << sh << " -> " << dw << "x" << dh << " " << f;
  }
}

TEST(VisionResample, PaddedFitKeepsTheAspectRatioCentred) {
  rgb_image img{4, 2, std::vector<uint8_t>(4 * 2 * 3, 200)};
  const rgb_image out = resize_padded(img, 8, 8, resample_filter::bilinear);
  ASSERT_EQ(out.width, 8u);
  ASSERT_EQ(out.height, 8u);
  auto at = [&](uint32_t x, uint32_t y) { return out.rgb[(size_t{y} * 8 + x) * 3]; };
  EXPECT_EQ(at(0, 0), 0);    // padding above
  EXPECT_EQ(at(3, 2), 200);  // the 8 x 4 picture in rows 2..5
  EXPECT_EQ(at(7, 5), 200);
  EXPECT_EQ(at(0, 7), 0);    // padding below
}

TEST(VisionEncoder, Gemma3MatchesTheNaiveReference) {
  thread_pool pool(2);
  for (const tensor_type type : {tensor_type::f32, tensor_type::f16}) {
    const auto spec = tiny(type);
    std::vector<std::byte> bytes;
    const auto p = load(spec, bytes);
    EXPECT_EQ(p->hparams().n_tokens(), 16u);
    EXPECT_EQ(p->hparams().n_embd_text, 40u);
    const std::vector<float> px = preprocess(*p, test_image(50, 29));  // fitted and padded to 32 x 32
    ASSERT_EQ(px.size(), 3u * 32 * 32);
    const std::vector<float> got = encode(*p, px, pool);
    ASSERT_EQ(got.size(), 16u * 40);
    const std::vector<double> want = reference(gguf::file::parse(bytes), spec, px);
    // f32 weights: float rounding and GELU's half-precision table (as ggml's); f16 weights:
    // also the activations rounded to half before each product, as ggml does.
    const double err = max_rel_error(got, want);
    EXPECT_LT(err, type == tensor_type::f32 ? 1e-3 : 1e-2) << (type == tensor_type::f32 ? "f32" : "f16");
    std::printf("%s weights: max error %.2e of the largest output\n", type == tensor_type::f32 ? "f32" : "f16", err);
  }
}

TEST(VisionEncoder, DifferentImagesGiveDifferentEmbeddings) {
  thread_pool pool(2);
  std::vector<std::byte> bytes;
  const auto p = load(tiny(tensor_type::f16), bytes);
  const auto a = encode(*p, preprocess(*p, test_image(32, 32)), pool);
  auto img = test_image(32, 32);
  img.rgb[500] ^= 0x80;
  const auto b = encode(*p, preprocess(*p, img), pool);
  EXPECT_EQ(a, encode(*p, preprocess(*p, test_image(32, 32)), pool));  // deterministic
  EXPECT_NE(a, b);
}

TEST(VisionEncoder, BadProjectorFilesAreClearErrors) {
  auto spec = tiny(tensor_type::f16);
  {
    auto w = make_projector(spec);
    w.set_string("clip.projector_type", "resampler");
    refused(w, "'resampler' is not supported");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.block_count", 100000);
    refused(w, "clip.vision.block_count");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.block_count", 3);  // a layer the file does not have
    refused(w, "missing tensor v.blk.2.");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.image_size", 30);  // not a multiple of the patch
    refused(w, "image_size");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.embedding_length", 64);  // every tensor now has the wrong shape
    refused(w, "expected");
  }
}

// The same projector files and images as tests/data/vision/make_mtmd_vectors.sh gives
// llama.cpp's libmtmd: the embeddings agree within 1e-3 of the largest (issue 55's bar).
TEST(VisionEncoder, Gemma3MatchesLibmtmd) {
  thread_pool pool(2);
  struct fidelity_case {
    const char* file;
    tensor_type type;
    uint32_t w, h;
  };
  for (const fidelity_case& c : {fidelity_case{"mtmd-gemma3-f16-50x29.bin", tensor_type::f16, 50, 29},
                                 fidelity_case{"mtmd-gemma3-f32-300x170.bin", tensor_type::f32, 300, 170}}) {
    synthetic_projector_spec s;
    s.image_size = 112;
    s.patch_size = 14;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_ff = 128;
    s.n_head = 4;
    s.n_merge = 4;
    s.n_embd_text = 640;
    s.type = c.type;
    s.seed = 5;
    std::vector<std::byte> bytes;
    const auto p = load(s, bytes);
    const std::vector<float> got = encode(*p, preprocess(*p, test_image(c.w, c.h)), pool);

    std::ifstream in(std::string(TANDEM_SOURCE_DIR "/tests/data/vision/") + c.file, std::ios::binary);
    ASSERT_TRUE(in) << c.file;
    int32_t shape[2] = {0, 0};
    in.read(reinterpret_cast<char*>(shape), sizeof shape);
    ASSERT_EQ(shape[0], 4);
    ASSERT_EQ(shape[1], 640);
    std::vector<float> want(static_cast<size_t>(shape[0] * shape[1]));
    in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
    ASSERT_TRUE(in) << c.file << " is short";
    ASSERT_EQ(got.size(), want.size());
    const double err = max_rel_error(got, std::vector<double>(want.begin(), want.end()));
    std::printf("%s: max difference %.2e of the largest embedding value\n", c.file, err);
    EXPECT_LT(err, 1e-3) << c.file;
  }
}

// idefics3 (SmolVLM's family): a 100x60 image resized to a 128 longest edge (128x76, even),
// cut into 2x2 slices of 64 after the overview; libmtmd's dump (make_mtmd_vectors.sh) holds
// the last tile it encoded, slice (1, 1): the tiling, Lanczos resizing and pixel shuffle agree.
TEST(VisionEncoder, Idefics3TilesAndMatchesLibmtmd) {
  thread_pool pool(2);
  synthetic_projector_spec s;
  s.family = "idefics3";
  s.image_size = 64;
  s.patch_size = 8;
  s.n_layer = 2;
  s.n_embd = 64;
  s.n_ff = 128;
  s.n_head = 4;
  s.n_merge = 2;
  s.n_embd_text = 576;
  s.longest_edge = 128;
  s.type = tensor_type::f32;
  s.seed = 7;
  std::vector<std::byte> bytes;
  const auto p = load(s, bytes);
  EXPECT_EQ(p->hparams().n_tokens(), 16u);
  const image_tiles tiles = preprocess_tiles(*p, test_image(100, 60));
  ASSERT_EQ(tiles.grid_x, 2u);
  ASSERT_EQ(tiles.grid_y, 2u);
  ASSERT_EQ(tiles.tiles.size(), 5u);

  std::ifstream in(TANDEM_SOURCE_DIR "/tests/data/vision/mtmd-idefics3-f32-100x60.bin", std::ios::binary);
  ASSERT_TRUE(in);
  int32_t shape[2] = {0, 0};
  in.read(reinterpret_cast<char*>(shape), sizeof shape);
  ASSERT_EQ(shape[0], 16);
  ASSERT_EQ(shape[1], 576);
  std::vector<float> want(16 * 576);
  in.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
  ASSERT_TRUE(in);
  const std::vector<double> wanted(want.begin(), want.end());
  for (size_t i = 0; i < tiles.tiles.size(); ++i) {
    const double err = max_rel_error(encode(*p, tiles.tiles[i], pool), wanted);
    std::printf("idefics3 tile %zu against libmtmd's last: max difference %.2e\n", i, err);
    if (i == 4) EXPECT_LT(err, 1e-3);
    else EXPECT_GT(err, 1e-2);  // the other tiles are other pictures
  }
}
