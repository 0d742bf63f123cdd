// engine/vision's Qwen-VL families (qwen_vit.h): Qwen2.5-VL's and Qwen2-VL's dynamic sizes,
// their passes against a naive double-precision reference written here from the
// architectures' definitions (vision_reference.h's pieces), against llama.cpp's libmtmd
// (vectors that tests/data/vision/make_mtmd_vectors.sh makes), and the loader's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/vision/synthetic_projector.h"
#include "engine/vision/vision_encoder.h"
#include "vision_reference.h"

using namespace tandem;
using namespace tandem::vision;
using namespace tandem::vision::test_support;

namespace {

// make_mtmd_vectors.sh's projectors, 14-pixel patches, width 64 in 4 heads of 16, tokens of
// width 64. qwen2.5vl: 3 layers (window, full, window), SwiGLU FFN of 96 (seed 9); qwen2vl:
// 2 layers, quick-GELU FFN of 128 (seed 13).
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

synthetic_projector_spec qwen2_spec(tensor_type type) {
  synthetic_projector_spec s;
  qwen2vl_shape(s, 64);
  s.n_layer = 2;
  s.n_embd = 64;
  s.n_ff = 128;
  s.n_head = 4;
  s.type = type;
  s.seed = 13;
  return s;
}

// Qwen2.5-VL's and Qwen2-VL's towers from their definitions, in raster order throughout: a
// patch at (py, px) attends, on a window layer, to the patches whose merged token
// (py/2, px/2) is in the same 4 x 4 window; rotary angle pos * 10000^(-4i/D), pos the row for
// the first D/4 pairs of a head and the column for the next; merged token (ty, tx) = its 4
// patches (dy, dx) in order. Qwen2-VL: LayerNorms, no windows, x·σ(1.702x) in the FFN.
std::vector<double> qwen_reference(const gguf::file& f, const synthetic_projector_spec& s, const image_tile& img) {
  const int64_t P = s.patch_size, gx = img.width / P, gy = img.height / P, N = gx * gy, E = s.n_embd, F = s.n_ff,
                NH = s.n_head, D = E / NH, T = s.n_embd_text, mx = gx / 2, my = gy / 2, win = 112 / (2 * P);
  const bool v25 = s.family == "qwen2.5vl";
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
    const bool windowed = v25 && s.n_wa_pattern > 0 && (il + 1) % s.n_wa_pattern != 0;
    const auto a = v25 ? rms(h, N, E, W("ln1")) : ln(h, N, E, W("ln1"), B("ln1"), 1e-6);
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
    const auto a2 = v25 ? rms(h, N, E, W("ln2")) : ln(h, N, E, W("ln2"), B("ln2"), 1e-6);
    const auto ub = B("ffn_up"), db = B("ffn_down");
    auto u = lin(a2, N, W("ffn_up"), E, F, &ub);
    if (v25) {
      const auto gb = B("ffn_gate");
      const auto g = lin(a2, N, W("ffn_gate"), E, F, &gb);
      for (size_t i = 0; i < u.size(); ++i) u[i] *= g[i] / (1 + std::exp(-g[i]));
    } else {
      for (double& z : u) z /= 1 + std::exp(-1.702 * z);
    }
    const auto d = lin(u, N, W("ffn_down"), F, E, &db);
    for (size_t i = 0; i < h.size(); ++i) h[i] += d[i];
  }
  h = v25 ? rms(h, N, E, floats_of(f, "v.post_ln.weight"))
          : ln(h, N, E, floats_of(f, "v.post_ln.weight"), floats_of(f, "v.post_ln.bias"), 1e-6);
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

// The family's encoder against qwen_reference on a test image of w x h pixels, for f32 and
// f16 weights: at most `bar` of the largest output apart.
void matches_the_reference(synthetic_projector_spec (*spec_of)(tensor_type), uint32_t w, uint32_t h, uint32_t n_tokens,
                           double bar_f32, double bar_f16) {
  thread_pool pool(2);
  for (const tensor_type type : {tensor_type::f32, tensor_type::f16}) {
    const auto spec = spec_of(type);
    std::vector<std::byte> bytes;
    const auto p = load(spec, bytes);
    const image_tiles t = preprocess_tiles(*p, test_image(w, h));
    ASSERT_EQ(t.grid_x * t.grid_y, n_tokens);
    const std::vector<float> got = encode(*p, t.tiles[0], pool);
    ASSERT_EQ(got.size(), size_t{n_tokens} * 64);
    const double err = max_rel_error(got, qwen_reference(gguf::file::parse(bytes), spec, t.tiles[0]));
    const bool f32 = type == tensor_type::f32;
    EXPECT_LT(err, f32 ? bar_f32 : bar_f16) << spec.family << (f32 ? " f32" : " f16");
    std::printf("%s %s weights: max error %.2e of the largest output\n", spec.family.c_str(), f32 ? "f32" : "f16", err);
  }
}

// make_mtmd_vectors.sh's two cases of a family (mtmd-PREFIX-f32-150x90.bin and
// mtmd-PREFIX-f16-100x260.bin): within 1e-3 of libmtmd's largest embedding value.
void matches_libmtmd(synthetic_projector_spec (*spec_of)(tensor_type), const std::string& prefix) {
  thread_pool pool(2);
  struct fidelity_case {
    tensor_type type;
    uint32_t w, h, grid_x, grid_y;
  };
  for (const fidelity_case& c : {fidelity_case{tensor_type::f32, 150, 90, 5, 3},
                                 fidelity_case{tensor_type::f16, 100, 260, 4, 9}}) {
    const std::string file = "mtmd-" + prefix + (c.type == tensor_type::f32 ? "-f32-" : "-f16-") +
                             std::to_string(c.w) + "x" + std::to_string(c.h) + ".bin";
    std::vector<std::byte> bytes;
    const auto p = load(spec_of(c.type), bytes);
    const image_tiles t = preprocess_tiles(*p, test_image(c.w, c.h));
    ASSERT_EQ(t.grid_x, c.grid_x);
    ASSERT_EQ(t.grid_y, c.grid_y);
    const std::vector<float> got = encode(*p, t.tiles[0], pool);
    const std::vector<float> want = read_vectors(file, int32_t(c.grid_x * c.grid_y), 64);
    ASSERT_EQ(got.size(), want.size());
    const double err = max_rel_error(got, std::vector<double>(want.begin(), want.end()));
    std::printf("%s: max difference %.2e of the largest embedding value\n", file.c_str(), err);
    EXPECT_LT(err, 1e-3) << file;
    const auto ref = qwen_reference(gguf::file::parse(bytes), spec_of(c.type), t.tiles[0]);
    std::printf("  against the naive reference: libmtmd %.2e, Tandem %.2e\n", max_rel_error(want, ref), max_rel_error(got, ref));
  }
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
  matches_the_reference(qwen_spec, 150, 90, 15, 1e-3, 1e-2);  // 140 x 84: windows of 4x3 and 1x3 tokens
}

// make_mtmd_vectors.sh's qwen2.5vl cases: both grids end in windows cut by the image's edge.
TEST(VisionEncoder, Qwen25vlMatchesLibmtmd) { matches_libmtmd(qwen_spec, "qwen25vl"); }

TEST(VisionEncoder, BadQwen25vlFilesAreClearErrors) {
  const auto spec = qwen_spec(tensor_type::f16);
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.n_wa_pattern", 1000);
    refused(w, "clip.vision.n_wa_pattern");
  }
  {
    auto w = make_projector(spec);
    w.set_bool("clip.use_silu", false);
    refused(w, "clip.use_silu");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.attention.head_count", 64);  // heads of 1: no 2-D rotary
    refused(w, "head width");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.feed_forward_length", 128);  // every FFN tensor now the wrong shape
    refused(w, "v.blk.0.ffn_gate.weight is");
  }
}

