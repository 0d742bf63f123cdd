// Chat templates: a list of messages -> the prompt text the model was trained on.
//
// GGUF files carry the template as Jinja source (tokenizer.chat_template). Tandem does not
// run Jinja: it recognises the known template families from the source and renders them
// natively, producing exactly what the Jinja template renders (checked against jinja2 in
// tests/unit/chat_template_test.cpp). An unrecognised template is an error at load; the
// caller may then name a family (the --chat-template NAME option).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

namespace gguf {
class file;
}

struct chat_message {
  std::string role;  // "system", "user", "assistant" (ChatML and Llama 3 take any role)
  std::string content;
};

// A run of rendered text: template markup (tokenize with special-token parsing, so its
// markers become control tokens) or text taken from a message's content (tokenize as plain
// text: the prompt-injection guard). Roles count as markup: validate them before rendering.
struct chat_segment {
  std::string text;
  bool is_content = false;
};

class chat_template {
 public:
  enum class family { chatml, llama3, llama2, mistral, zephyr };

  // The template of `f` (tokenizer.chat_template), or the family `override_name` names.
  // Throws std::runtime_error when the file has no template or an unrecognised one (the
  // message names --chat-template NAME and the known names), or the name is unknown.
  static chat_template from_gguf(const gguf::file& f, std::string_view override_name = "");
  // A family by name ("chatml", "llama3", "llama2", "mistral", "zephyr"), with the texts of
  // the model's BOS/EOS tokens (used by the families whose templates emit them).
  static chat_template by_name(std::string_view name, std::string bos_text = "", std::string eos_text = "");
  // Recognises the family of Jinja source `source`; throws like from_gguf when it cannot.
  static chat_template from_source(std::string_view source, std::string bos_text = "", std::string eos_text = "");
  static std::vector<std::string_view> known_names();

  // The prompt for `messages`; with add_generation_prompt it ends where the assistant's
  // reply begins. Throws std::invalid_argument for a message list the template rejects
  // (e.g. roles that do not alternate in Llama 2 / Mistral).
  std::string render(std::span<const chat_message> messages, bool add_generation_prompt) const;
  // The same text cut into markup and content segments (adjacent segments of one kind are
  // joined; no segment is empty). The concatenation equals render(). Content is as the
  // template inserts it (Llama 3 and Llama 2 strip surrounding whitespace).
  std::vector<chat_segment> render_segments(std::span<const chat_message> messages, bool add_generation_prompt) const;

  family kind() const { return family_; }
  std::string_view name() const;
  // Text of the token that ends an assistant turn (e.g. "<|im_end|>").
  const std::string& end_of_turn() const { return end_of_turn_; }
  // Strings at which generation stops (the end-of-turn text and the like).
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }
  // The system prompt inserted when the first message is not a system message ("" if none).
  const std::string& default_system_prompt() const { return default_system_; }
  // Whether the rendered text starts with the BOS token text itself (then tokenize it
  // without adding another BOS).
  bool renders_bos() const;

 private:
  chat_template(family f, std::string bos, std::string eos);

  family family_;
  std::string bos_;
  std::string eos_;
  std::string default_system_;
  std::string end_of_turn_;
  std::vector<std::string> stop_strings_;
};

}  // namespace tandem
