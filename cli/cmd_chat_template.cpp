// `tandem chat-template`: render a JSON message list with the model's chat template.
#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"

namespace tandem::cli {
namespace {

struct chat_template_options {
  std::string model;
  std::string messages;  // JSON text, or @FILE
  std::string template_name;
  bool no_generation_prompt = false;
};

std::string read_messages_text(const std::string& arg) {
  if (arg.empty() || arg[0] != '@') return arg;
  std::ifstream in(arg.substr(1), std::ios::binary);
  if (!in) throw std::runtime_error("cannot read messages file " + arg.substr(1));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Accepts [{"role": ..., "content": ...}, ...] or {"messages": [...]}.
std::vector<chat_message> parse_messages(const std::string& text) {
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(text, ec);
  if (ec) throw std::runtime_error("--messages is not valid JSON: " + ec.message());
  if (doc.is_object() && doc.as_object().contains("messages")) doc = doc.as_object().at("messages");
  if (!doc.is_array()) throw std::runtime_error("--messages must be a JSON array of {\"role\", \"content\"} objects");
  std::vector<chat_message> out;
  for (const auto& m : doc.as_array()) {
    const auto* o = m.if_object();
    const auto* role = o != nullptr && o->contains("role") ? o->at("role").if_string() : nullptr;
    const auto* content = o != nullptr && o->contains("content") ? o->at("content").if_string() : nullptr;
    if (role == nullptr || content == nullptr) {
      throw std::runtime_error("message " + std::to_string(out.size()) +
                               " needs string fields \"role\" and \"content\"");
    }
    out.push_back({std::string(*role), std::string(*content)});
  }
  return out;
}

void run_chat_template(const chat_template_options& o) {
  const auto messages = parse_messages(read_messages_text(o.messages));
  const auto f = gguf::file::open(resolve_model_path(o.model));
  const auto t = chat_template::from_gguf(f, o.template_name);
  const std::string prompt = t.render(messages, !o.no_generation_prompt);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
}

}  // namespace

void register_chat_template(CLI::App& app) {
  auto opts = std::make_shared<chat_template_options>();
  auto* sub = app.add_subcommand("chat-template", "Render a JSON message list with the model's chat template");
  sub->add_option("-m,--model", opts->model, "GGUF file, or 'default' (the default model)")->default_str("default");
  sub->add_option("--messages,messages", opts->messages,
                  "JSON [{\"role\": \"user\", \"content\": \"Hi\"}, ...], or @FILE holding it")
      ->required();
  sub->add_flag("--no-generation-prompt", opts->no_generation_prompt,
                "Do not end with the start of the assistant's reply");
  std::string names;
  for (auto n : chat_template::known_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  sub->add_option("--chat-template", opts->template_name,
                  "Use this template family instead of the model's (" + names + ")");
  sub->callback([opts] { run_chat_template(*opts); });
}

}  // namespace tandem::cli
