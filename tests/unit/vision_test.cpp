// engine/vision: resizing against Pillow's own output (tests/data/vision/resize.json, made by
// make_resize_vectors.py there); the projector loader and the encoder's forward pass, checked
// against a naive double-precision reference written here from the architecture's definition
// (loops, no kernels), on synthetic gemma3 projectors small enough to run it; and the
// loader's refusals.
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

using namespace tandem;
using namespace tandem::vision;

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

std::unique_ptr<projector> load(const synthetic_projector_spec& s, std::vector<std::byte>& keep) {
  keep = make_projector(s).serialize();
  return projector::from(gguf::file::parse(keep));
}

std::vector<double> floats_of(const gguf::file& f, const std::string& name) {
  const gguf::tensor_info* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  dequantize_row(t->type, t->data, t->n_elements(), v.data());
  return {v.begin(), v.end()};
}

// y[n][rows] = x[n][cols] · W + b, W stored as `rows` rows of `cols`
std::vector<double> lin(const std::vector<double>& x, int64_t n, const std::vector<double>& w, int64_t cols,
                        int64_t rows, const std::vector<double>* b) {
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = b ? (*b)[static_cast<size_t>(r)] : 0.0;
      for (int64_t c = 0; c < cols; ++c) s += x[static_cast<size_t>(t * cols + c)] * w[static_cast<size_t>(r * cols + c)];
      y[static_cast<size_t>(t * rows + r)] = s;
    }
  return y;
}

std::vector<double> ln(const std::vector<double>& x, int64_t n, int64_t e, const std::vector<double>& w,
                       const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < e; ++i) mean += x[static_cast<size_t>(t * e + i)];
    mean /= e;
    for (int64_t i = 0; i < e; ++i) var += std::pow(x[static_cast<size_t>(t * e + i)] - mean, 2);
    var /= e;
    for (int64_t i = 0; i < e; ++i)
      y[static_cast<size_t>(t * e + i)] = (x[static_cast<size_t>(t * e + i)] - mean) / std::sqrt(var + eps) * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
  }
  return y;
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

rgb_image test_image(uint32_t w, uint32_t h) {
  rgb_image img{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + i / 7) % 251);
  return img;
}

