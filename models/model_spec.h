// The models a server may serve: `--model NAME=PATH` (repeated) or the config file's list
//
//   models:
//     - name: small
//       path: /models/small.gguf      # or "default"
//       aliases: [gpt-4o-mini]
//       keep_alive: 5m                # seconds or 30s / 5m / 2h; -1 = while the server runs
//       max_num_seqs: 16              # per-model runtime limits (the server's flags otherwise)
//       max_model_len: 4096
//       kv_cache_tokens: 8192
//       kv_cache_share: 0.5           # or: this share of the server's --kv-cache-tokens
//       chat_template: /etc/guard.jinja   # a Jinja file (or a template name) for this model, as
//                                     #   --chat-template is for the server's models
//       default: true                 # serves requests that name no model (else the first)
//
// Plain C++ (yaml-cpp); the supervisor (models/supervisor.h) owns what is made of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct model_spec {
  std::string name;
  std::string path;
  std::vector<std::string> aliases;
  std::optional<double> keep_alive_s;  // unset: the server's --models-keep-alive
  std::optional<uint32_t> max_num_seqs;
  std::optional<uint32_t> max_model_len;
  std::optional<uint64_t> kv_cache_tokens;
  std::optional<double> kv_cache_share;  // (0, 1]: of the server's KV cache tokens
  std::string chat_template;  // set: this model's template (a Jinja file's path or a name), else --chat-template's
  std::string sha256;         // set (64 lowercase hex digits): the file must have this SHA-256 to be served
  bool is_default = false;
};

// "NAME=PATH" -> a spec; a plain PATH -> nullopt. Throws std::runtime_error for an empty name
// or path, or a name with characters other than letters, digits and . _ - /.
std::optional<model_spec> parse_model_arg(const std::string& arg);

// Ollama's keep_alive: a number of seconds, or a number with s, m or h ("30s", "5m", "1.5h");
// negative: forever. Throws std::runtime_error naming `what`.
double parse_keep_alive(const std::string& text, const std::string& what);

// The config file's `models` list (the YAML node as text, from cli/server_config); throws
// std::runtime_error naming the file, the model and the field.
std::vector<model_spec> load_models_yaml(const std::string& path);

// Names and aliases are unique across `models`, none contains ':' (it splits NAME:ADAPTER),
// at most one is the default. Throws std::runtime_error naming the duplicate.
void check_models(const std::vector<model_spec>& models);

}  // namespace tandem
