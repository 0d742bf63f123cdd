// libFuzzer target: the GGUF reader and the model-config reader on arbitrary bytes.
// Any outcome but a clean parse or a gguf::format_error is a bug. Built by `make fuzz`.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = tandem::gguf::file::parse(std::span(reinterpret_cast<const std::byte*>(data), size));
    // Touch what a loader touches: every value and every tensor's bytes.
    volatile size_t sink = 0;
    for (const auto& [k, v] : f.metadata()) sink = sink + k.size() + v.to_string(4).size();
    for (const auto& t : f.tensors()) {
      if (t.nbytes > 0) sink = sink + static_cast<size_t>(t.data[0]) + static_cast<size_t>(t.data[t.nbytes - 1]);
    }
    (void)tandem::read_model_config(f);
  } catch (const tandem::gguf::format_error&) {
  }
  return 0;
}
