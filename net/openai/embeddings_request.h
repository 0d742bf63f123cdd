// POST /v1/embeddings (OpenAI's shape) and POST /v1/rerank, /rerank (the Jina/Cohere shape
// llama-server and vLLM take) as plain C++: the body's checks into an embeddings request
// (generate_request::embed, actors/embedder.h), and the answer's JSON from the vectors the
// runtime returned. No Beast and no waiting here (embeddings_route.h waits).
//
//   embeddings  input: "text" | ["text", ...] | [id, ...] | [[id, ...], ...] (1..2048 inputs)
//               encoding_format: "float" (default) | "base64" (little-endian float32)
//               dimensions: 1..width (the first values, renormalised); model, user: accepted
//   rerank      query: "text"; documents: ["text", ...] (1..2048; {"text": ...} objects too)
//               top_n: 1.. (default all); return_documents: bool (default true, as Jina)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/api_error.h"
#include "tandem/api.h"

namespace tandem::net {

inline constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request

struct embeddings_call {
  generate_request req;  // embed set, with the inputs (the caller adds the key and sink)
  std::string model;     // as given ("" = none)
  bool base64 = false;
  size_t top_n = 0;  // rerank: results kept (all when 0)
  bool return_documents = true;
};

// Throws api_error 400 naming the field at fault.
embeddings_call parse_embeddings_request(std::string_view body);
embeddings_call parse_rerank_request(std::string_view body);

// One input's answer as the runtime gave it (generation_delta: index, embedding).
struct embedding_result {
  uint32_t index = 0;
  std::vector<float> values;  // an embedding, or {score} for rerank
};

// The OpenAI list: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}, data in input order.
std::string embeddings_body(const embeddings_call& call, std::vector<embedding_result> results,
                            uint32_t prompt_tokens, const std::string& served_model);
// {"id", "model", "results": [{"index", "relevance_score", "document": {"text"}}], "usage"},
// results by score, highest first, cut to top_n.
std::string rerank_body(const embeddings_call& call, std::vector<embedding_result> results, uint32_t prompt_tokens,
                        const std::string& served_model);

// Standard base64 of the values' little-endian float32 bytes (OpenAI's encoding_format base64).
std::string base64_floats(const std::vector<float>& values);

}  // namespace tandem::net
