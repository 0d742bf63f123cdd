// `tandem chat-template`: render a JSON message list with a chat template (the model's own,
// a Jinja file, or a built-in family), as the server renders it.
//
//   tandem chat-template --messages '[{"role": "user", "content": "Hi"}]'
//   tandem chat-template --template-file t.jinja --messages @m.json --tools @tools.json
//   tandem chat-template --template-file t.jinja --batch < cases.jsonl   (one JSON line out per line in)
#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/output_parser.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"

namespace tandem::cli {
namespace {

namespace json = boost::json;

struct chat_template_options {
  std::string model;
  bool model_given = false;
  std::string messages;  // JSON text, or @FILE
  std::string tools;     // JSON text, or @FILE
  std::string template_kwargs;
  std::string template_name;
  std::string template_file;
  std::string bos, eos;
  long long now = -1;
  bool no_generation_prompt = false;
  bool segments = false;
  std::string parse_output;  // a reply to parse (text, or @FILE)
  std::string tool_parser;
  bool batch = false;
};

std::string read_arg_text(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  std::ifstream in(arg.substr(1), std::ios::binary);
  if (!in) throw std::runtime_error("cannot read file " + arg.substr(1));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json::value parse_json(const std::string& text, const char* what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) throw std::runtime_error(std::string(what) + " is not valid JSON: " + ec.message());
  return v;
}

std::string string_field(const json::object& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return {};
  if (!it->value().is_string()) throw std::runtime_error(where + "." + key + " must be a string");
  return std::string(it->value().get_string());
}

// OpenAI's message form: content a string, null, or a list of {"type": "text", "text"} parts;
// assistant tool_calls with arguments as a JSON string (or an object, as transformers takes).
chat_message message_of(const json::value& v, const std::string& where) {
  const auto* o = v.if_object();
  if (o == nullptr) throw std::runtime_error(where + " must be an object");
  chat_message m;
  m.role = string_field(*o, "role", where);
  if (m.role.empty()) throw std::runtime_error(where + " needs a string field \"role\"");
  const auto c = o->find("content");
  if (c == o->end() || c->value().is_null()) {
    m.content_is_null = true;
  } else if (c->value().is_string()) {
    m.content = std::string(c->value().get_string());
  } else if (c->value().is_array()) {
    for (const auto& part : c->value().get_array()) {
      const auto* p = part.if_object();
      if (p == nullptr || string_field(*p, "type", where + ".content[]") != "text") {
        throw std::runtime_error(where + ".content: only text parts are supported");
      }
      m.content += string_field(*p, "text", where + ".content[]");
    }
  } else {
    throw std::runtime_error(where + ".content must be a string, null or a list of text parts");
  }
  m.reasoning_content = string_field(*o, "reasoning_content", where);
  m.tool_call_id = string_field(*o, "tool_call_id", where);
  m.name = string_field(*o, "name", where);
  if (const auto tc = o->find("tool_calls"); tc != o->end() && !tc->value().is_null()) {
    if (!tc->value().is_array()) throw std::runtime_error(where + ".tool_calls must be a list");
    for (const auto& call : tc->value().get_array()) {
      const std::string cw = where + ".tool_calls[" + std::to_string(m.tool_calls.size()) + "]";
      const auto* co = call.if_object();
      const auto fn = co != nullptr ? co->find("function") : nullptr;
      if (co == nullptr || fn == co->end() || !fn->value().is_object()) {
        throw std::runtime_error(cw + " needs a \"function\" object");
      }
      const auto& fo = fn->value().get_object();
      chat_tool_call t;
      t.id = string_field(*co, "id", cw);
      t.name = string_field(fo, "name", cw + ".function");
      const auto args = fo.find("arguments");
      if (args != fo.end())
        t.arguments =
            args->value().is_string() ? std::string(args->value().get_string()) : json::serialize(args->value());
      m.tool_calls.push_back(std::move(t));
    }
  }
  return m;
}

// Accepts [{"role": ..., "content": ...}, ...] or {"messages": [...]}.
std::vector<chat_message> messages_of(json::value doc) {
  if (doc.is_object() && doc.as_object().contains("messages")) doc = doc.as_object().at("messages");
  if (!doc.is_array()) throw std::runtime_error("messages must be a JSON array of {\"role\", \"content\"} objects");
  std::vector<chat_message> out;
  for (const auto& m : doc.as_array()) out.push_back(message_of(m, "message " + std::to_string(out.size())));
  return out;
}

chat_template load_template(const chat_template_options& o) {
  std::string bos = o.bos, eos = o.eos;
  std::optional<gguf::file> f;
  if (o.template_file.empty() || o.model_given) {
    f = gguf::file::open(resolve_model_path(o.model));
  }
  if (!o.template_file.empty()) {
    if (f && bos.empty() && eos.empty()) {
      const auto from_model = chat_template::from_gguf(*f, "chatml");
      bos = from_model.bos_text();
      eos = from_model.eos_text();
    }
    return chat_template::from_file(o.template_file, bos, eos);
  }
  return chat_template::from_gguf(*f, o.template_name);
}

std::string render_one(const chat_template& t, const std::vector<chat_message>& messages,
                       const chat_render_options& opts, bool as_segments) {
  if (!as_segments) return t.render(messages, opts);
  json::array segs;
  for (const auto& s : t.render_segments(messages, opts)) {
    segs.push_back(json::object{{"text", s.text}, {"content", s.is_content}});
  }
  return json::serialize(segs) + "\n";
}

chat_render_options base_options(const chat_template_options& o) {
  chat_render_options opts;
  opts.add_generation_prompt = !o.no_generation_prompt;
  if (o.now >= 0) opts.now = static_cast<std::time_t>(o.now);
  return opts;
}

// --batch: each stdin line {"messages", "tools", "add_generation_prompt", "template_kwargs"}
// -> one line {"rendered": TEXT} or {"error": MESSAGE}.
void run_batch(const chat_template& t, const chat_template_options& o) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json::object out;
    try {
      const json::value req = parse_json(line, "batch line");
      if (!req.is_object()) throw std::runtime_error("a batch line must be a JSON object");
      const auto& r = req.get_object();
      chat_render_options opts = base_options(o);
      if (const auto g = r.find("add_generation_prompt"); g != r.end() && g->value().is_bool()) {
        opts.add_generation_prompt = g->value().get_bool();
      }
      if (const auto tl = r.find("tools"); tl != r.end() && !tl->value().is_null()) {
        opts.tools_json = json::serialize(tl->value());
      }
      if (const auto kw = r.find("template_kwargs"); kw != r.end() && !kw->value().is_null()) {
        opts.template_kwargs_json = json::serialize(kw->value());
      }
      const auto msgs = r.find("messages");
      if (msgs == r.end()) throw std::runtime_error("a batch line needs \"messages\"");
      out["rendered"] = render_one(t, messages_of(msgs->value()), opts, o.segments);
    } catch (const std::exception& e) {
      out["error"] = e.what();
    }
    std::cout << json::serialize(out) << "\n" << std::flush;
  }
}

