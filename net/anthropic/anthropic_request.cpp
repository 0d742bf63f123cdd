#include "net/anthropic/anthropic_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <unordered_map>

#include "net/request_fields.h"

namespace tandem::net {
namespace json = boost::json;
namespace {

const json::object& object_at(const json::value& v, const std::string& where) {
  if (!v.is_object()) bad(where, "must be an object");
  return v.get_object();
}

// Block types Anthropic defines that need what this server does not have (images and
// documents: a vision or file service; the rest: server tools).
[[noreturn]] void unsupported_block(const std::string& where, const std::string& type) {
  if (type == "image") bad(where, "images belong in user messages");
  if (type == "document" || type == "search_result" || type == "container_upload") {
    bad(where, "'" + type + "' is not supported: this server's models read text and images only");
  }
  if (type.empty()) bad(where, "is required");
  bad(where, "'" + type + "' is not supported here (server tools and their results are not available)");
}

// Text blocks' text (a string is one text block). Other block types: 400.
std::string text_of(const json::value& v, const std::string& where) {
  if (v.is_string()) return std::string(v.get_string());
  if (!v.is_array()) bad(where, "must be a string or a list of text blocks");
  std::string out;
  size_t j = 0;
  for (const auto& b : v.get_array()) {
    const std::string at = where + "[" + std::to_string(j++) + "]";
    const auto& bo = object_at(b, at);
    const std::string type = string_field(bo, "type", at + ".type");
    if (type != "text") unsupported_block(at + ".type", type);
    if (!out.empty()) out += "\n";
    out += string_field(bo, "text", at + ".text");
  }
  return out;
}

// An image block's source as a chat image_url: {"type": "base64", "media_type", "data"} as
// a data: URI; {"type": "url", "url"} as given (the chat parser refuses what it will not fetch).
std::string image_url(const json::object& block, const std::string& at) {
  const json::value* src = field(block, "source");
  if (!src) bad(at + ".source", "is required");
  const auto& so = object_at(*src, at + ".source");
  const std::string type = string_field(so, "type", at + ".source.type");
  if (type == "base64") {
    const std::string media = required_string(so, "media_type", at + ".source.media_type");
    return "data:" + media + ";base64," + required_string(so, "data", at + ".source.data");
  }
  if (type == "url") return required_string(so, "url", at + ".source.url");
  bad(at + ".source.type", "must be 'base64' or 'url' (got '" + type + "')");
}

// The translation of `messages`, with where each chat message came from.
struct message_builder {
  json::array messages;
  std::vector<std::string> origin;
  std::vector<std::string> image_parts;  // each image block's own field, in order
  std::unordered_map<std::string, std::string> tool_names;  // tool_use id -> the tool's name

  void push(json::object m, const std::string& from) {
    messages.push_back(std::move(m));
    origin.push_back(from);
  }

  void user(const json::object& mo, const std::string& where) {
    const json::value* content = field(mo, "content");
    if (!content) bad(where + ".content", "is required");
    if (content->is_string()) {
      push(json::object{{"role", "user"}, {"content", content->get_string()}}, where);
      return;
    }
    if (!content->is_array()) bad(where + ".content", "must be a string or a list of content blocks");
    // Text gathers until a tool_result, which is its own (tool) message: the order is kept.
    // Images make the message's content chat parts (text, image_url) in their order.
    std::string text;
    bool has_text = false;
    json::array parts;
    auto text_to_parts = [&] {
      if (has_text) parts.push_back(json::object{{"type", "text"}, {"text", std::move(text)}});
      text.clear();
      has_text = false;
    };
    auto flush_text = [&] {
      if (parts.empty()) {
        if (has_text) push(json::object{{"role", "user"}, {"content", std::move(text)}}, where);
      } else {
        text_to_parts();
        push(json::object{{"role", "user"}, {"content", std::move(parts)}}, where);
      }
      text.clear();
      has_text = false;
      parts = json::array{};
    };
    size_t j = 0;
    for (const auto& b : content->get_array()) {
      const std::string at = where + ".content[" + std::to_string(j++) + "]";
      const auto& bo = object_at(b, at);
      const std::string type = string_field(bo, "type", at + ".type");
      if (type == "text") {
        if (has_text) text += "\n";
        text += string_field(bo, "text", at + ".text");
        has_text = true;
      } else if (type == "image") {
        text_to_parts();
        parts.push_back(json::object{{"type", "image_url"}, {"image_url", json::object{{"url", image_url(bo, at)}}}});
        image_parts.push_back(at);
      } else if (type == "tool_result") {
        flush_text();
        const std::string id = required_string(bo, "tool_use_id", at + ".tool_use_id");
        const auto name = tool_names.find(id);
        if (name == tool_names.end()) {
          bad(at + ".tool_use_id", "'" + id + "' names no tool_use block of an earlier assistant message");
        }
        const json::value* c = field(bo, "content");
        std::string result = c ? text_of(*c, at + ".content") : "";
        if (const json::value* e = field(bo, "is_error")) {
          if (!e->is_bool()) bad(at + ".is_error", "must be true or false");
          // The chat templates have no place for a failed call: the model reads it in the text.
          if (e->get_bool()) result = "Error: " + result;
        }
        push(json::object{{"role", "tool"}, {"tool_call_id", id}, {"name", name->second}, {"content", result}}, at);
      } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
        bad(at + ".type", "'" + type + "' blocks belong in assistant messages");
      } else {
        unsupported_block(at + ".type", type);
      }
    }
    flush_text();
    if (j == 0) push(json::object{{"role", "user"}, {"content", ""}}, where);
  }

