#include "net/prompt_logprobs.h"

#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::net {
namespace json = boost::json;

std::string token_text(const tokenizer& tok, int32_t token) {
  return utf8::replace_invalid(tok.decode(std::vector<token_id>{token}, false));
}

json::array prompt_logprobs_json(const tokenizer& tok, std::span<const output_logprob> prompt) {
  json::array out;
  for (const auto& lp : prompt) {
    if (lp.rank == 0) {  // the first token: nothing precedes it
      out.emplace_back(nullptr);
      continue;
    }
    json::object entry;
    entry[std::to_string(lp.token)] =
        json::object{{"logprob", lp.logprob}, {"rank", lp.rank}, {"decoded_token", token_text(tok, lp.token)}};
    for (size_t k = 0; k < lp.top_ids.size(); ++k) {
      const std::string id = std::to_string(lp.top_ids[k]);
      if (entry.contains(id)) continue;  // the prompt token is among its alternatives
      entry[id] = json::object{{"logprob", lp.top_logprobs[k]},
                               {"rank", static_cast<int64_t>(k) + 1},
                               {"decoded_token", token_text(tok, lp.top_ids[k])}};
    }
    out.emplace_back(std::move(entry));
  }
  return out;
}

void append_prompt(const tokenizer& tok, std::span<const output_logprob> prompt, legacy_logprobs& out) {
  for (const auto& lp : prompt) {
    out.tokens.emplace_back(json::string(token_text(tok, lp.token)));
    if (lp.rank == 0) {
      out.token_logprobs.emplace_back(nullptr);
      out.top_logprobs.emplace_back(nullptr);
      continue;
    }
    out.token_logprobs.emplace_back(lp.logprob);
    json::object top;
    for (size_t k = 0; k < lp.top_ids.size(); ++k) top[token_text(tok, lp.top_ids[k])] = lp.top_logprobs[k];
    top[token_text(tok, lp.token)] = lp.logprob;
    out.top_logprobs.emplace_back(std::move(top));
  }
}

}  // namespace tandem::net
