#include "engine/vision/image_decode.h"

#include <png.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <xxhash.h>

#include <cstring>
#include <memory>

namespace tandem::vision {

namespace {

[[noreturn]] void fail(const std::string& why) { throw image_error(why); }

void check_canvas(image_format f, uint64_t w, uint64_t h, const image_limits& limits) {
  const std::string what = std::string(format_name(f)) + " image of " + std::to_string(w) + "x" + std::to_string(h);
  if (w == 0 || h == 0) fail(what + " has no pixels");
  if (w > limits.max_side || h > limits.max_side) {
    fail(what + " is larger than " + std::to_string(limits.max_side) + " pixels on a side");
  }
  if (w * h > limits.max_pixels) fail(what + " has more than " + std::to_string(limits.max_pixels) + " pixels");
}

void check_size(std::string_view bytes, const image_limits& limits) {
  if (bytes.size() > limits.max_bytes) {
    fail("the image is " + std::to_string(bytes.size()) + " bytes, more than " + std::to_string(limits.max_bytes));
  }
}

// libpng's simplified API reports errors through image.message and cleans up after itself.
struct png_reader {
  png_image img{};
  png_reader() { img.version = PNG_IMAGE_VERSION; }
  ~png_reader() { png_image_free(&img); }
  png_reader(const png_reader&) = delete;
  png_reader& operator=(const png_reader&) = delete;
  void begin(std::string_view bytes) {
    if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) {
      fail(std::string("malformed PNG: ") + img.message);
    }
  }
};

struct tj_handle {
  tjhandle h = tjInitDecompress();
  tj_handle() = default;
  ~tj_handle() {
    if (h) tjDestroy(h);
  }
  tj_handle(const tj_handle&) = delete;
  tj_handle& operator=(const tj_handle&) = delete;
  [[noreturn]] void fail_with(const char* stage) const { fail(std::string("malformed JPEG (") + stage + "): " + tjGetErrorStr2(h)); }
};

const auto* as_bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

image_header png_header(std::string_view bytes, const image_limits& limits, png_reader& r) {
  r.begin(bytes);
  check_canvas(image_format::png, r.img.width, r.img.height, limits);
  return {image_format::png, r.img.width, r.img.height};
}

image_header jpeg_header(std::string_view bytes, const image_limits& limits, const tj_handle& tj) {
  if (!tj.h) fail("the JPEG decoder could not start");
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, as_bytes(bytes), bytes.size(), &w, &h, &subsamp, &colorspace) != 0) {
    tj.fail_with("header");
  }
  check_canvas(image_format::jpeg, static_cast<uint64_t>(w), static_cast<uint64_t>(h), limits);
  return {image_format::jpeg, static_cast<uint32_t>(w), static_cast<uint32_t>(h)};
}