TEST(VisionEncoder, Qwen2vlReadsItsFfnWidthFromTheTensors) {
  std::vector<std::byte> bytes;
  const auto p = load(qwen2_spec(tensor_type::f16), bytes);
  EXPECT_EQ(p->hparams().family, projector_family::qwen2vl);
  EXPECT_EQ(std::string(family_name(p->hparams().family)), "qwen2vl");
  EXPECT_TRUE(qwen_family(p->hparams().family));
  // The key holds the language model's width, as llama.cpp's converter writes it.
  EXPECT_EQ(gguf::file::parse(bytes).get_int("clip.vision.feed_forward_length"), 64);
  EXPECT_EQ(p->hparams().n_ff, 128u);
  EXPECT_FALSE(p->hparams().rms_norm);
  EXPECT_TRUE(p->hparams().quick_gelu);
  EXPECT_EQ(p->hparams().n_wa_pattern, 0u);
  EXPECT_EQ(p->layers[0].ln1_b.size(), 64u);
  EXPECT_EQ(p->layers[0].gate.data, nullptr);
  EXPECT_EQ(qwen_token_grid(*p, 150, 90), std::make_pair(5u, 3u));  // the same sizes as Qwen2.5-VL
}

TEST(VisionEncoder, Qwen2vlMatchesTheNaiveReference) {
  // 112 x 252: 4 x 9 tokens. Measured 4.1e-4 (f32) and 3.8e-4 (f16); GELU for quick GELU: 8.4e-3.
  matches_the_reference(qwen2_spec, 100, 260, 36, 1e-3, 1e-3);
}

// make_mtmd_vectors.sh's qwen2vl cases.
TEST(VisionEncoder, Qwen2vlMatchesLibmtmd) { matches_libmtmd(qwen2_spec, "qwen2vl"); }

TEST(VisionEncoder, BadQwen2vlFilesAreClearErrors) {
  const auto spec = qwen2_spec(tensor_type::f16);
  {
    auto w = make_projector(spec);
    w.set_bool("clip.use_silu", true);
    refused(w, "quick GELU");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.n_wa_pattern", 2);  // libmtmd would window without the layout's inputs
    refused(w, "clip.vision.n_wa_pattern");
  }
  {
    auto w = make_projector(spec);
    w.set_u32("clip.vision.embedding_length", 128);  // the FFN now as wide as the encoder: ambiguous
    refused(w, "FFN width");
  }
  {
    auto w = make_projector(spec);
    w.set_string("clip.projector_type", "qwen2.5vl_merger");  // no gate, no use_silu
    refused(w, "clip.use_silu");
  }
}
