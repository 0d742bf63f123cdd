// engine/vision/image_decode: images made here by the same libraries' encoders decode to their
// pixels; every hostile shape (truncated, a huge declared canvas, a decompression bomb, bytes
// that are no image, mutated files) is an image_error, never a crash or an allocation of what
// the header claims.
#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <cstring>
#include <random>

#include "engine/vision/image_decode.h"

using namespace tandem::vision;

namespace {

std::vector<uint8_t> gradient(uint32_t w, uint32_t h, int channels) {
  std::vector<uint8_t> px(size_t{w} * h * channels);
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) px[(size_t{y} * w + x) * channels + c] = static_cast<uint8_t>(x * 7 + y * 3 + c * 50);
  return px;
}

std::string encode_png(const std::vector<uint8_t>& px, uint32_t w, uint32_t h, uint32_t format) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_get_memory_size(img, size, 0, px.data(), 0, nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr));
  out.resize(size);
  return out;
}

std::string encode_jpeg(const std::vector<uint8_t>& rgb, uint32_t w, uint32_t h, int quality) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, rgb.data(), static_cast<int>(w), 0, static_cast<int>(h), TJPF_RGB, &buf, &size, TJSAMP_444,
                        quality, 0),
            0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

std::string encode_webp_lossless(const std::vector<uint8_t>& rgb, uint32_t w, uint32_t h) {
  uint8_t* buf = nullptr;
  const size_t size = WebPEncodeLosslessRGB(rgb.data(), static_cast<int>(w), static_cast<int>(h), static_cast<int>(w * 3), &buf);
  std::string out(reinterpret_cast<char*>(buf), size);
  WebPFree(buf);
  return out;
}

