// The built-in families, rendered natively: exactly what their published Jinja templates
// render (tests/data/chat_template/), used when --chat-template names a family.
#include <stdexcept>

#include "engine/chat/chat_template.h"
#include "engine/jinja/py_string.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

[[noreturn]] void reject(const std::string& why) { throw std::invalid_argument(why); }

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
        if (!jinja::py::is_space(d.cp)) break;
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
        if (!jinja::py::is_space(d.cp)) end = pos;
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

std::vector<chat_segment> chat_template::render_family(std::span<const chat_message> messages,
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

    case family::harmony:
    case family::other:
      throw std::logic_error("no built-in renderer for a Jinja template");

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
