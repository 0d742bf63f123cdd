// libFuzzer target: image decoding (engine/vision/image_decode) on arbitrary bytes, with the
// server's bounds made small so that a large declared canvas is refused rather than decoded.
// Any outcome but an image of the declared shape or an image_error is a bug. Built by `make fuzz`.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/vision/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tandem::vision::image_limits limits;
  limits.max_side = 1024;
  limits.max_pixels = 512 * 512;
  try {
    const auto img = tandem::vision::decode_image(bytes, limits);
    if (img.rgb.size() != size_t{img.width} * img.height * 3) __builtin_trap();
    (void)tandem::vision::hash_pixels(img);
  } catch (const tandem::vision::image_error&) {
  }
  try {
    (void)tandem::vision::decode_data_uri(bytes, 1 << 16);
  } catch (const tandem::vision::image_error&) {
  }
  return 0;
}