uint32_t crc32(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (const unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_chunk(std::string& png, const std::string& type_and_data) {
  put_be32(png, static_cast<uint32_t>(type_and_data.size() - 4));
  png += type_and_data;
  put_be32(png, crc32(type_and_data));
}

// A PNG whose well-formed IHDR declares w x h, followed by a few bytes of pixel data.
std::string png_declaring(uint32_t w, uint32_t h) {
  std::string body = "IHDR";
  put_be32(body, w);
  put_be32(body, h);
  body += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, no filter method, no interlace
  std::string out("\x89PNG\r\n\x1a\n", 8);
  put_chunk(out, body);
  put_chunk(out, std::string("IDAT\x78\x9c\x63\x00\x00\x00\x01\x00\x01", 13));
  put_chunk(out, "IEND");
  return out;
}

}  // namespace

TEST(ImageDecode, PngRgbRgbaAndGreyDecodeToTheirPixels) {
  const auto rgb = gradient(37, 21, 3);
  rgb_image a = decode_image(encode_png(rgb, 37, 21, PNG_FORMAT_RGB), {});
  EXPECT_EQ(a.width, 37u);
  EXPECT_EQ(a.height, 21u);
  EXPECT_EQ(a.rgb, rgb);

  auto rgba = gradient(8, 5, 4);
  for (size_t i = 3; i < rgba.size(); i += 4) rgba[i] = static_cast<uint8_t>(i);  // alpha varies: dropped, not composited
  rgb_image b = decode_image(encode_png(rgba, 8, 5, PNG_FORMAT_RGBA), {});
  for (size_t i = 0; i < 40; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(b.rgb[i * 3 + c], rgba[i * 4 + c]) << i;
  }

  const auto grey = gradient(6, 4, 1);
  rgb_image g = decode_image(encode_png(grey, 6, 4, PNG_FORMAT_GRAY), {});
  for (size_t i = 0; i < 24; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(g.rgb[i * 3 + c], grey[i]) << i;
  }
}

TEST(ImageDecode, JpegDecodesCloseToItsSource) {
  const auto rgb = gradient(64, 48, 3);
  rgb_image img = decode_image(encode_jpeg(rgb, 64, 48, 100), {});
  ASSERT_EQ(img.width, 64u);
  ASSERT_EQ(img.height, 48u);
  double err = 0;
  for (size_t i = 0; i < rgb.size(); ++i) err += std::abs(int(img.rgb[i]) - int(rgb[i]));
  EXPECT_LT(err / rgb.size(), 4.0);
}

TEST(ImageDecode, LosslessWebpDecodesExactlyAndHashesAsThePng) {
  const auto rgb = gradient(19, 23, 3);
  rgb_image w = decode_image(encode_webp_lossless(rgb, 19, 23), {});
  EXPECT_EQ(w.rgb, rgb);
  rgb_image p = decode_image(encode_png(rgb, 19, 23, PNG_FORMAT_RGB), {});
  EXPECT_EQ(hash_pixels(w), hash_pixels(p));  // the same pixels in any container: one image
  auto other = rgb;
  other[100] ^= 1;
  EXPECT_FALSE(hash_pixels(p) == hash_pixels(decode_image(encode_png(other, 19, 23, PNG_FORMAT_RGB), {})));
  // The same bytes in another shape are another image.
  EXPECT_FALSE(hash_pixels(p) == hash_pixels(decode_image(encode_png(rgb, 23, 19, PNG_FORMAT_RGB), {})));
}

TEST(ImageDecode, TruncatedImagesAreErrors) {
  const auto rgb = gradient(64, 64, 3);
  for (const std::string& full : {encode_png(rgb, 64, 64, PNG_FORMAT_RGB), encode_jpeg(rgb, 64, 64, 90),
                                  encode_webp_lossless(rgb, 64, 64)}) {
    for (const size_t keep : {full.size() / 2, full.size() * 3 / 4, size_t{20}, size_t{9}}) {
      EXPECT_THROW(decode_image(full.substr(0, keep), {}), image_error) << format_name(sniff_format(full)) << " kept " << keep;
    }
  }
}

TEST(ImageDecode, AHugeDeclaredCanvasIsRefusedFromTheHeader) {
  const std::string huge = png_declaring(20000, 20000);
  try {
    read_header(huge, {});
    FAIL() << "20000x20000 passed";
  } catch (const image_error& e) {
    EXPECT_NE(std::string(e.what()).find("20000x20000"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_image(huge, {}), image_error);
  // Within each side but over the pixel bound.
  image_limits small;
  small.max_pixels = 100 * 100;
  EXPECT_THROW(read_header(png_declaring(200, 200), small), image_error);
  EXPECT_EQ(read_header(png_declaring(100, 100), small).width, 100u);
}

TEST(ImageDecode, ADecompressionBombCostsAHeaderRead) {
  // 6000 x 6000 black pixels deflate to a few tens of KB but would decode to 108 MB.
  const uint32_t side = 6000;
  const std::string bomb = encode_png(std::vector<uint8_t>(size_t{side} * side, 0), side, side, PNG_FORMAT_GRAY);
  ASSERT_LT(bomb.size(), 1u << 20);
  try {
    decode_image(bomb, {});
    FAIL() << "the bomb decoded";
  } catch (const image_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than"), std::string::npos) << e.what();
  }
}

TEST(ImageDecode, BytesThatAreNoImageAndOversizedFilesAreErrors) {
  EXPECT_THROW(decode_image("GIF89a.....", {}), image_error);
  EXPECT_THROW(decode_image("", {}), image_error);
  EXPECT_THROW(decode_image("<svg xmlns='http://www.w3.org/2000/svg'/>", {}), image_error);
  image_limits tiny;
  tiny.max_bytes = 100;
  const auto rgb = gradient(64, 64, 3);
  EXPECT_THROW(decode_image(encode_png(rgb, 64, 64, PNG_FORMAT_RGB), tiny), image_error);
}

TEST(ImageDecode, MutatedFilesDecodeOrFailCleanly) {
  const auto rgb = gradient(32, 32, 3);
  std::mt19937 rng(7);
  for (const std::string& good : {encode_png(rgb, 32, 32, PNG_FORMAT_RGB), encode_jpeg(rgb, 32, 32, 80),
                                  encode_webp_lossless(rgb, 32, 32)}) {
    for (int i = 0; i < 400; ++i) {
      std::string bad = good;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
      try {
        rgb_image img = decode_image(bad, {});
        EXPECT_EQ(img.rgb.size(), size_t{img.width} * img.height * 3);
      } catch (const image_error&) {
      }
    }
  }
}

TEST(ImageDecode, DataUris) {
  EXPECT_EQ(decode_data_uri("data:image/png;base64,aGVsbG8gd29ybGQ=", 100), "hello world");
  EXPECT_EQ(decode_data_uri("DATA:image/png;BASE64,aGVsbG8gd29ybGQ", 100), "hello world");  // unpadded
  EXPECT_EQ(decode_data_uri("data:image/png;base64,aGVs\r\nbG8=", 100), "hello");
  EXPECT_EQ(decode_data_uri("data:,a%20b", 100), "a b");
  EXPECT_THROW(decode_data_uri("https://example.com/cat.png", 100), image_error);
  EXPECT_THROW(decode_data_uri("data:image/png;base64", 100), image_error);
  EXPECT_THROW(decode_data_uri("data:image/png;base64,aGV*bG8=", 100), image_error);
  EXPECT_THROW(decode_data_uri("data:image/png;base64,aGVsbG8=A", 100), image_error);  // data after padding
  EXPECT_THROW(decode_data_uri("data:,a%2", 100), image_error);
  EXPECT_THROW(decode_data_uri("data:image/png;base64,aGVsbG8gd29ybGQ=", 10), image_error);
  EXPECT_THROW(decode_data_uri("data:;base64," + std::string(1000, 'A'), 100), image_error);
}