// --parse-output: the reply split as the server would: reasoning, content, tool calls.
void run_parse_output(const chat_template& t, const chat_template_options& o, const std::string& prompt) {
  chat_output_options po;
  po.parse_tool_calls = !o.tools.empty();
  if (!o.tool_parser.empty()) po.tool_syntax = tool_call_parser::syntax_named(o.tool_parser);
  chat_output_parser p(t, prompt, po);
  (void)p.feed(read_arg_text(o.parse_output));
  (void)p.finish();
  json::array calls;
  for (const auto& c : p.tool_calls()) {
    calls.push_back(json::object{
        {"id", c.id}, {"type", "function"}, {"function", json::object{{"name", c.name}, {"arguments", c.arguments}}}});
  }
  json::object msg{{"role", "assistant"}};
  msg["content"] = p.content().empty() && !calls.empty() ? json::value(nullptr) : json::value(p.content());
  if (!p.reasoning_content().empty()) msg["reasoning_content"] = p.reasoning_content();
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  std::cout << json::serialize(msg) << "\n";
}

void run_chat_template(const chat_template_options& o) {
  const chat_template t = load_template(o);
  if (o.batch) {
    run_batch(t, o);
    return;
  }
  if (o.messages.empty()) throw std::runtime_error("--messages is required (or --batch)");
  const auto messages = messages_of(parse_json(read_arg_text(o.messages), "--messages"));
  chat_render_options opts = base_options(o);
  if (!o.tools.empty()) {
    const json::value tools = parse_json(read_arg_text(o.tools), "--tools");
    if (!tools.is_null()) opts.tools_json = json::serialize(tools);
  }
  if (!o.template_kwargs.empty()) {
    opts.template_kwargs_json = json::serialize(parse_json(read_arg_text(o.template_kwargs), "--template-kwargs"));
  }
  const std::string prompt = render_one(t, messages, opts, o.segments);
  if (!o.parse_output.empty()) {
    run_parse_output(t, o, t.render(messages, opts));
    return;
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
}

}  // namespace

void register_chat_template(CLI::App& app) {
  auto opts = std::make_shared<chat_template_options>();
  auto* sub = app.add_subcommand("chat-template", "Render a JSON message list with the model's chat template");
  sub->add_option("-m,--model", opts->model, "GGUF file, or 'default' (the default model)")->default_str("default");
  sub->add_option("--messages,messages", opts->messages,
                  "JSON [{\"role\": \"user\", \"content\": \"Hi\"}, ...], or @FILE holding it");
  sub->add_option("--tools", opts->tools, "JSON list of tool definitions (OpenAI's form), or @FILE");
  sub->add_option("--template-kwargs", opts->template_kwargs,
                  "JSON object of extra template variables (e.g. {\"enable_thinking\": false}), or @FILE");
  sub->add_flag("--no-generation-prompt", opts->no_generation_prompt,
                "Do not end with the start of the assistant's reply");
  std::string names;
  for (auto n : chat_template::known_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  sub->add_option("--chat-template", opts->template_name,
                  "Use this template instead of the model's: a Jinja file, a template name of the model "
                  "(tokenizer.chat_template.NAME) or a built-in family (" +
                      names + ")");
  sub->add_option("--template-file", opts->template_file, "Render this Jinja file (no model needed)");
  sub->add_option("--bos", opts->bos, "bos_token for --template-file (default: the model's when -m is given)");
  sub->add_option("--eos", opts->eos, "eos_token for --template-file");
  sub->add_option("--now", opts->now, "strftime_now's clock, seconds since the epoch (UTC)");
  sub->add_flag("--segments", opts->segments, "Print the markup/content segments as JSON");
  sub->add_option("--parse-output", opts->parse_output,
                  "Parse this model reply (text or @FILE) after the prompt of --messages: prints the assistant "
                  "message (content, reasoning_content, tool_calls when --tools is given) as JSON");
  sub->add_option("--tool-parser", opts->tool_parser,
                  "Tool-call syntax for --parse-output: hermes, llama3, mistral, generic, harmony (default: the "
                  "template's)");
  sub->add_flag("--batch", opts->batch,
                "Render each stdin line {\"messages\", \"tools\", \"add_generation_prompt\"} to a JSON line");
  sub->callback([opts, sub] {
    opts->model_given = sub->count("--model") > 0;
    run_chat_template(*opts);
  });
}

}  // namespace tandem::cli
