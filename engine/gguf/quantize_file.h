// A whole GGUF model into another file type, as llama-quantize does it: every tensor the
// mixture rule (quant_mixture.h) gives a new type is converted to floats (dequantized when
// it is quantized, which needs allow_requantize) and quantized row by row; tensors that keep
// their type are copied byte for byte. Metadata is copied, with general.file_type and
// general.quantization_version set; tensors are written in llama.cpp's order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quant_mixture.h"

namespace tandem::gguf {

struct quantize_options {
  bool allow_requantize = false;
  unsigned threads = 0;  // 0: one per hardware thread
  // Called once per tensor with (name, old type, new type), before it is converted.
  std::function<void(const std::string&, tensor_type, tensor_type)> on_tensor;
};

// The converted model (metadata and tensors), ready to write. Throws std::runtime_error naming
// the tensor when a quantized tensor would need requantizing and allow_requantize is off.
writer quantize_model(const file& in, const file_type& ft, const quantize_options& options);

}  // namespace tandem::gguf
