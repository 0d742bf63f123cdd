#include "engine/chat/chat_template.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/gguf/gguf.h"
#include "engine/jinja/template.h"

namespace tandem {
namespace {

constexpr size_t kMaxTemplateBytes = 1 << 20;  // a chat template file (the largest known: ~17 KB)

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

// The body of a Jinja string literal: \n, \t, \\, \' and \" escapes resolved.
std::string unescape_jinja(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c);
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

// The marker family of Jinja source, judged by the markers it writes.
chat_template::family detect_family(std::string_view source) {
  using F = chat_template::family;
  if (contains(source, "<|channel|>") && contains(source, "<|message|>")) return F::harmony;
  if (contains(source, "<|im_start|>")) return F::chatml;
  if (contains(source, "<|start_header_id|>") && contains(source, "<|end_header_id|>")) return F::llama3;
  if (contains(source, "<|user|>") && contains(source, "<|assistant|>")) return F::zephyr;
  if (contains(source, "[INST]")) return contains(source, "<<SYS>>") ? F::llama2 : F::mistral;
  return F::other;
}

std::shared_ptr<const jinja::compiled_template> compile(std::string_view source, std::string_view what) {
  try {
    return std::make_shared<const jinja::compiled_template>(jinja::compiled_template::compile(source));
  } catch (const jinja::syntax_error& e) {
    throw std::runtime_error("the chat template (" + std::string(what) + ") does not parse: " + e.what() +
                             "; pass --chat-template FILE|NAME to use another (built-in: " + known_list() + ")");
  }
}

// The texts of the model's BOS/EOS tokens, for the templates that emit them.
std::pair<std::string, std::string> special_texts(const gguf::file& f) {
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
  return {bos, eos};
}

constexpr std::string_view kVariantPrefix = "tokenizer.chat_template.";

// ---- messages -> template values ----
//
// Every string from the caller is content (value::content) except the role, which the
// caller validates and which templates compare and write as markup.

jinja::value text(const std::string& s) { return jinja::value::content(s); }

jinja::value tool_call_value(const chat_tool_call& c) {
  jinja::value arguments;
  try {
    arguments = jinja::from_json(c.arguments, /*as_content=*/true);
    if (!arguments.is_object()) arguments = text(c.arguments);
  } catch (const std::invalid_argument&) {
    arguments = text(c.arguments);  // not JSON: the template gets the text as it came
  }
  std::vector<std::pair<jinja::value, jinja::value>> fn = {{jinja::value("name"), text(c.name)},
                                                           {jinja::value("arguments"), arguments}};
  std::vector<std::pair<jinja::value, jinja::value>> call;
  if (!c.id.empty()) call.emplace_back(jinja::value("id"), text(c.id));
  call.emplace_back(jinja::value("type"), jinja::value("function"));
  call.emplace_back(jinja::value("function"), jinja::value::object(std::move(fn)));
  return jinja::value::object(std::move(call));
}

// `harmony`: gpt-oss's template reads an assistant's reasoning as `thinking`, looks for text
// in the content (a null content fails there) and refuses content beside thinking on a tool
// call, so the message gets llama.cpp's adjustments for it: `thinking` carries the
// reasoning_content, a null content is "", and a tool call with reasoning has no content.
jinja::value message_value(const chat_message& m, bool harmony) {
  std::vector<std::pair<jinja::value, jinja::value>> e;
  e.emplace_back(jinja::value("role"), jinja::value(m.role));
  const bool reasons = !m.reasoning_content.empty();
  if (!harmony) {
    e.emplace_back(jinja::value("content"), m.content_is_null ? jinja::value::none() : text(m.content));
  } else if (!reasons || m.tool_calls.empty()) {
    e.emplace_back(jinja::value("content"), text(m.content));
  }
  if (reasons) e.emplace_back(jinja::value("reasoning_content"), text(m.reasoning_content));
  if (reasons && harmony) e.emplace_back(jinja::value("thinking"), text(m.reasoning_content));
  if (!m.tool_calls.empty()) {
    std::vector<jinja::value> calls;
    for (const auto& c : m.tool_calls) calls.push_back(tool_call_value(c));
    e.emplace_back(jinja::value("tool_calls"), jinja::value::array(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) e.emplace_back(jinja::value("tool_call_id"), text(m.tool_call_id));
  if (!m.name.empty()) e.emplace_back(jinja::value("name"), text(m.name));
  return jinja::value::object(std::move(e));
}

jinja::value parse_caller_json(const std::string& json, const char* what) {
  try {
    return jinja::from_json(json, /*as_content=*/true);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(what) + " is not valid JSON: " + e.what());
  }
}

// Rendered text with content spans -> segments (no empty ones; kinds alternate).
std::vector<chat_segment> segments_of(const jinja::string_data& d) {
  std::vector<chat_segment> out;
  const auto add = [&](size_t b, size_t e, bool content) {
    if (b < e) out.push_back({d.text.substr(b, e - b), content});
  };
  size_t pos = 0;
  for (const auto& span : d.content) {
    add(pos, span.begin, false);
    add(span.begin, span.end, true);
    pos = span.end;
  }
  add(pos, d.text.size(), false);
  return out;
}

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
    case family::harmony:
      // A final message ends the turn with <|return|>, a tool call with <|call|>.
      end_of_turn_ = "<|return|>";
      stop_strings_ = {"<|return|>", "<|call|>"};
      return;
    case family::other:
      end_of_turn_ = eos_;
      break;
  }
  if (!end_of_turn_.empty()) stop_strings_ = {end_of_turn_};
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

chat_template chat_template::from_jinja(std::string source, std::string_view label, std::string bos_text,
                                        std::string eos_text) {
  chat_template t(detect_family(source), std::move(bos_text), std::move(eos_text));
  t.compiled_ = compile(source, label);
  if (t.family_ == family::chatml) t.default_system_ = chatml_default_system(source);
  t.source_ = std::move(source);
  return t;
}

chat_template chat_template::from_source(std::string_view source, std::string bos_text, std::string eos_text) {
  return from_jinja(std::string(source), "tokenizer.chat_template", std::move(bos_text), std::move(eos_text));
}

chat_template chat_template::from_file(const std::string& path, std::string bos_text, std::string eos_text) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read chat template file " + path + ": " + ec.message());
  if (size > kMaxTemplateBytes) throw std::runtime_error("chat template file " + path + " is larger than 1 MiB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) throw std::runtime_error("cannot read chat template file " + path);
  return from_jinja(ss.str(), path, std::move(bos_text), std::move(eos_text));
}

chat_template chat_template::from_gguf(const gguf::file& f, std::string_view override_name) {
  auto [bos, eos] = special_texts(f);
  std::vector<std::string> variants;
  for (const auto& [key, v] : f.metadata()) {
    if (key.size() > kVariantPrefix.size() && key.compare(0, kVariantPrefix.size(), kVariantPrefix) == 0) {
      variants.push_back(key.substr(kVariantPrefix.size()));
    }
  }
  std::optional<chat_template> t;
  if (!override_name.empty()) {
    const std::string key = std::string(kVariantPrefix) + std::string(override_name);
    const auto builtin = known_names();
    if (const auto variant = f.get_string(key)) {
      t = from_jinja(*variant, key, bos, eos);
    } else if (std::find(builtin.begin(), builtin.end(), override_name) != builtin.end()) {
      return by_name(override_name, bos, eos);
    } else if (std::filesystem::is_regular_file(std::string(override_name))) {
      t = from_file(std::string(override_name), bos, eos);
    } else {
      std::string names = known_list();
      for (const auto& v : variants) names += ", " + v;
      throw std::runtime_error("--chat-template '" + std::string(override_name) +
                               "' is neither a file nor a template name; names: " + names);
    }
  } else {
    const auto source = f.get_string("tokenizer.chat_template");
    if (!source) {
      throw std::runtime_error(
          "the model has no chat template (tokenizer.chat_template); pass "
          "--chat-template FILE|NAME to use a Jinja file or one of: " +
          known_list());
    }
    t = from_source(*source, bos, eos);
    // transformers renders the tool_use variant when the request has tools.
    if (const auto tool_use = f.get_string(std::string(kVariantPrefix) + "tool_use")) {
      t->tool_use_ = compile(*tool_use, std::string(kVariantPrefix) + "tool_use");
    }
  }
  t->variant_names_ = std::move(variants);
  return std::move(*t);
}

std::string_view chat_template::name() const {
  if (family_ == family::harmony) return "harmony";
  for (const auto& f : kFamilies) {
    if (f.kind == family_) return f.name;
  }
  return "jinja";
}

bool chat_template::renders_bos() const {
  if (compiled_) return !bos_.empty() && compiled_->mentions("bos_token");
  return (family_ == family::llama3 || family_ == family::llama2 || family_ == family::mistral) && !bos_.empty();
}

bool chat_template::supports_tools() const {
  return (compiled_ && compiled_->mentions("tools")) || (tool_use_ && tool_use_->mentions("tools"));
}

std::string chat_template::render(std::span<const chat_message> messages, bool add_generation_prompt) const {
  chat_render_options o;
  o.add_generation_prompt = add_generation_prompt;
  return render(messages, o);
}

std::string chat_template::render(std::span<const chat_message> messages, const chat_render_options& opts) const {
  std::string out;
  for (const auto& seg : render_segments(messages, opts)) out += seg.text;
  return out;
}

std::vector<chat_segment> chat_template::render_segments(std::span<const chat_message> messages,
                                                         bool add_generation_prompt) const {
  chat_render_options o;
  o.add_generation_prompt = add_generation_prompt;
  return render_segments(messages, o);
}

std::vector<chat_segment> chat_template::render_segments(std::span<const chat_message> messages,
                                                         const chat_render_options& opts) const {
  if (!compiled_) {
    if (!opts.tools_json.empty()) {
      throw std::invalid_argument("the built-in '" + std::string(name()) + "' template does not render tools");
    }
    return render_family(messages, opts.add_generation_prompt);
  }
  return render_jinja(messages, opts);
}

std::vector<chat_segment> chat_template::render_jinja(std::span<const chat_message> messages,
                                                      const chat_render_options& opts) const {
  std::vector<jinja::value> msgs;
  msgs.reserve(messages.size());
  for (const auto& m : messages) msgs.push_back(message_value(m, family_ == family::harmony));
  std::vector<std::pair<std::string, jinja::value>> vars = {
      {"messages", jinja::value::array(std::move(msgs))},
      {"add_generation_prompt", jinja::value(opts.add_generation_prompt)},
      {"bos_token", jinja::value(bos_)},
      {"eos_token", jinja::value(eos_)},
      {"tools", jinja::value::none()},
      {"documents", jinja::value::none()},
  };
  const bool has_tools = !opts.tools_json.empty();
  if (has_tools) {
    jinja::value tools = parse_caller_json(opts.tools_json, "tools");
    if (!tools.is_array()) throw std::invalid_argument("tools must be a JSON array");
    vars[4].second = std::move(tools);
  }
  if (!opts.template_kwargs_json.empty()) {
    const jinja::value kw = parse_caller_json(opts.template_kwargs_json, "chat_template_kwargs");
    if (!kw.is_object()) throw std::invalid_argument("chat_template_kwargs must be a JSON object");
    for (const auto& [k, v] : kw.obj().entries) {
      if (k.text() == "messages" || k.text() == "tools" || k.text() == "documents") continue;  // the request's own
      auto it = std::find_if(vars.begin(), vars.end(), [&](const auto& p) { return p.first == k.text(); });
      if (it != vars.end()) {
        it->second = v;
      } else {
        vars.emplace_back(k.text(), v);
      }
    }
  }
  const jinja::compiled_template& t = has_tools && tool_use_ ? *tool_use_ : *compiled_;
  jinja::render_options ro;
  ro.now = opts.now;
  try {
    return segments_of(t.render(vars, ro));
  } catch (const jinja::render_error& e) {
    throw std::invalid_argument(e.what());
  }
}

}  // namespace tandem
