#include "net/openai/responses_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <unordered_map>

#include "net/request_fields.h"

namespace tandem::net {
namespace json = boost::json;
namespace {

json::object text_part(const char* type, std::string text) {
  return json::object{{"type", type}, {"text", std::move(text)}};
}

// A message's content as parts: a string, or input_text / output_text / refusal parts.
json::array message_content(const json::value& v, const std::string& role, const std::string& where,
                            bool images_allowed = false) {
  const char* own_type = role == "assistant" ? "output_text" : "input_text";
  if (v.is_string()) return json::array{text_part(own_type, std::string(v.get_string()))};
  if (!v.is_array()) bad(where, "must be a string or a list of content parts");
  json::array parts;
  size_t j = 0;
  for (const auto& p : v.get_array()) {
    const std::string at = where + "[" + std::to_string(j++) + "]";
    if (!p.is_object()) bad(at, "must be an object");
    const std::string type = string_field(p.get_object(), "type", at + ".type");
    if (type == "input_text" || type == "output_text") {
      parts.push_back(text_part(own_type, string_field(p.get_object(), "text", at + ".text")));
    } else if (type == "refusal" && role == "assistant") {
      parts.push_back(text_part(own_type, string_field(p.get_object(), "refusal", at + ".refusal")));
    } else if (type == "input_image" && images_allowed) {
      // {"type": "input_image", "image_url": "data:..."}: a chat image_url part, checked there.
      const json::value* url = field(p.get_object(), "image_url");
      if (!url) {
        bad(at + (field(p.get_object(), "file_id") ? ".file_id" : ".image_url"),
            "is required: send the image inline as a data: URI in image_url (files are not supported here)");
      }
      if (!url->is_string()) bad(at + ".image_url", "must be a string (a data: URI)");
      const std::string_view u = url->get_string();
      if (!u.starts_with("data:")) {
        bad(at + ".image_url", "this server fetches no URLs: send the image inline as a data: URI "
                               "(data:image/png;base64,...)");
      }
      parts.push_back(json::object{{"type", "input_image"}, {"image_url", *url}});
    } else if (type == "input_image") {
      bad(at + ".type", "images belong in user messages");
    } else if (type == "input_file" || type == "input_audio") {
      bad(at + ".type", "'" + type + "' is not supported: this server's models read text and images only");
    } else {
      bad(at + ".type", "must be 'input_text' or 'output_text' (got '" + type + "')");
    }
  }
  return parts;
}

json::object message_item(const json::object& o, const std::string& where) {
  const std::string role = string_field(o, "role", where + ".role");
  if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
    bad(where + ".role", "must be 'user', 'system', 'developer' or 'assistant' (got '" + role + "')");
  }
  const json::value* content = field(o, "content");
  if (!content) bad(where + ".content", "is required");
  return json::object{
      {"type", "message"}, {"role", role}, {"content", message_content(*content, role, where + ".content", role == "user")}};
}

// function_call_output's output: a string, or text parts (joined).
std::string call_output(const json::object& o, const std::string& where) {
  const json::value* v = field(o, "output");
  if (!v) bad(where, "is required");
  if (v->is_string()) return std::string(v->get_string());
  std::string text;
  for (const auto& p : message_content(*v, "user", where)) text += p.as_object().at("text").as_string();
  return text;
}

// The input_image parts of a checked input, by the client's own indices (parse_input drops
// reasoning items, so the normalized items' indices can differ).
std::vector<std::string> input_image_parts(const json::object& body) {
  std::vector<std::string> out;
  const json::value* v = field(body, "input");
  if (!v || !v->is_array()) return out;
  size_t i = 0;
  for (const auto& it : v->get_array()) {
    const std::string at = "input[" + std::to_string(i++) + "]";
    const json::value* content = it.is_object() ? field(it.get_object(), "content") : nullptr;
    if (!content || !content->is_array()) continue;
    size_t j = 0;
    for (const auto& p : content->get_array()) {
      const json::value* type = p.is_object() ? field(p.get_object(), "type") : nullptr;
      if (type && type->is_string() && type->get_string() == "input_image") {
        out.push_back(at + ".content[" + std::to_string(j) + "]");
      }
      ++j;
    }
  }
  return out;
}

json::array parse_input(const json::object& body) {
  const json::value* v = field(body, "input");
  if (!v) bad("input", "is required");
  if (v->is_string()) {
    return json::array{json::object{{"type", "message"},
                                    {"role", "user"},
                                    {"content", json::array{text_part("input_text", std::string(v->get_string()))}}}};
  }
  if (!v->is_array() || v->get_array().empty()) bad("input", "must be a string or a non-empty list of items");
  json::array items;
  size_t i = 0;
  for (const auto& it : v->get_array()) {
    const std::string at = "input[" + std::to_string(i++) + "]";
    if (!it.is_object()) bad(at, "must be an object");
    const auto& o = it.get_object();
    std::string type = string_field(o, "type", at + ".type");
    if (type.empty() && o.contains("role")) type = "message";
    if (type == "message") {
      items.push_back(message_item(o, at));
    } else if (type == "function_call") {
      const json::value* args = field(o, "arguments");
      if (args && !args->is_string()) bad(at + ".arguments", "must be a JSON string");
      items.push_back(json::object{{"type", "function_call"},
                                   {"call_id", required_string(o, "call_id", at + ".call_id")},
                                   {"name", required_string(o, "name", at + ".name")},
                                   {"arguments", args ? json::value(args->get_string()) : json::value("{}")}});
    } else if (type == "function_call_output") {
      items.push_back(json::object{{"type", "function_call_output"},
                                   {"call_id", required_string(o, "call_id", at + ".call_id")},
                                   {"output", call_output(o, at + ".output")}});
    } else if (type == "reasoning") {
      // A reasoning item a client hands back from an earlier output: nothing to render.
    } else if (type.empty()) {
      bad(at + ".type", "is required (or a 'role' for a message)");
    } else {
      bad(at + ".type", "'" + type + "' is not supported (message, function_call, function_call_output)");
    }
  }
  if (items.empty()) bad("input", "has no message or function call items");
  return items;
}

// Responses tools are flat ({"type": "function", "name", "description", "parameters"}); chat
// nests the function. Built-in tools (web_search, file_search, ...) need a service this server
// does not have.
json::array parse_tools(const json::object& body) {
  const json::value* v = field(body, "tools");
  if (!v) return {};
  if (!v->is_array()) bad("tools", "must be a list of tools");
  json::array out;
  size_t i = 0;
  for (const auto& t : v->get_array()) {
    const std::string at = "tools[" + std::to_string(i++) + "]";
    if (!t.is_object()) bad(at, "must be an object");
    const auto& o = t.get_object();
    const std::string type = string_field(o, "type", at + ".type");
    if (type != "function") {
      if (type.empty()) bad(at + ".type", "is required");
      bad(at + ".type",
          "'" + type + "' is a built-in tool this server does not have; only 'function' tools are supported");
    }
    json::object fn{{"name", required_string(o, "name", at + ".name")}};
    if (const json::value* d = field(o, "description")) fn["description"] = *d;
    if (const json::value* p = field(o, "parameters")) {
      if (!p->is_object()) bad(at + ".parameters", "must be a JSON Schema object");
      fn["parameters"] = *p;
    }
    out.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json::value parse_tool_choice(const json::object& body) {
  const json::value* v = field(body, "tool_choice");
  if (!v) return nullptr;
  if (v->is_string()) return *v;  // none / auto / required: the chat parser checks the word
  if (!v->is_object())
    bad("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}");
  const auto& o = v->get_object();
  if (string_field(o, "type", "tool_choice.type") != "function") {
    bad("tool_choice.type", "must be 'function' (built-in tools are not supported)");
  }
  return json::object{{"type", "function"},
                      {"function", json::object{{"name", required_string(o, "name", "tool_choice.name")}}}};
}

// text.format -> response_format.
json::value parse_text_format(const json::object& body) {
  const json::value* text = field(body, "text");
  if (!text) return nullptr;
  if (!text->is_object()) bad("text", "must be an object");
  const json::value* f = field(text->get_object(), "format");
  if (!f) return nullptr;
  if (!f->is_object()) bad("text.format", "must be an object");
  const auto& o = f->get_object();
  const std::string type = string_field(o, "type", "text.format.type");
  if (type == "text") return nullptr;
  if (type == "json_object") return json::object{{"type", "json_object"}};
  if (type != "json_schema") {
    bad("text.format.type", "must be 'text', 'json_object' or 'json_schema' (got '" + type + "')");
  }
  const json::value* schema = field(o, "schema");
  if (!schema || !(schema->is_object() || schema->is_bool())) bad("text.format.schema", "must be a JSON Schema object");
  json::object js{{"name", string_field(o, "name", "text.format.name")}, {"schema", *schema}};
  if (const json::value* strict = field(o, "strict")) js["strict"] = *strict;
  return json::object{{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

json::object parse_metadata(const json::object& body) {
  const json::value* v = field(body, "metadata");
  if (!v) return {};
  if (!v->is_object()) bad("metadata", "must be an object of strings");
  if (v->get_object().size() > 16) bad("metadata", "may hold at most 16 keys");
  for (const auto& kv : v->get_object()) {
    if (kv.key().size() > 64) bad("metadata", "keys may be at most 64 characters");
    if (!kv.value().is_string() || kv.value().get_string().size() > 512) {
      bad("metadata", "values must be strings of at most 512 characters");
    }
  }
  return v->get_object();
}

void reject_unsupported(const json::object& body) {
  for (const char* name : {"conversation", "prompt", "context_management"}) {
    if (field(body, name)) bad(name, "is not supported by this server");
  }
  if (const json::value* b = field(body, "background"); b && !(b->is_bool() && !b->get_bool())) {
    bad("background", "is not supported by this server (responses run while the request is open)");
  }
  if (const json::value* inc = field(body, "include"); inc && !(inc->is_array() && inc->get_array().empty())) {
    bad("include", "is not supported by this server");
  }
  if (const json::value* t = field(body, "top_logprobs"); t && !(t->is_int64() && t->get_int64() == 0)) {
    bad("top_logprobs", "is not supported by this server");
  }
  if (const json::value* t = field(body, "truncation"); t && !(t->is_string() && t->get_string() == "disabled")) {
    bad("truncation", "must be 'disabled' (the server does not drop input to fit the context)");
  }
}

// Chat fields Tandem's chat path takes that the Responses API has no name for: passed on as
// they are (vLLM takes the same extras on its Responses endpoint).
constexpr const char* kSamplingExtras[] = {"seed",
                                           "top_k",
                                           "min_p",
                                           "repetition_penalty",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "stop",
                                           "chat_template_kwargs",
                                           "ignore_eos"};

}  // namespace

responses_request parse_responses_request(const json::value& body, const api_limits& limits) {
  if (!body.is_object()) throw api_error(400, "the request body must be a JSON object");
  const auto& o = body.get_object();
  reject_unsupported(o);
  responses_request r;
  r.input = parse_input(o);
  r.image_parts = input_image_parts(o);
  if (const json::value* ins = field(o, "instructions")) {
    if (!ins->is_string()) bad("instructions", "must be a string");
    r.instructions = std::string(ins->get_string());
  }
  r.previous_response_id = string_field(o, "previous_response_id", "previous_response_id");
  if (r.previous_response_id.size() > 256) bad("previous_response_id", "is longer than any response id");
  if (const json::value* s = field(o, "store")) {
    if (!s->is_bool()) bad("store", "must be true or false");
    r.store = s->get_bool();
  }
  if (const json::value* s = field(o, "stream")) {
    if (!s->is_bool()) bad("stream", "must be true or false");
    r.stream = s->get_bool();
  }
  r.stream_id = string_field(o, "stream_id", "stream_id");
  if (r.stream_id.size() > 256) bad("stream_id", "may be at most 256 bytes");

  auto& chat = r.chat;
  if (const json::value* m = field(o, "model")) chat["model"] = *m;
  const json::array tools = parse_tools(o);
  if (!tools.empty()) chat["tools"] = tools;
  const json::value choice = parse_tool_choice(o);
  if (!choice.is_null()) chat["tool_choice"] = choice;
  if (const json::value* p = field(o, "parallel_tool_calls")) chat["parallel_tool_calls"] = *p;
  const json::value format = parse_text_format(o);
  if (!format.is_null()) chat["response_format"] = format;
  if (const json::value* m = field(o, "max_output_tokens")) {
    const int64_t max_len = std::max<uint32_t>(limits.max_model_len, 1);
    if (!m->is_int64() || m->get_int64() < 1 || m->get_int64() > max_len) {
      bad("max_output_tokens",
          "must be an integer from 1 to " + std::to_string(max_len) + " (got " + json::serialize(*m) + ")");
    }
    chat["max_tokens"] = *m;
  }
  for (const char* name : {"temperature", "top_p", "user"}) {
    if (const json::value* v = field(o, name)) chat[name] = *v;
  }
  // reasoning.effort is the chat path's reasoning_effort (the template's variable).
  json::value effort = nullptr;
  if (const json::value* rs = field(o, "reasoning")) {
    if (!rs->is_object()) bad("reasoning", "must be an object");
    if (const json::value* e = field(rs->get_object(), "effort")) {
      if (!e->is_string()) bad("reasoning.effort", "must be a string");
      chat["reasoning_effort"] = effort = *e;
    }
  }
  for (const char* name : kSamplingExtras) {
    if (const json::value* v = field(o, name)) chat[name] = *v;
  }

  auto& echo = r.echo;
  echo["instructions"] = r.instructions.empty() ? json::value(nullptr) : json::value(r.instructions);
  echo["tools"] = field(o, "tools") ? *field(o, "tools") : json::array{};
  echo["tool_choice"] = field(o, "tool_choice") ? *field(o, "tool_choice") : json::value("auto");
  echo["parallel_tool_calls"] = field(o, "parallel_tool_calls") ? *field(o, "parallel_tool_calls") : json::value(true);
  echo["text"] = field(o, "text") ? *field(o, "text") : json::value(json::object{{"format", {{"type", "text"}}}});
  echo["temperature"] = field(o, "temperature") ? *field(o, "temperature") : json::value(1.0);
  echo["top_p"] = field(o, "top_p") ? *field(o, "top_p") : json::value(1.0);
  echo["max_output_tokens"] = field(o, "max_output_tokens") ? *field(o, "max_output_tokens") : json::value(nullptr);
  echo["metadata"] = parse_metadata(o);
  echo["user"] = field(o, "user") ? *field(o, "user") : json::value(nullptr);
  echo["store"] = r.store;
  echo["previous_response_id"] =
      r.previous_response_id.empty() ? json::value(nullptr) : json::value(r.previous_response_id);
  echo["truncation"] = "disabled";
  echo["background"] = false;
  echo["reasoning"] = json::object{{"effort", effort}, {"summary", nullptr}};
  return r;
}

json::object chat_body(const responses_request& r, const json::array& history) {
  json::object body = r.chat;
  json::array messages;
  if (!r.instructions.empty()) messages.push_back(json::object{{"role", "system"}, {"content", r.instructions}});
  std::unordered_map<std::string, std::string> call_names;  // call_id -> function
  auto add = [&](const json::value& v) {
    const auto& item = v.as_object();
    const std::string_view type = item.at("type").as_string();
    if (type == "message") {
      // Text parts joined; with images, chat parts in order (text, image_url).
      std::string text;
      json::array parts;
      bool images = false;
      for (const auto& p : item.at("content").as_array()) {
        const auto& po = p.as_object();
        if (po.at("type").as_string() == "input_image") {
          images = true;
          if (!text.empty()) parts.push_back(json::object{{"type", "text"}, {"text", std::move(text)}});
          text.clear();
          parts.push_back(json::object{{"type", "image_url"}, {"image_url", json::object{{"url", po.at("image_url")}}}});
        } else {
          text += po.at("text").as_string();
        }
      }
      if (!images) {
        messages.push_back(json::object{{"role", item.at("role")}, {"content", std::move(text)}});
      } else {
        if (!text.empty()) parts.push_back(json::object{{"type", "text"}, {"text", std::move(text)}});
        messages.push_back(json::object{{"role", item.at("role")}, {"content", std::move(parts)}});
      }
    } else if (type == "function_call") {
      const std::string call_id(item.at("call_id").as_string());
      call_names[call_id] = std::string(item.at("name").as_string());
      json::object call{{"id", call_id},
                        {"type", "function"},
                        {"function", json::object{{"name", item.at("name")}, {"arguments", item.at("arguments")}}}};
      // Calls that follow an assistant turn (its text, or other calls) belong to that turn.
      json::object* last = messages.empty() ? nullptr : &messages.back().as_object();
      if (!last || last->at("role").as_string() != "assistant") {
        // Content "", not null: templates that add the content to a string fail on null.
        messages.push_back(json::object{{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array{}}});
        last = &messages.back().as_object();
      }
      if (!last->contains("tool_calls")) (*last)["tool_calls"] = json::array{};
      (*last)["tool_calls"].as_array().push_back(std::move(call));
    } else if (type == "function_call_output") {
      const std::string call_id(item.at("call_id").as_string());
      json::object m{{"role", "tool"}, {"tool_call_id", call_id}, {"content", item.at("output")}};
      if (const auto n = call_names.find(call_id); n != call_names.end()) m["name"] = n->second;
      messages.push_back(std::move(m));
    }
  };
  for (const auto& item : history) add(item);
  for (const auto& item : r.input) add(item);
  body["messages"] = std::move(messages);
  return body;
}

api_request responses_api_request(const responses_request& r, const json::array& history, const api_limits& limits) {
  try {
    api_request req = parse_api_request(chat_body(r, history), api_kind::chat, limits);
    req.stream = r.stream;
    // The images the stored conversation holds come first; a bad one there is the
    // previous response's.
    const size_t earlier = req.gen.images.size() - std::min(req.gen.images.size(), r.image_parts.size());
    std::vector<std::string> parts(earlier, "previous_response_id");
    parts.insert(parts.end(), r.image_parts.begin(), r.image_parts.end());
    if (parts.size() == req.gen.images.size()) req.gen.image_parts = std::move(parts);
    return req;
  } catch (const api_error& e) {
    std::string param = e.param;
    std::string message = e.what();
    auto rename = [&](const std::string& from, const std::string& to) {
      if (param.rfind(from, 0) != 0) return false;
      param = to;
      if (const auto at = message.find("'" + from); at != std::string::npos) {
        const auto end = message.find('\'', at + 1);
        message.replace(at, end == std::string::npos ? std::string::npos : end - at + 1, "'" + to + "'");
      }
      return true;
    };
    rename("messages", "input") || rename("max_tokens", "max_output_tokens") ||
        rename("response_format", "text.format") || rename("tool_choice", "tool_choice");
    if (param.rfind("tools[", 0) == 0) {
      const auto fn = param.find(".function");
      if (fn != std::string::npos) rename(param, param.substr(0, fn) + param.substr(fn + 9));
    }
    throw api_error(e.status, message, param, e.code);
  }
}

}  // namespace tandem::net
