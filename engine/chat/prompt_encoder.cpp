#include "engine/chat/prompt_encoder.h"

namespace tandem {

std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, const chat_render_options& opts) {
  size_t n_markers = 0;
  return encode_chat(tok, tmpl, messages, opts, {}, {}, n_markers);
}

std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, const chat_render_options& opts,
                                  std::string_view marker,
                                  const std::function<void(size_t, std::vector<token_id>&)>& on_marker,
                                  size_t& n_markers) {
  n_markers = 0;
  const auto segments = tmpl.render_segments(messages, opts);
  // BOS as the model says, unless the template wrote it already.
  const bool starts_with_bos = !segments.empty() && !segments[0].is_content && !tmpl.bos_text().empty() &&
                               segments[0].text.starts_with(tmpl.bos_text());
  std::vector<token_id> out;
  if (tok.add_bos() && !starts_with_bos && tok.bos() >= 0) out.push_back(tok.bos());
  const auto add_text = [&](std::string_view text, bool is_content) {
    if (text.empty()) return;
    // Template markup: its control-token text becomes control tokens. Caller data: never.
    const auto ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/!is_content);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  for (const auto& seg : segments) {
    if (!seg.is_content || marker.empty()) {
      add_text(seg.text, seg.is_content);
      continue;
    }
    std::string_view rest = seg.text;
    for (size_t at = rest.find(marker); at != std::string_view::npos; at = rest.find(marker)) {
      add_text(rest.substr(0, at), true);
      on_marker(n_markers++, out);
      rest.remove_prefix(at + marker.size());
    }
    add_text(rest, true);
  }
  return out;
}

std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, bool add_generation_prompt) {
  chat_render_options opts;
  opts.add_generation_prompt = add_generation_prompt;
  return encode_chat(tok, tmpl, messages, opts);
}

std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text) {
  return tok.encode(text, true, false);
}

std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text, bool parse_special) {
  if (!parse_special) return encode_prompt(tok, text);
  std::vector<token_id> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  // A prompt that writes BOS itself gets no second one.
  if (ids.size() >= 2 && tok.add_bos() && ids[0] == tok.bos() && ids[1] == tok.bos()) ids.erase(ids.begin());
  return ids;
}

}  // namespace tandem