  void assistant(const json::object& mo, const std::string& where) {
    const json::value* content = field(mo, "content");
    if (!content) bad(where + ".content", "is required");
    // Content "" rather than null: templates that add the content to a string fail on null.
    json::object m{{"role", "assistant"}, {"content", ""}};
    if (content->is_string()) {
      m["content"] = content->get_string();
      push(std::move(m), where);
      return;
    }
    if (!content->is_array()) bad(where + ".content", "must be a string or a list of content blocks");
    std::string text, thinking;
    json::array calls;
    size_t j = 0;
    for (const auto& b : content->get_array()) {
      const std::string at = where + ".content[" + std::to_string(j++) + "]";
      const auto& bo = object_at(b, at);
      const std::string type = string_field(bo, "type", at + ".type");
      if (type == "text") {
        if (!text.empty()) text += "\n";
        text += string_field(bo, "text", at + ".text");
      } else if (type == "tool_use") {
        const std::string id = required_string(bo, "id", at + ".id");
        const std::string name = required_string(bo, "name", at + ".name");
        const json::value* input = field(bo, "input");
        if (input && !input->is_object()) bad(at + ".input", "must be an object");
        tool_names[id] = name;
        calls.push_back(json::object{
            {"id", id},
            {"type", "function"},
            {"function", json::object{{"name", name}, {"arguments", input ? json::serialize(*input) : "{}"}}}});
      } else if (type == "thinking") {
        // The signature is the original service's proof of origin: nothing to check here.
        if (!thinking.empty()) thinking += "\n";
        thinking += string_field(bo, "thinking", at + ".thinking");
      } else if (type == "redacted_thinking") {
        // Encrypted by the original service: nothing a template could render.
      } else if (type == "tool_result") {
        bad(at + ".type", "'tool_result' blocks belong in user messages");
      } else {
        unsupported_block(at + ".type", type);
      }
    }
    m["content"] = std::move(text);
    if (!calls.empty()) m["tool_calls"] = std::move(calls);
    if (!thinking.empty()) m["reasoning_content"] = std::move(thinking);
    push(std::move(m), where);
  }
};

json::array parse_tools(const json::object& body) {
  const json::value* v = field(body, "tools");
  if (!v) return {};
  if (!v->is_array()) bad("tools", "must be a list of tools");
  json::array out;
  size_t i = 0;
  for (const auto& t : v->get_array()) {
    const std::string at = "tools[" + std::to_string(i++) + "]";
    const auto& o = object_at(t, at);
    const std::string type = string_field(o, "type", at + ".type");
    if (!type.empty() && type != "custom") {
      bad(at + ".type", "'" + type +
                            "' is one of Anthropic's own tools, which this server does not have; only custom tools "
                            "(name, description, input_schema) are supported");
    }
    json::object fn{{"name", required_string(o, "name", at + ".name")}};
    if (const json::value* d = field(o, "description")) {
      if (!d->is_string()) bad(at + ".description", "must be a string");
      fn["description"] = *d;
    }
    const json::value* schema = field(o, "input_schema");
    if (!schema || !schema->is_object()) bad(at + ".input_schema", "is required (a JSON Schema object)");
    fn["parameters"] = *schema;
    out.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice into `chat` (tool_choice, parallel_tool_calls).
void parse_tool_choice(const json::object& body, bool has_tools, json::object& chat) {
  const json::value* v = field(body, "tool_choice");
  if (!v) return;
  const auto& o = object_at(*v, "tool_choice");
  const std::string type = string_field(o, "type", "tool_choice.type");
  if (type == "auto") {
    if (has_tools) chat["tool_choice"] = "auto";
  } else if (type == "none") {
    if (has_tools) chat["tool_choice"] = "none";
  } else if (type == "any") {
    chat["tool_choice"] = "required";
  } else if (type == "tool") {
    chat["tool_choice"] = json::object{
        {"type", "function"}, {"function", json::object{{"name", required_string(o, "name", "tool_choice.name")}}}};
  } else {
    bad("tool_choice.type", "must be 'auto', 'any', 'tool' or 'none' (got '" + type + "')");
  }
  if (const json::value* d = field(o, "disable_parallel_tool_use")) {
    if (!d->is_bool()) bad("tool_choice.disable_parallel_tool_use", "must be true or false");
    if (d->get_bool()) chat["parallel_tool_calls"] = false;
  }
}

// thinking -> the template's enable_thinking and the chat path's thinking budget.
void parse_thinking(const json::object& body, const api_limits& limits, json::object& kwargs, json::object& chat) {
  const json::value* v = field(body, "thinking");
  if (!v) return;
  const auto& o = object_at(*v, "thinking");
  const std::string type = string_field(o, "type", "thinking.type");
  if (type == "disabled") {
    kwargs["enable_thinking"] = false;
    return;
  }
  if (type != "enabled" && type != "adaptive") {
    bad("thinking.type", "must be 'enabled', 'adaptive' or 'disabled' (got '" + type + "')");
  }
  kwargs["enable_thinking"] = true;
  if (type == "adaptive") return;
  const json::value* b = field(o, "budget_tokens");
  if (!b || !b->is_int64() || b->get_int64() < 1) bad("thinking.budget_tokens", "is required (an integer >= 1)");
  // Anthropic's floor of 1024 is for its models; a budget past the context never binds.
  chat["thinking_token_budget"] = std::min<int64_t>(b->get_int64(), std::max<uint32_t>(limits.max_model_len, 1));
}

// output_config: format -> response_format; effort -> reasoning_effort (the template's variable).
void parse_output_config(const json::object& body, json::object& chat) {
  const json::value* v = field(body, "output_config");
  if (!v) return;
  const auto& o = object_at(*v, "output_config");
  if (const json::value* f = field(o, "format")) {
    const auto& fo = object_at(*f, "output_config.format");
    const std::string type = string_field(fo, "type", "output_config.format.type");
    if (type != "json_schema") bad("output_config.format.type", "must be 'json_schema' (got '" + type + "')");
    const json::value* schema = field(fo, "schema");
    if (!schema || !schema->is_object()) bad("output_config.format.schema", "must be a JSON Schema object");
    chat["response_format"] =
        json::object{{"type", "json_schema"}, {"json_schema", json::object{{"name", "output"}, {"schema", *schema}}}};
  }
  if (const json::value* e = field(o, "effort")) {
    if (!e->is_string()) bad("output_config.effort", "must be a string");
    const std::string effort(e->get_string());
    if (effort != "low" && effort != "medium" && effort != "high" && effort != "xhigh" && effort != "max") {
      bad("output_config.effort", "must be 'low', 'medium', 'high', 'xhigh' or 'max' (got '" + effort + "')");
    }
    chat["reasoning_effort"] = effort == "low" || effort == "medium" ? effort : "high";
  }
}

// Chat fields Tandem's chat path takes that Anthropic has no name for: passed on as they are
// (as on the Responses API).
constexpr const char* kChatExtras[] = {
    "seed", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "ignore_eos"};

}  // namespace

anthropic_request parse_anthropic_request(const json::value& body, const api_limits& limits, bool count_only) {
  if (!body.is_object()) throw api_error(400, "the request body must be a JSON object");
  const auto& o = body.get_object();
  anthropic_request r;
  auto& chat = r.chat;
  if (const json::value* m = field(o, "model")) {
    if (!m->is_string()) bad("model", "must be a string");
    chat["model"] = *m;
  }
  if (const json::value* mcp = field(o, "mcp_servers"); mcp && !(mcp->is_array() && mcp->get_array().empty())) {
    bad("mcp_servers", "is not supported by this server");
  }

  message_builder mb;
  if (const json::value* s = field(o, "system")) {
    mb.push(json::object{{"role", "system"}, {"content", text_of(*s, "system")}}, "system");
  }
  const json::value* msgs = field(o, "messages");
  if (!msgs) bad("messages", "is required");
  if (!msgs->is_array() || msgs->get_array().empty()) bad("messages", "must be a non-empty list");
  size_t i = 0;
  for (const auto& m : msgs->get_array()) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    const auto& mo = object_at(m, where);
    const std::string role = string_field(mo, "role", where + ".role");
    if (role == "user") {
      mb.user(mo, where);
    } else if (role == "assistant") {
      mb.assistant(mo, where);
    } else {
      bad(where + ".role",
          "must be 'user' or 'assistant' (got '" + role + "'; a system prompt is the top-level 'system' field)");
    }
  }
  chat["messages"] = std::move(mb.messages);
  r.message_origin = std::move(mb.origin);
  r.image_parts = std::move(mb.image_parts);

  const json::array tools = parse_tools(o);
  if (!tools.empty()) chat["tools"] = tools;
  parse_tool_choice(o, !tools.empty(), chat);

  json::object kwargs;
  if (const json::value* kw = field(o, "chat_template_kwargs")) kwargs = object_at(*kw, "chat_template_kwargs");
  parse_thinking(o, limits, kwargs, chat);
  if (!kwargs.empty()) chat["chat_template_kwargs"] = std::move(kwargs);
  parse_output_config(o, chat);
  if (count_only) return r;

  const json::value* max_tokens = field(o, "max_tokens");
  if (!max_tokens) bad("max_tokens", "is required");
  if (!max_tokens->is_int64() || max_tokens->get_int64() < 1) {
    bad("max_tokens", "must be an integer >= 1 (got " + json::serialize(*max_tokens) + ")");
  }
  chat["max_tokens"] = std::min<int64_t>(max_tokens->get_int64(), std::max<uint32_t>(limits.max_model_len, 1));
  if (const json::value* s = field(o, "stream")) {
    if (!s->is_bool()) bad("stream", "must be true or false");
    r.stream = s->get_bool();
  }
  if (const json::value* s = field(o, "stop_sequences")) {
    if (!s->is_array()) bad("stop_sequences", "must be a list of strings");
    for (const auto& seq : s->get_array()) {
      if (!seq.is_string()) bad("stop_sequences", "must be a list of strings");
      if (!seq.get_string().empty()) r.stop_sequences.emplace_back(seq.get_string());
    }
    chat["stop"] = *s;
  }
  if (const json::value* md = field(o, "metadata")) {
    const auto& mdo = object_at(*md, "metadata");
    const std::string user = string_field(mdo, "user_id", "metadata.user_id");
    if (!user.empty()) chat["user"] = user;
  }
  for (const char* name : {"temperature", "top_p", "top_k"}) {
    if (const json::value* v = field(o, name)) chat[name] = *v;
  }
  for (const char* name : kChatExtras) {
    if (const json::value* v = field(o, name)) chat[name] = *v;
  }
  return r;
}

api_request anthropic_api_request(const anthropic_request& r, const api_limits& limits) {
  try {
    api_request req = parse_api_request(r.chat, api_kind::chat, limits);
    req.stream = r.stream;
    if (r.image_parts.size() == req.gen.images.size()) req.gen.image_parts = r.image_parts;  // a bad image's 400
    return req;
  } catch (const api_error& e) {
    std::string param = e.param;
    std::string message = e.what();
    // `from` (a prefix of the param) becomes `to`, in the param and where the message quotes it.
    auto rename = [&](const std::string& from, const std::string& to) {
      if (param.rfind(from, 0) != 0) return false;
      if (param.size() > from.size() && param[from.size()] != '.' && param[from.size()] != '[') return false;
      const std::string quoted = "'" + param + "'";
      param = to + param.substr(from.size());
      if (const auto at = message.find(quoted); at != std::string::npos) {
        message.replace(at, quoted.size(), "'" + param + "'");
      }
      return true;
    };
    if (param.rfind("messages[", 0) == 0) {
      const size_t k = std::strtoul(param.c_str() + 9, nullptr, 10);
      const auto close = param.find(']');
      if (k < r.message_origin.size() && close != std::string::npos) {
        rename(param.substr(0, close + 1), r.message_origin[k]);
      }
    } else if (param.rfind("tools[", 0) == 0) {
      const auto fn = param.find(".function");
      if (fn != std::string::npos) {
        std::string to = param.substr(0, fn) + param.substr(fn + 9);
        if (to.ends_with(".parameters")) to.replace(to.size() - 11, 11, ".input_schema");
        rename(param, to);
      }
    } else {
      rename("stop", "stop_sequences") || rename("thinking_token_budget", "thinking.budget_tokens") ||
          rename("user", "metadata.user_id") || rename("response_format", "output_config.format") ||
          rename("reasoning_effort", "output_config.effort");
    }
    throw api_error(e.status, message, param, e.code);
  }
}

}  // namespace tandem::net
