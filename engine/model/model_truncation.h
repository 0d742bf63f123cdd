// A layer-truncated copy of a Llama-family GGUF model: the first n blocks, the embedding,
// the output norm and head, and every metadata key (block_count set to n). Sharing the
// target's vocabulary and its lower layers, it makes a cheap draft model for speculative
// decoding (`tandem truncate-model`).
#pragma once

#include <cstdint>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"

namespace tandem {

// Throws std::invalid_argument if n_layers is 0 or not below the model's block count.
gguf::writer truncate_layers(const gguf::file& f, uint32_t n_layers);

}  // namespace tandem