double max_rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / den;
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
  auto refused = [](gguf::writer w, const std::string& says) {
    const auto bytes = w.serialize();
    try {
      projector::from(gguf::file::parse(bytes));
      ADD_FAILURE() << "loaded; expected an error saying " << says;
    } catch (const gguf::format_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  auto spec = tiny(tensor_type::f16);
  {
    auto w = make_projector(spec);
    w.set_string("clip.projector_type", "resampler");
    refused(std::move(w), "'resampler' is not supported");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.block_count", 100000);
    refused(std::move(w), "clip.vision.block_count");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.block_count", 3);  // a layer the file does not have
    refused(std::move(w), "missing tensor v.blk.2.");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.image_size", 30);  // not a multiple of the patch
    refused(std::move(w), "image_size");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.embedding_length", 64);  // every tensor now has the wrong shape
    refused(std::move(w), "expected");
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

// qwen2.5vl: 14-pixel patches, 3 layers (window, full, window), width 64 in 4 heads of 16,
// SwiGLU FFN of 96, tokens of width 64: make_mtmd_vectors.sh's projector (seed 9).
namespace {

synthetic_projector_spec qwen_spec(tensor_type type) {
  synthetic_projector_spec s;
  qwen25vl_shape(s, 64);
  s.n_layer = 3;
  s.n_embd = 64;
  s.n_ff = 96;
  s.n_head = 4;
  s.n_wa_pattern = 2;
  s.type = type;
  s.seed = 9;
  return s;
}

std::vector<double> rms(const std::vector<double>& x, int64_t n, int64_t e, const std::vector<double>& w) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < e; ++i) ss += x[size_t(t * e + i)] * x[size_t(t * e + i)];
    const double inv = 1 / std::sqrt(ss / e + 1e-6);
    for (int64_t i = 0; i < e; ++i) y[size_t(t * e + i)] = x[size_t(t * e + i)] * inv * w[size_t(i)];
  }
  return y;
}

// Qwen2.5-VL's tower from its definition, in raster order throughout: a patch at (py, px)
// attends, on a window layer, to the patches whose merged token (py/2, px/2) is in the same
// 4 x 4 window; rotary angle pos * 10000^(-4i/D), pos the row for the first D/4 pairs of a
// head and the column for the next; merged token (ty, tx) = its 4 patches (dy, dx) in order.
std::vector<double> qwen_reference(const gguf::file& f, const synthetic_projector_spec& s, const image_tile& img) {
  const int64_t P = s.patch_size, gx = img.width / P, gy = img.height / P, N = gx * gy, E = s.n_embd, F = s.n_ff,
                NH = s.n_head, D = E / NH, T = s.n_embd_text, mx = gx / 2, my = gy / 2, win = 112 / (2 * P);
  std::vector<double> x(size_t(N * 3 * P * P));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < P; ++y)
        for (int64_t xx = 0; xx < P; ++xx)
          x[size_t(((n * 3 + c) * P + y) * P + xx)] =
              img.pixels[size_t(c * img.width * img.height + ((n / gx) * P + y) * img.width + (n % gx) * P + xx)];
  std::vector<double> h = lin(x, N, floats_of(f, "v.patch_embd.weight"), 3 * P * P, E, nullptr);
  const auto h1 = lin(x, N, floats_of(f, "v.patch_embd.weight.1"), 3 * P * P, E, nullptr);
  for (size_t i = 0; i < h.size(); ++i) h[i] += h1[i];
  const auto rope = [&](std::vector<double>& v) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t hd = 0; hd < NH; ++hd)
        for (int64_t j = 0; j < D / 2; ++j) {
          const double pos = j < D / 4 ? double(n / gx) : double(n % gx);
          const double a = pos * std::pow(10000.0, -4.0 * double(j % (D / 4)) / double(D));
          double& x0 = v[size_t(n * E + hd * D + j)];
          double& x1 = v[size_t(n * E + hd * D + j + D / 2)];
          const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
          x0 = r0;
          x1 = r1;
        }
  };
  const auto window_of = [&](int64_t n) { return ((n / gx) / 2 / win) * 1000 + ((n % gx) / 2 / win); };
  for (uint32_t il = 0; il < s.n_layer; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    auto W = [&](const std::string& t) { return floats_of(f, b + t + ".weight"); };
    auto B = [&](const std::string& t) { return floats_of(f, b + t + ".bias"); };
    const bool windowed = (il + 1) % s.n_wa_pattern != 0;
    const auto a = rms(h, N, E, W("ln1"));
    const auto qb = B("attn_q"), kb = B("attn_k"), vb = B("attn_v"), ob = B("attn_out");
    auto q = lin(a, N, W("attn_q"), E, E, &qb), k = lin(a, N, W("attn_k"), E, E, &kb);
    const auto v = lin(a, N, W("attn_v"), E, E, &vb);
    rope(q);
    rope(k);
    std::vector<double> o(size_t(N * E), 0.0);
    for (int64_t hd = 0; hd < NH; ++hd)
      for (int64_t i = 0; i < N; ++i) {
        std::vector<double> sc(size_t(N), 0.0);
        double most = -1e300, sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          if (windowed && window_of(i) != window_of(j)) continue;
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += q[size_t(i * E + hd * D + e)] * k[size_t(j * E + hd * D + e)];
          sc[size_t(j)] = d / std::sqrt(double(D));
          most = std::max(most, sc[size_t(j)]);
        }
        for (int64_t j = 0; j < N; ++j) {
          sc[size_t(j)] = windowed && window_of(i) != window_of(j) ? 0.0 : std::exp(sc[size_t(j)] - most);
          sum += sc[size_t(j)];
        }
        for (int64_t j = 0; j < N; ++j)
          for (int64_t e = 0; e < D; ++e) o[size_t(i * E + hd * D + e)] += sc[size_t(j)] / sum * v[size_t(j * E + hd * D + e)];
      }
    const auto ao = lin(o, N, W("attn_out"), E, E, &ob);
    for (size_t i = 0; i < h.size(); ++i) h[i] += ao[i];
    const auto a2 = rms(h, N, E, W("ln2"));
    const auto gb = B("ffn_gate"), ub = B("ffn_up"), db = B("ffn_down");
    const auto g = lin(a2, N, W("ffn_gate"), E, F, &gb);
    auto u = lin(a2, N, W("ffn_up"), E, F, &ub);
    for (size_t i = 0; i < u.size(); ++i) u[i] *= g[i] / (1 + std::exp(-g[i]));
    const auto d = lin(u, N, W("ffn_down"), F, E, &db);
    for (size_t i = 0; i < h.size(); ++i) h[i] += d[i];
  }
  h = rms(h, N, E, floats_of(f, "v.post_ln.weight"));
  std::vector<double> m(size_t(mx * my * 4 * E));
  for (int64_t t = 0; t < mx * my; ++t)
    for (int64_t sub = 0; sub < 4; ++sub)
      for (int64_t e = 0; e < E; ++e)
        m[size_t((t * 4 + sub) * E + e)] = h[size_t((((t / mx) * 2 + sub / 2) * gx + (t % mx) * 2 + sub % 2) * E + e)];
  const auto b0 = floats_of(f, "mm.0.bias"), b2 = floats_of(f, "mm.2.bias");
  auto y1 = lin(m, mx * my, floats_of(f, "mm.0.weight"), 4 * E, 4 * E, &b0);
  for (auto& z : y1) z = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * z * (1 + 0.044715 * z * z)));
  return lin(y1, mx * my, floats_of(f, "mm.2.weight"), 4 * E, T, &b2);
}

