#include "engine/chat/chat_template.h"

#include <array>
#include <stdexcept>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

struct family_info {
  chat_template::family kind;
  std::string_view name;
};

constexpr std::array kFamilies = {
    family_info{chat_template::family::chatml, "chatml"}, family_info{chat_template::family::llama3, "llama3"},
    family_info{chat_template::family::llama2, "llama2"}, family_info{chat_template::family::mistral, "mistral"},
    family_info{chat_template::family::zephyr, "zephyr"},
};

std::string known_list() {
  std::string s;
  for (const auto& f : kFamilies) {
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Python's str.isspace(), which Jinja's trim filter and str.strip() use: the White_Space
// code points plus U+001C..U+001F.
bool python_isspace(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

// The body of a Jinja string literal: \n, \t, \\, \' and \" escapes resolved.
std::string unescape_jinja(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      default:
        out.push_back(c);
        break;
    }
  }
  return out;
}

// ChatML templates that greet with a system prompt of their own when the conversation has
// none: `{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n
// ...<|im_end|>\n' }}{% endif %}`. Returns that prompt, or "" when there is none.
std::string chatml_default_system(std::string_view source) {
  size_t cond = source.find("!= 'system'");
  if (cond == std::string_view::npos) cond = source.find("!= \"system\"");
  if (cond == std::string_view::npos) return {};
  constexpr std::string_view kOpen = "<|im_start|>system";
  size_t p = source.find(kOpen, cond);
  if (p == std::string_view::npos) return {};
  p += kOpen.size();
  if (source.substr(p, 1) == "\n") {
    p += 1;
  } else if (source.substr(p, 2) == "\\n") {
    p += 2;
  } else {
    return {};
  }
  const size_t end = source.find("<|im_end|>", p);
  if (end == std::string_view::npos) return {};
  return unescape_jinja(source.substr(p, end - p));
}

[[noreturn]] void reject(const std::string& why) { throw std::invalid_argument(why); }

}  // namespace

chat_template::chat_template(family f, std::string bos, std::string eos)
    : family_(f), bos_(std::move(bos)), eos_(std::move(eos)) {
  switch (family_) {
    case family::chatml:
      end_of_turn_ = "<|im_end|>";
      break;
    case family::llama3:
      if (bos_.empty()) bos_ = "<|begin_of_text|>";
      end_of_turn_ = "<|eot_id|>";
      break;
    case family::llama2:
    case family::mistral:
      if (bos_.empty()) bos_ = "<s>";
      if (eos_.empty()) eos_ = "</s>";
      end_of_turn_ = eos_;
      break;
    case family::zephyr:
      if (eos_.empty()) eos_ = "</s>";
      end_of_turn_ = eos_;
      break;
  }
  stop_strings_ = {end_of_turn_};
}

std::vector<std::string_view> chat_template::known_names() {
  std::vector<std::string_view> names;
  for (const auto& f : kFamilies) names.push_back(f.name);
  return names;
}

chat_template chat_template::by_name(std::string_view name, std::string bos_text, std::string eos_text) {
  for (const auto& f : kFamilies) {
    if (f.name == name) return chat_template(f.kind, std::move(bos_text), std::move(eos_text));
  }
  throw std::runtime_error("unknown chat template '" + std::string(name) + "'; known: " + known_list());
}

chat_template chat_template::from_source(std::string_view source, std::string bos_text, std::string eos_text) {
  if (contains(source, "<|im_start|>")) {
    chat_template t(family::chatml, std::move(bos_text), std::move(eos_text));
    t.default_system_ = chatml_default_system(source);
    return t;
  }
  if (contains(source, "<|start_header_id|>") && contains(source, "<|end_header_id|>")) {
    return chat_template(family::llama3, std::move(bos_text), std::move(eos_text));
  }
  if (contains(source, "<|user|>") && contains(source, "<|assistant|>")) {
    return chat_template(family::zephyr, std::move(bos_text), std::move(eos_text));
  }
  if (contains(source, "[INST]")) {
    const family f = contains(source, "<<SYS>>") ? family::llama2 : family::mistral;
    return chat_template(f, std::move(bos_text), std::move(eos_text));
  }
  throw std::runtime_error(
      "unrecognised chat template in tokenizer.chat_template; pass --chat-template NAME to use "
      "one of: " +
      known_list());
}

chat_template chat_template::from_gguf(const gguf::file& f, std::string_view override_name) {
  // BOS/EOS texts from the vocabulary, for the templates that emit them.
  std::string bos, eos;
  if (const gguf::array_value* tokens = f.get_array("tokenizer.ggml.tokens")) {
    const auto text_of = [&](std::string_view key) -> std::string {
      const auto id = f.get_int(key);
      if (!id || *id < 0 || static_cast<uint64_t>(*id) >= tokens->items.size()) return {};
      const std::string* s = tokens->items[static_cast<size_t>(*id)].as_string();
      return s != nullptr ? *s : std::string();
    };
    bos = text_of("tokenizer.ggml.bos_token_id");
    eos = text_of("tokenizer.ggml.eos_token_id");
  }
  if (!override_name.empty()) return by_name(override_name, bos, eos);
  const auto source = f.get_string("tokenizer.chat_template");
  if (!source) {
    throw std::runtime_error(
        "the model has no chat template (tokenizer.chat_template); pass "
        "--chat-template NAME to use one of: " +
        known_list());
  }
  return from_source(*source, bos, eos);
}

std::string_view chat_template::name() const {
  for (const auto& f : kFamilies) {
    if (f.kind == family_) return f.name;
  }
  return "?";
}

