// The limits the request parsers' tests (openai_request_test, responses_test) parse under:
// the default model's (SmolLM2-135M: 49,152 tokens, 8,192 positions), the server's defaults
// for the rest.
#pragma once

#include "net/openai/openai_request.h"

namespace tandem::testing {

inline net::api_limits default_model_limits() {
  net::api_limits l;
  l.vocab_size = 49152;
  l.max_model_len = 8192;
  return l;
}

}  // namespace tandem::testing
