#include "engine/prompt_encoder.h"

#include <stdexcept>
#include <string>

namespace tandem {
namespace {

// U+E000 <index> U+E001: private-use code points no template emits by itself.
std::string placeholder(size_t i) { return "\xEE\x80\x80" + std::to_string(i) + "\xEE\x80\x81"; }

// What the template inserts for a message's content (Llama 3's template trims it).
std::string rendered_content(const chat_template& tmpl, const std::string& content) {
  if (tmpl.kind() != chat_template::family::llama3) return content;
  const auto b = content.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  const auto e = content.find_last_not_of(" \t\n\r");
  return content.substr(b, e - b + 1);
}

void append(std::vector<token_id>& out, const std::vector<token_id>& more) { out.insert(out.end(), more.begin(), more.end()); }

}  // namespace

std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl, std::span<const chat_message> messages,
                                  bool add_generation_prompt) {
  std::vector<chat_message> masked(messages.begin(), messages.end());
  for (size_t i = 0; i < masked.size(); ++i) masked[i].content = placeholder(i);
  const std::string skeleton = tmpl.render(masked, add_generation_prompt);

  std::vector<token_id> out;
  if (tok.add_bos() && !tmpl.renders_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  std::string check;  // the skeleton with the contents put back: must equal a plain render
  size_t pos = 0;
  for (size_t i = 0; i < masked.size(); ++i) {
    const std::string mark = placeholder(i);
    const size_t at = skeleton.find(mark, pos);
    if (at == std::string::npos) continue;  // the template dropped this message
    const std::string_view templ(skeleton.data() + pos, at - pos);
    const std::string content = rendered_content(tmpl, messages[i].content);
    append(out, tok.encode(templ, false, true));
    append(out, tok.encode(content, false, false));
    check.append(templ).append(content);
    pos = at + mark.size();
  }
  const std::string_view tail(skeleton.data() + pos, skeleton.size() - pos);
  append(out, tok.encode(tail, false, true));
  check.append(tail);
  if (check != tmpl.render(messages, add_generation_prompt)) {
    throw std::logic_error("chat template " + std::string(tmpl.name()) + " transforms message content in a way the "
                           "prompt encoder does not know");
  }
  return out;
}

std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text) { return tok.encode(text, true, false); }

}  // namespace tandem
