// Images as requests carry them: a data: URI (or raw bytes) in PNG, JPEG or WebP, decoded by
// the libraries Debian ships (libpng, libjpeg-turbo's TurboJPEG, libwebp) into 8-bit RGB.
//
// Every image is bounded before a pixel is decoded: the encoded bytes, then the width and
// height the header declares (each side and their product), so a decompression bomb (a small
// file declaring a huge canvas) costs a header read. A malformed, truncated or unsupported
// image throws image_error with a message fit for a 400; nothing here aborts or reads out of
// bounds on hostile input (tests/unit/image_decode_test.cpp; tests/fuzz).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::vision {

struct image_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What one image may make the server spend (serve's --image-max-* flags).
struct image_limits {
  uint64_t max_bytes = uint64_t{20} << 20;  // encoded size
  uint32_t max_side = 8192;                 // declared width or height
  uint64_t max_pixels = uint64_t{4096} * 4096;  // declared width x height (RGB: 3 bytes each)
};

enum class image_format { png, jpeg, webp, unknown };
const char* format_name(image_format f);

// By the file's magic bytes, never by a declared MIME type.
image_format sniff_format(std::string_view bytes);

// Row-major 8-bit RGB, pixel (x, y) at rgb[3 * (y * width + x)].
struct rgb_image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
};

// The width and height the header declares, checked against `limits` (throws past them).
struct image_header {
  image_format format = image_format::unknown;
  uint32_t width = 0;
  uint32_t height = 0;
};
image_header read_header(std::string_view bytes, const image_limits& limits);

// Decodes the whole image (alpha dropped, grey and palette expanded to RGB).
rgb_image decode_image(std::string_view bytes, const image_limits& limits);

// "data:[<mime>][;base64],<payload>" -> the payload's bytes (base64 or percent-encoded).
// Throws image_error when it is not a data: URI, the payload is malformed, or it decodes to
// more than max_bytes (checked before decoding, from the payload's length).
std::string decode_data_uri(std::string_view uri, uint64_t max_bytes);

// A 128-bit hash of the decoded pixels and their shape: what identifies an image to the
// prefix cache (the same pixels in any container are the same image).
struct pixel_hash {
  uint64_t lo = 0, hi = 0;
  bool operator==(const pixel_hash& o) const { return lo == o.lo && hi == o.hi; }
};
pixel_hash hash_pixels(const rgb_image& img);

}  // namespace tandem::vision
