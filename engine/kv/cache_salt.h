// A sequence's prefix-cache salt: what makes two equal token runs hold different KV, so that
// they never share a block (block_pool::root_for seeds each chain of block hashes with it).
//
//   group       the tenant's prefix-cache group (tenants stay apart; a shared group shares)
//   model       the weights' identity (gguf::model_identity): a router naming its nodes'
//               blocks, or a cache that outlives a model, never mixes two models
//   adapter     the adapter applied over the weights (a LoRA's id; empty: none)
//   input_hash  a hash of non-token input the tokens stand for (an image's placeholder
//               tokens are equal for every image; 0: none)
//
// A keyed hash: the scheduler draws the key at random (a cluster's nodes and router share
// one), so no client can compute another group's block hashes (vLLM's client-set
// cache_salt can be). Everything empty or 0: salt 0, the unsalted chain.
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem {

struct cache_salt_input {
  std::string_view group = {};
  uint64_t model = 0;
  std::string_view adapter = {};
  uint64_t input_hash = 0;
};

uint64_t cache_salt(const cache_salt_input& in, uint64_t key);

}  // namespace tandem
