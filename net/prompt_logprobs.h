// A prompt's scores (sampling_options::prompt_logprobs; the first delta's
// generation_delta::prompt_logprobs: every prompt token, the first without a score) in the
// two shapes clients read:
//
//   vLLM's prompt_logprobs  [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...]
//                           per token after the first: its own entry, then its alternatives
//   echo on /v1/completions the legacy logprobs arrays' prompt part (tokens, token_logprobs,
//                           top_logprobs), null for the first token; an alternatives object
//                           holds the prompt token itself too, as vLLM's does
#pragma once

#include <boost/json.hpp>
#include <span>
#include <string>

#include "tandem/api.h"

namespace tandem {
class tokenizer;
}

namespace tandem::net {

// One token's text for a JSON string (invalid UTF-8 bytes as U+FFFD).
std::string token_text(const tokenizer& tok, int32_t token);

boost::json::array prompt_logprobs_json(const tokenizer& tok, std::span<const output_logprob> prompt);

// /v1/completions' logprobs object: {tokens, token_logprobs, top_logprobs}.
struct legacy_logprobs {
  boost::json::array tokens, token_logprobs, top_logprobs;
  boost::json::object take() {
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(token_logprobs)},
            {"top_logprobs", std::move(top_logprobs)}};
  }
};
// Appends the prompt's part (echo with logprobs).
void append_prompt(const tokenizer& tok, std::span<const output_logprob> prompt, legacy_logprobs& out);

}  // namespace tandem::net
