#include "engine/chat/prompt_encoder.h"

namespace tandem {

std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, bool add_generation_prompt) {
  std::vector<token_id> out;
  if (tok.add_bos() && !tmpl.renders_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  for (const auto& seg : tmpl.render_segments(messages, add_generation_prompt)) {
    // Template markup: its control-token text becomes control tokens. Message content: never.
    const auto ids = tok.encode(seg.text, /*add_special=*/false, /*parse_special=*/!seg.is_content);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text) {
  return tok.encode(text, true, false);
}

}  // namespace tandem