std::vector<float> read_vectors(const std::string& file, int32_t n_tokens, int32_t n_embd) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR "/tests/data/vision/") + file, std::ios::binary);
  EXPECT_TRUE(in) << file;
  int32_t shape[2] = {0, 0};
  in.read(reinterpret_cast<char*>(shape), sizeof shape);
  EXPECT_EQ(shape[0], n_tokens) << file;
  EXPECT_EQ(shape[1], n_embd) << file;
  std::vector<float> want(size_t(n_tokens) * size_t(n_embd));
  in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * sizeof(float)));
  EXPECT_TRUE(in) << file << " is short";
  return want;
}

}  // namespace

// libmtmd's dynamic size: sides rounded to whole merged tokens (28 px), the area within 8 to
// 4096 tokens; the image fitted inside, centred on black.
TEST(VisionEncoder, Qwen25vlResizesAsLibmtmd) {
  std::vector<std::byte> bytes;
  const auto p = load(qwen_spec(tensor_type::f32), bytes);
  EXPECT_EQ(p->hparams().family, projector_family::qwen25vl);
  EXPECT_EQ(p->hparams().n_embd_text, 64u);
  using wh = std::pair<uint32_t, uint32_t>;
  EXPECT_EQ(qwen_token_grid(*p, 150, 90), wh(5, 3));   // 140 x 84
  EXPECT_EQ(qwen_token_grid(*p, 100, 260), wh(4, 9));  // 112 x 252
  EXPECT_EQ(qwen_token_grid(*p, 50, 29), wh(4, 3));    // 56 x 28 is under 8 tokens: scaled up to 112 x 84
  EXPECT_EQ(qwen_token_grid(*p, 1, 1), wh(3, 3));
  const auto [bx, by] = qwen_token_grid(*p, 4000, 3000);  // over 4096 tokens: scaled down
  EXPECT_LE(bx * by, 4096u);
  EXPECT_GT(bx * by, 3900u);
  const image_tiles t = preprocess_tiles(*p, test_image(50, 29));
  ASSERT_EQ(t.tiles.size(), 1u);
  EXPECT_EQ(t.tiles[0].width, 112u);
  EXPECT_EQ(t.tiles[0].height, 84u);
  EXPECT_EQ(t.grid_x, 4u);
  EXPECT_EQ(t.grid_y, 3u);
  // 112 x 65 of picture in rows 9..73: row 0 is black, normalized by the first channel's mean and std
  EXPECT_NEAR(t.tiles[0].pixels[0], (0 - 0.48145466f) / 0.26862954f, 1e-5);
  EXPECT_THROW(encode(*p, t.tiles[0].pixels, *shared_thread_pool(1)), std::invalid_argument);  // needs the size
}

