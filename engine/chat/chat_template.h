// Chat templates: a list of messages -> the prompt text the model was trained on.
//
// GGUF files carry the template as Jinja source (tokenizer.chat_template, and named variants
// tokenizer.chat_template.<name> such as tool_use). Tandem compiles that source once at load
// with its own interpreter (engine/jinja) and renders the file's own template, exactly as
// Python's jinja2 renders it in Hugging Face's environment (tests: tests/unit/jinja_test.cpp,
// the corpus test tests/python/test_chat_template_corpus.py). Five built-in families remain
// as named fallbacks (--chat-template NAME), rendered natively.
//
// The template also tells which family of markers the model speaks (chatml, llama3, ...):
// the end-of-turn text, stop strings, and which tool-call and reasoning syntax to parse.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

namespace gguf {
class file;
}
namespace jinja {
class compiled_template;
}

// A call the assistant made, as OpenAI's API carries it.
struct chat_tool_call {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text; templates see it as an object when it parses as one
};

struct chat_message {
  chat_message() = default;
  chat_message(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // "system", "user", "assistant", "tool" (ChatML and Llama 3 take any role)
  std::string content;
  std::vector<chat_tool_call> tool_calls;  // assistant
  std::string tool_call_id;                // tool: the call this answers
  std::string name;                        // tool: the function's name
  std::string reasoning_content;           // assistant: its thinking, for templates that render it
  bool content_is_null = false;            // OpenAI's "content": null (an assistant's tool call)
};

// What a render takes besides the messages.
struct chat_render_options {
  bool add_generation_prompt = true;
  // JSON array of tool definitions ([{"type": "function", "function": {...}}]); "" when the
  // request has none (the template then sees tools = none, as with transformers).
  std::string tools_json;
  // JSON object of extra template variables (chat_template_kwargs: enable_thinking, ...).
  std::string template_kwargs_json;
  // strftime_now's clock (seconds since the epoch, as UTC); the current time when absent.
  std::optional<std::time_t> now;
};

// A run of rendered text: template markup (tokenize with special-token parsing, so its
// markers become control tokens) or text taken from the caller's data (message content,
// tool definitions and arguments: tokenize as plain text, the prompt-injection guard). Roles
// count as markup: validate them before rendering.
struct chat_segment {
  std::string text;
  bool is_content = false;
};

class chat_template {
 public:
  // The marker family the template speaks; `other` for a Jinja template of none of them.
  // harmony (gpt-oss: <|start|>ROLE<|channel|>CHANNEL<|message|>...) has no built-in renderer.
  enum class family { chatml, llama3, llama2, mistral, zephyr, harmony, other };

  // The template of `f`: tokenizer.chat_template (and its named variants), or what
  // `override_name` names: a named variant of the file (tokenizer.chat_template.NAME), a
  // built-in family ("chatml", ...), or a file holding Jinja source. Throws
  // std::runtime_error when the file has no template, the template does not parse (the
  // message names the line), or the override names nothing.
  static chat_template from_gguf(const gguf::file& f, std::string_view override_name = "");
  // A built-in family by name, with the texts of the model's BOS/EOS tokens (used by the
  // families whose templates emit them).
  static chat_template by_name(std::string_view name, std::string bos_text = "", std::string eos_text = "");
  // Compiles Jinja source; throws std::runtime_error naming the line when it does not parse.
  static chat_template from_source(std::string_view source, std::string bos_text = "", std::string eos_text = "");
  // A Jinja template read from `path` (--chat-template FILE).
  static chat_template from_file(const std::string& path, std::string bos_text = "", std::string eos_text = "");
  static std::vector<std::string_view> known_names();

  // The prompt for `messages`; with add_generation_prompt it ends where the assistant's
  // reply begins. Throws std::invalid_argument for a message list the template rejects
  // (e.g. roles that do not alternate in Llama 2 / Mistral, its raise_exception).
  std::string render(std::span<const chat_message> messages, bool add_generation_prompt) const;
  std::string render(std::span<const chat_message> messages, const chat_render_options& opts) const;
  // The same text cut into markup and content segments (adjacent segments of one kind are
  // joined; no segment is empty). The concatenation equals render(). Content is as the
  // template inserts it (trimmed by a template that trims, and so on).
  std::vector<chat_segment> render_segments(std::span<const chat_message> messages, bool add_generation_prompt) const;
  std::vector<chat_segment> render_segments(std::span<const chat_message> messages,
                                            const chat_render_options& opts) const;

  family kind() const { return family_; }
  // The family's name ("harmony" too), or "jinja" for a Jinja template of no known family.
  std::string_view name() const;
  // True when the template is the file's (or a file's) Jinja source rather than a built-in.
  bool is_jinja() const { return compiled_ != nullptr; }
  const std::string& source() const { return source_; }
  // Names of the file's template variants (tokenizer.chat_template.NAME), e.g. "tool_use".
  const std::vector<std::string>& variant_names() const { return variant_names_; }
  // Whether the template renders a tool list (it reads `tools`).
  bool supports_tools() const;
  // Text of the token that ends an assistant turn (e.g. "<|im_end|>").
  const std::string& end_of_turn() const { return end_of_turn_; }
  // Strings at which generation stops (the end-of-turn text and the like).
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }
  // The system prompt inserted when the first message is not a system message ("" if none).
  const std::string& default_system_prompt() const { return default_system_; }
  const std::string& bos_text() const { return bos_; }
  const std::string& eos_text() const { return eos_; }
  // Whether the rendered text starts with the BOS token text itself (then tokenize it
  // without adding another BOS). For a Jinja template: whether it writes bos_token.
  bool renders_bos() const;

 private:
  chat_template(family f, std::string bos, std::string eos);
  static chat_template from_jinja(std::string source, std::string_view label, std::string bos_text,
                                  std::string eos_text);
  std::vector<chat_segment> render_family(std::span<const chat_message> messages, bool add_generation_prompt) const;
  std::vector<chat_segment> render_jinja(std::span<const chat_message> messages, const chat_render_options& opts) const;

  family family_;
  std::string bos_;
  std::string eos_;
  std::string default_system_;
  std::string end_of_turn_;
  std::vector<std::string> stop_strings_;
  std::string source_;
  std::shared_ptr<const jinja::compiled_template> compiled_;
  std::shared_ptr<const jinja::compiled_template> tool_use_;  // tokenizer.chat_template.tool_use
  std::vector<std::string> variant_names_;
};

}  // namespace tandem
