// The id types every room of the engine, the actors and the GPU backend share.
//
//   token_id     a vocabulary index (GGUF vocabularies are int32-indexed)
//   seq_id       one sequence: one choice of one request, unique for the runtime's life
//   block_id     one KV block: an index into the block pool (and into the device's KV storage)
//   block_table  a sequence's blocks in position order: position p lives in block
//                table[p / block_size] at offset p % block_size
#pragma once

#include <cstdint>
#include <vector>

namespace tandem {

using token_id = int32_t;
using seq_id = uint64_t;
using block_id = uint32_t;
using block_table = std::vector<block_id>;

}  // namespace tandem