image_header webp_header(std::string_view bytes, const image_limits& limits) {
  int w = 0, h = 0;
  if (!WebPGetInfo(as_bytes(bytes), bytes.size(), &w, &h)) fail("malformed or unsupported WebP");
  check_canvas(image_format::webp, static_cast<uint64_t>(w), static_cast<uint64_t>(h), limits);
  return {image_format::webp, static_cast<uint32_t>(w), static_cast<uint32_t>(h)};
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string decode_base64(std::string_view s) {
  std::string out;
  out.reserve(s.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = base64_value(c);
    if (v < 0 || padding) fail("the data: URI's base64 payload is malformed");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (padding > 2 || bits >= 6) fail("the data: URI's base64 payload is malformed");
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode_percent(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) fail("the data: URI's payload has a malformed %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

}  // namespace

const char* format_name(image_format f) {
  switch (f) {
    case image_format::png: return "PNG";
    case image_format::jpeg: return "JPEG";
    case image_format::webp: return "WebP";
    case image_format::unknown: break;
  }
  return "unknown";
}

image_format sniff_format(std::string_view b) {
  static constexpr unsigned char kPng[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return image_format::png;
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xff && static_cast<unsigned char>(b[1]) == 0xd8 &&
      static_cast<unsigned char>(b[2]) == 0xff) {
    return image_format::jpeg;
  }
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return image_format::webp;
  return image_format::unknown;
}

image_header read_header(std::string_view bytes, const image_limits& limits) {
  check_size(bytes, limits);
  switch (sniff_format(bytes)) {
    case image_format::png: {
      png_reader r;
      return png_header(bytes, limits, r);
    }
    case image_format::jpeg: {
      tj_handle tj;
      return jpeg_header(bytes, limits, tj);
    }
    case image_format::webp: return webp_header(bytes, limits);
    case image_format::unknown: break;
  }
  fail("not a PNG, JPEG or WebP image");
}

rgb_image decode_image(std::string_view bytes, const image_limits& limits) {
  check_size(bytes, limits);
  rgb_image out;
  switch (sniff_format(bytes)) {
    case image_format::png: {
      png_reader r;
      const image_header h = png_header(bytes, limits, r);
      // RGBA then the alpha dropped, as stb_image's 3-channel load does (no compositing).
      r.img.format = PNG_FORMAT_RGBA;
      std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(r.img));
      if (!png_image_finish_read(&r.img, nullptr, rgba.data(), 0, nullptr)) {
        fail(std::string("malformed PNG: ") + r.img.message);
      }
      out.width = h.width;
      out.height = h.height;
      out.rgb.resize(uint64_t{h.width} * h.height * 3);
      for (uint64_t i = 0, n = uint64_t{h.width} * h.height; i < n; ++i) {
        std::memcpy(&out.rgb[3 * i], &rgba[4 * i], 3);
      }
      return out;
    }
    case image_format::jpeg: {
      tj_handle tj;
      const image_header h = jpeg_header(bytes, limits, tj);
      out.width = h.width;
      out.height = h.height;
      out.rgb.resize(uint64_t{h.width} * h.height * 3);
      // A truncated or corrupt stream is an error, not a grey-filled picture; progressive
      // files may not make the decoder run more than 500 scans.
      int flags = TJFLAG_STOPONWARNING;
#ifdef TJFLAG_LIMITSCANS
      flags |= TJFLAG_LIMITSCANS;
#endif
      if (tjDecompress2(tj.h, as_bytes(bytes), bytes.size(), out.rgb.data(), static_cast<int>(h.width), 0,
                        static_cast<int>(h.height), TJPF_RGB, flags) != 0) {
        tj.fail_with("data");
      }
      return out;
    }
    case image_format::webp: {
      const image_header h = webp_header(bytes, limits);
      out.width = h.width;
      out.height = h.height;
      out.rgb.resize(uint64_t{h.width} * h.height * 3);
      if (!WebPDecodeRGBInto(as_bytes(bytes), bytes.size(), out.rgb.data(), out.rgb.size(),
                             static_cast<int>(h.width * 3))) {
        fail("malformed or unsupported WebP (animated WebP is not supported)");
      }
      return out;
    }
    case image_format::unknown: break;
  }
  fail("not a PNG, JPEG or WebP image");
}

std::string decode_data_uri(std::string_view uri, uint64_t max_bytes) {
  if (!starts_with_ci(uri, "data:")) fail("not a data: URI");
  const size_t comma = uri.find(',');
  if (comma == std::string_view::npos) fail("the data: URI has no ',' before its payload");
  const std::string_view meta = uri.substr(5, comma - 5);
  const std::string_view payload = uri.substr(comma + 1);
  const bool base64 = meta.size() >= 7 && starts_with_ci(meta.substr(meta.size() - 7), ";base64");
  // Either encoding takes more than a byte per byte (base64 4/3, line breaks aside): a payload
  // twice the bound cannot fit and is refused before any work; the rest is checked exactly.
  if (payload.size() > 2 * max_bytes + 16) {
    fail("the data: URI's payload is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string bytes = base64 ? decode_base64(payload) : decode_percent(payload);
  if (bytes.size() > max_bytes) fail("the data: URI's payload is larger than " + std::to_string(max_bytes) + " bytes");
  return bytes;
}

pixel_hash hash_pixels(const rgb_image& img) {
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw std::bad_alloc();
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> guard(st, &XXH3_freeState);
  XXH3_128bits_reset(st);
  const uint32_t shape[2] = {img.width, img.height};
  XXH3_128bits_update(st, shape, sizeof shape);
  XXH3_128bits_update(st, img.rgb.data(), img.rgb.size());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  return {h.low64, h.high64};
}

}  // namespace tandem::vision