TEST(VisionEncoder, Qwen25vlMatchesTheNaiveReference) {
  thread_pool pool(2);
  for (const tensor_type type : {tensor_type::f32, tensor_type::f16}) {
    const auto spec = qwen_spec(type);
    std::vector<std::byte> bytes;
    const auto p = load(spec, bytes);
    const image_tiles t = preprocess_tiles(*p, test_image(150, 90));  // 140 x 84: windows of 4x3 and 1x3 tokens
    ASSERT_EQ(t.grid_x * t.grid_y, 15u);
    const std::vector<float> got = encode(*p, t.tiles[0], pool);
    ASSERT_EQ(got.size(), 15u * 64);
    const double err = max_rel_error(got, qwen_reference(gguf::file::parse(bytes), spec, t.tiles[0]));
    EXPECT_LT(err, type == tensor_type::f32 ? 1e-3 : 1e-2);
    std::printf("qwen2.5vl %s weights: max error %.2e of the largest output\n", type == tensor_type::f32 ? "f32" : "f16", err);
  }
}

// make_mtmd_vectors.sh's qwen2.5vl cases: both grids end in windows cut by the image's edge.
TEST(VisionEncoder, Qwen25vlMatchesLibmtmd) {
  thread_pool pool(2);
  struct fidelity_case {
    const char* file;
    tensor_type type;
    uint32_t w, h, grid_x, grid_y;
  };
  for (const fidelity_case& c : {fidelity_case{"mtmd-qwen25vl-f32-150x90.bin", tensor_type::f32, 150, 90, 5, 3},
                                 fidelity_case{"mtmd-qwen25vl-f16-100x260.bin", tensor_type::f16, 100, 260, 4, 9}}) {
    std::vector<std::byte> bytes;
    const auto p = load(qwen_spec(c.type), bytes);
    const image_tiles t = preprocess_tiles(*p, test_image(c.w, c.h));
    ASSERT_EQ(t.grid_x, c.grid_x);
    ASSERT_EQ(t.grid_y, c.grid_y);
    const std::vector<float> got = encode(*p, t.tiles[0], pool);
    const std::vector<float> want = read_vectors(c.file, int32_t(c.grid_x * c.grid_y), 64);
    ASSERT_EQ(got.size(), want.size());
    const double err = max_rel_error(got, std::vector<double>(want.begin(), want.end()));
    std::printf("%s: max difference %.2e of the largest embedding value\n", c.file, err);
    EXPECT_LT(err, 1e-3) << c.file;
    const auto ref = qwen_reference(gguf::file::parse(bytes), qwen_spec(c.type), t.tiles[0]);
    std::printf("  against the naive reference: libmtmd %.2e, Tandem %.2e\n", max_rel_error(want, ref), max_rel_error(got, ref));
  }
}

TEST(VisionEncoder, BadQwen25vlFilesAreClearErrors) {
  const auto refused = [](gguf::writer w, const std::string& says) {
    const auto bytes = w.serialize();
    try {
      projector::from(gguf::file::parse(bytes));
      ADD_FAILURE() << "loaded; expected an error saying " << says;
    } catch (const gguf::format_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  const auto spec = qwen_spec(tensor_type::f16);
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.n_wa_pattern", 1000);
    refused(std::move(w), "clip.vision.n_wa_pattern");
  }
  {
    auto w = make_projector(spec);
    w.set_bool("clip.use_silu", false);
    refused(std::move(w), "clip.use_silu");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.attention.head_count", 64);  // heads of 1: no 2-D rotary
    refused(std::move(w), "head width");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.feed_forward_length", 128);  // every FFN tensor now the wrong shape
    refused(std::move(w), "v.blk.0.ffn_gate.weight is");
  }
}
