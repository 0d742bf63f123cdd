// Image resizing and normalization as vision encoders expect their input.
//
// resize() is the separable, fixed-point resampling Pillow's Image.resize does (and that
// llama.cpp's libmtmd reproduces, so the same image gives the same pixels here and there):
// horizontal pass then vertical, each output pixel a normalized filter over the input pixels
// under its support (widened by the scale when shrinking), weights rounded to 22 fractional
// bits, sums rounded and clamped to 8 bits.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/vision/image_decode.h"

namespace tandem::vision {

enum class resample_filter { bilinear, bicubic, lanczos };

// Throws image_error for a target side outside [1, 65536].
rgb_image resize(const rgb_image& src, uint32_t width, uint32_t height, resample_filter filter);

// Fits the image inside width x height keeping its aspect ratio (each side scaled by the
// smaller ratio, rounded up, at most the target), centred on a canvas of `pad` colour.
rgb_image resize_padded(const rgb_image& src, uint32_t width, uint32_t height, resample_filter filter,
                        std::array<uint8_t, 3> pad = {0, 0, 0});

// The encoder's input: channel-planar floats, plane c = (pixel / 255 - mean[c]) / std[c].
//   out: [3][height][width]
std::vector<float> normalize_planar(const rgb_image& img, const std::array<float, 3>& mean,
                                    const std::array<float, 3>& std);

}  // namespace tandem::vision
