#include "engine/vision/resample.h"

#include <algorithm>
#include <cmath>

namespace tandem::vision {

namespace {

constexpr int kPrecisionBits = 22;  // 32 bits - 8 for the pixel - 2 of headroom for the sum

double support_of(resample_filter f) {
  switch (f) {
    case resample_filter::bilinear: return 1.0;
    case resample_filter::bicubic: return 2.0;
    case resample_filter::lanczos: return 3.0;
  }
  return 1.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  const double px = x * 3.14159265358979323846;
  return std::sin(px) / px;
}

double weight_at(resample_filter f, double x) {
  switch (f) {
    case resample_filter::lanczos: return (x >= -3.0 && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
    case resample_filter::bilinear: x = std::fabs(x); return x < 1.0 ? 1.0 - x : 0.0;
    case resample_filter::bicubic: {
      constexpr double a = -0.5;  // Pillow's choice (PyTorch and OpenCV take -0.75)
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
  }
  return 0.0;
}

// One axis's filter: output pixel o reads `count[o]` inputs from `first[o]` with the fixed-point
// weights taps[o * width .. + count[o]].
struct axis_filter {
  int width = 0;  // taps per output pixel (the widest support)
  std::vector<int> first, count;
  std::vector<int32_t> taps;
};

axis_filter make_filter(int in, int out, resample_filter f) {
  const double scale = static_cast<double>(in) / out;
  const double filter_scale = scale < 1.0 ? 1.0 : scale;  // shrinking widens the filter
  const double support = support_of(f) * filter_scale;
  axis_filter a;
  a.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(out);
  a.count.resize(out);
  a.taps.assign(static_cast<size_t>(out) * a.width, 0);
  std::vector<double> w(a.width);
  for (int o = 0; o < out; ++o) {
    const double center = (o + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);  // truncation toward zero, as Pillow
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in) hi = in;
    const int n = hi - lo;
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += w[i] = weight_at(f, (i + lo - center + 0.5) / filter_scale);
    for (int i = 0; i < n; ++i) {
      const double v = sum != 0.0 ? w[i] / sum : w[i];
      a.taps[static_cast<size_t>(o) * a.width + i] =
          static_cast<int32_t>(v * (1 << kPrecisionBits) + (v < 0 ? -0.5 : 0.5));
    }
    a.first[o] = lo;
    a.count[o] = n;
  }
  return a;
}

uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// dst[i] = filtered src along one axis; `step` is the distance between neighbours on that
// axis, `lines` x `line_step` walks the other axis.
void apply(const axis_filter& a, const uint8_t* src, size_t step, uint8_t* dst, size_t dst_step, int out,
           int lines, size_t src_line_step, size_t dst_line_step) {
  for (int l = 0; l < lines; ++l) {
    const uint8_t* s = src + l * src_line_step;
    uint8_t* d = dst + l * dst_line_step;
    for (int o = 0; o < out; ++o) {
      const int32_t* k = &a.taps[static_cast<size_t>(o) * a.width];
      const uint8_t* p = s + a.first[o] * step;
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int i = 0; i < a.count[o]; ++i, p += step) {
        for (int c = 0; c < 3; ++c) acc[c] += p[c] * k[i];
      }
      for (int c = 0; c < 3; ++c) d[o * dst_step + c] = clip8(acc[c]);
    }
  }
}

}  // namespace

rgb_image resize(const rgb_image& src, uint32_t width, uint32_t height, resample_filter filter) {
  if (width == 0 || height == 0 || width > 65536 || height > 65536) {
    throw image_error("resize target " + std::to_string(width) + "x" + std::to_string(height) + " out of range");
  }
  // Each pass reads the last one's output (the source until one ran); no pass copies the source.
  rgb_image horizontal;
  const rgb_image* cur = &src;
  if (width != src.width) {  // rows: [height][width][3]
    const axis_filter a = make_filter(static_cast<int>(src.width), static_cast<int>(width), filter);
    horizontal = {width, src.height, std::vector<uint8_t>(size_t{width} * src.height * 3)};
    apply(a, src.rgb.data(), 3, horizontal.rgb.data(), 3, static_cast<int>(width), static_cast<int>(src.height),
          size_t{src.width} * 3, size_t{width} * 3);
    cur = &horizontal;
  }
  if (height == src.height) {
    if (cur == &src) return src;  // nothing to do: a copy
    return horizontal;
  }
  // columns: neighbours a row apart
  const axis_filter a = make_filter(static_cast<int>(src.height), static_cast<int>(height), filter);
  rgb_image out{cur->width, height, std::vector<uint8_t>(size_t{cur->width} * height * 3)};
  apply(a, cur->rgb.data(), size_t{cur->width} * 3, out.rgb.data(), size_t{cur->width} * 3, static_cast<int>(height),
        static_cast<int>(cur->width), 3, 3);
  return out;
}

rgb_image resize_padded(const rgb_image& src, uint32_t width, uint32_t height, resample_filter filter,
                        std::array<uint8_t, 3> pad) {
  if (src.width == width && src.height == height) return src;
  // float, as libmtmd computes it, so both pick the same inner size
  const float scale = std::min(static_cast<float>(width) / src.width, static_cast<float>(height) / src.height);
  const auto fit = [](uint32_t side, float s, uint32_t most) {
    const auto v = static_cast<uint32_t>(std::ceil(side * s));
    return v < 1 ? 1 : v > most ? most : v;
  };
  const uint32_t w = fit(src.width, scale, width), h = fit(src.height, scale, height);
  const rgb_image inner = resize(src, w, h, filter);
  rgb_image out{width, height, std::vector<uint8_t>(size_t{width} * height * 3)};
  for (size_t i = 0; i < size_t{width} * height; ++i) std::copy(pad.begin(), pad.end(), &out.rgb[3 * i]);
  const uint32_t x0 = (width - w) / 2, y0 = (height - h) / 2;
  for (uint32_t y = 0; y < h; ++y) {
    std::copy_n(&inner.rgb[size_t{y} * w * 3], size_t{w} * 3, &out.rgb[(size_t{y0 + y} * width + x0) * 3]);
  }
  return out;
}

std::vector<float> normalize_planar(const rgb_image& img, const std::array<float, 3>& mean,
                                    const std::array<float, 3>& std) {
  const size_t n = size_t{img.width} * img.height;
  std::vector<float> out(3 * n);
  for (size_t i = 0; i < n; ++i) {
    for (int c = 0; c < 3; ++c) out[c * n + i] = (static_cast<float>(img.rgb[3 * i + c]) / 255.0f - mean[c]) / std[c];
  }
  return out;
}

}  // namespace tandem::vision