bool chat_template::renders_bos() const {
  return (family_ == family::llama3 || family_ == family::llama2 || family_ == family::mistral) && !bos_.empty();
}

std::string chat_template::render(std::span<const chat_message> messages, bool add_generation_prompt) const {
  std::string out;
  for (const auto& seg : render_segments(messages, add_generation_prompt)) out += seg.text;
  return out;
}

namespace {

// Builds rendered text as markup/content segments.
class segment_builder {
 public:
  void markup(std::string_view s) { segments_.push_back({std::string(s), false}); }
  void content(std::string_view s) { segments_.push_back({std::string(s), true}); }
  size_t mark() const { return segments_.size(); }

  // Python's str.strip() applied to the text appended since `mark`, across segments.
  void strip_since(size_t mark) {
    for (size_t i = mark; i < segments_.size(); ++i) {
      std::string& t = segments_[i].text;
      size_t b = 0;
      while (b < t.size()) {
        const auto d = utf8::decode_lenient(t, b);
        if (!python_isspace(d.cp)) break;
        b += d.length;
      }
      t.erase(0, b);
      if (!t.empty()) break;
    }
    for (size_t i = segments_.size(); i > mark; --i) {
      std::string& t = segments_[i - 1].text;
      size_t end = 0;  // end of the last non-space code point
      for (size_t pos = 0; pos < t.size();) {
        const auto d = utf8::decode_lenient(t, pos);
        pos += d.length;
        if (!python_isspace(d.cp)) end = pos;
      }
      t.erase(end);
      if (!t.empty()) break;
    }
  }

  std::vector<chat_segment> take() {
    std::vector<chat_segment> out;
    for (auto& seg : segments_) {
      if (seg.text.empty()) continue;
      if (!out.empty() && out.back().is_content == seg.is_content) {
        out.back().text += seg.text;
      } else {
        out.push_back(std::move(seg));
      }
    }
    segments_.clear();
    return out;
  }

 private:
  std::vector<chat_segment> segments_;
};

}  // namespace

std::vector<chat_segment> chat_template::render_segments(std::span<const chat_message> messages,
                                                         bool add_generation_prompt) const {
  segment_builder out;
  switch (family_) {
    case family::chatml:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0 && !default_system_.empty() && messages[0].role != "system") {
          out.markup("<|im_start|>system\n" + default_system_ + "<|im_end|>\n");
        }
        out.markup("<|im_start|>" + messages[i].role + "\n");
        out.content(messages[i].content);
        out.markup("<|im_end|>\n");
      }
      if (add_generation_prompt) out.markup("<|im_start|>assistant\n");
      break;

    case family::llama3:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out.markup(bos_);
        out.markup("<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n");
        const size_t m = out.mark();
        out.content(messages[i].content);  // `| trim`
        out.strip_since(m);
        out.markup("<|eot_id|>");
      }
      if (add_generation_prompt) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;

    case family::llama2: {
      // A leading system message goes inside the first user turn; the rest must alternate
      // user/assistant. The template has no generation prompt: a prompt ends with [/INST].
      // (The template reads messages[0]: an empty conversation is an error there.)
      if (messages.empty()) reject("Llama 2 template: the conversation has no messages");
      std::span<const chat_message> turns = messages;
      const chat_message* system = nullptr;
      if (messages[0].role == "system") {
        system = &messages[0];
        turns = messages.subspan(1);
      }
      for (size_t i = 0; i < turns.size(); ++i) {
        const chat_message& msg = turns[i];
        if ((msg.role == "user") != (i % 2 == 0)) {
          reject("Conversation roles must alternate user/assistant/user/assistant/...");
        }
        if (msg.role != "user" && msg.role != "assistant") continue;  // the template skips it
        if (msg.role == "user") out.markup(bos_ + "[INST] ");
        if (msg.role == "assistant") out.markup(" ");
        // content.strip(), where the first turn's content carries the system block.
        const size_t m = out.mark();
        if (i == 0 && system != nullptr) {
          out.markup("<<SYS>>\n");
          out.content(system->content);
          out.markup("\n<</SYS>>\n\n");
        }
        out.content(msg.content);
        out.strip_since(m);
        out.markup(msg.role == "user" ? " [/INST]" : " " + eos_);
      }
      break;
    }

    case family::mistral:
      out.markup(bos_);
      for (size_t i = 0; i < messages.size(); ++i) {
        const chat_message& msg = messages[i];
        if ((msg.role == "user") != (i % 2 == 0)) {
          reject("Conversation roles must alternate user/assistant/user/assistant/...");
        }
        if (msg.role == "user") {
          out.markup("[INST] ");
          out.content(msg.content);
          out.markup(" [/INST]");
        } else if (msg.role == "assistant") {
          out.content(msg.content);
          out.markup(eos_);
        } else {
          reject("Only user and assistant roles are supported!");
        }
      }
      break;

    case family::zephyr:
      for (size_t i = 0; i < messages.size(); ++i) {
        const chat_message& msg = messages[i];
        if (msg.role == "user" || msg.role == "system" || msg.role == "assistant") {
          out.markup("<|" + msg.role + "|>\n");
          out.content(msg.content);
          out.markup(eos_ + "\n");
        }
        // The template emits the generation prompt inside its loop, after the last message.
        if (i + 1 == messages.size() && add_generation_prompt) out.markup("<|assistant|>\n");
      }
      break;
  }
  return out.take();
}

}  // namespace tandem
