#include "models/model_spec.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>

namespace tandem {
namespace {

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 128) return false;
  for (const char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::optional<model_spec> parse_model_arg(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) return std::nullopt;
  model_spec s;
  s.name = arg.substr(0, eq);
  s.path = arg.substr(eq + 1);
  if (!valid_name(s.name)) {
    throw std::runtime_error("--model " + arg +
                             ": NAME must be 1 to 128 letters, digits or . _ - / (NAME=PATH, or a plain PATH)");
  }
  if (s.path.empty()) throw std::runtime_error("--model " + arg + ": no PATH after '='");
  return s;
}

double parse_keep_alive(const std::string& text, const std::string& what) {
  if (text.empty()) throw std::runtime_error(what + ": empty keep_alive");
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  }
  if (end == text.c_str() || scale == 0 || !std::isfinite(x)) {
    throw std::runtime_error(what + ": keep_alive '" + text + "' is not seconds, or a number with s, m or h");
  }
  return x < 0 ? -1 : x * scale;
}

std::vector<model_spec> load_models_yaml(const std::string& path) {
  const auto fail = [&](const std::string& what) -> void {
    throw std::runtime_error("config file " + path + ": models: " + what);
  };
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail(e.what());
  }
  const YAML::Node list = root["models"];
  if (!list || !list.IsSequence()) fail("expected a list of models (name, path, ...)");
  static const std::set<std::string> known{"name",         "path",          "aliases",         "keep_alive",
                                           "max_num_seqs", "max_model_len", "kv_cache_tokens", "kv_cache_share",
                                           "sha256",       "default",       "chat_template"};
  std::vector<model_spec> out;
  for (const auto& n : list) {
    if (!n.IsMap()) fail("each model is a map (name, path, ...)");
    model_spec s;
    s.name = n["name"] && n["name"].IsScalar() ? n["name"].Scalar() : "";
    if (!valid_name(s.name)) fail("every model needs a name of 1 to 128 letters, digits or . _ - /");
    const std::string where = "model '" + s.name + "'";
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>("");
      if (!known.count(key)) fail(where + ": unknown field '" + key + "'");
    }
    s.path = n["path"] && n["path"].IsScalar() ? n["path"].Scalar() : "";
    if (s.path.empty()) fail(where + " has no path");
    if (const auto a = n["aliases"]) {
      if (a.IsScalar()) {
        s.aliases.push_back(a.Scalar());
      } else if (a.IsSequence()) {
        for (const auto& x : a) {
          if (!x.IsScalar()) fail(where + ": 'aliases' must be a list of names");
          s.aliases.push_back(x.Scalar());
        }
      } else {
        fail(where + ": 'aliases' must be a list of names");
      }
      for (const auto& al : s.aliases) {
        if (!valid_name(al)) fail(where + ": alias '" + al + "' must be letters, digits or . _ - /");
      }
    }
    const auto whole = [&](const char* field, double lo, double hi) -> std::optional<double> {
      const YAML::Node v = n[field];
      if (!v) return std::nullopt;
      double x = 0;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !std::isfinite(x) || x != std::floor(x) || x < lo ||
          x > hi) {
        fail(where + ": '" + field + "' must be a whole number in [" + std::to_string(static_cast<int64_t>(lo)) + ", " +
             std::to_string(static_cast<int64_t>(hi)) + "]");
      }
      return x;
    };
    try {
      if (const auto k = n["keep_alive"]) {
        if (!k.IsScalar()) fail(where + ": 'keep_alive' must be seconds or a duration (5m)");
        s.keep_alive_s = parse_keep_alive(k.Scalar(), where);
      }
    } catch (const std::runtime_error& e) {
      fail(e.what());
    }
    if (const auto v = whole("max_num_seqs", 1, 65536)) s.max_num_seqs = static_cast<uint32_t>(*v);
    if (const auto v = whole("max_model_len", 0, 1 << 24)) s.max_model_len = static_cast<uint32_t>(*v);
    if (const auto v = whole("kv_cache_tokens", 0, double(uint64_t{1} << 32))) s.kv_cache_tokens = uint64_t(*v);
    if (const auto v = n["kv_cache_share"]) {
      double x = 0;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, x) || !(x > 0 && x <= 1)) {
        fail(where + ": 'kv_cache_share' must be in (0, 1]");
      }
      s.kv_cache_share = x;
    }
    if (const auto v = n["sha256"]) {
      std::string hex = v.IsScalar() ? v.Scalar() : "";
      for (char& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
        fail(where + ": 'sha256' must be the file's SHA-256 as 64 hex digits");
      }
      s.sha256 = std::move(hex);
    }
    if (const auto v = n["chat_template"]) {
      s.chat_template = v.IsScalar() ? v.Scalar() : "";
      if (s.chat_template.empty()) fail(where + ": 'chat_template' must be a Jinja file's path or a template name");
      // A path (it has a '/') must name a file now, not when the model first loads.
      if (s.chat_template.find('/') != std::string::npos && !std::filesystem::is_regular_file(s.chat_template)) {
        fail(where + ": 'chat_template' " + s.chat_template + " is not a file");
      }
    }
    if (const auto v = n["default"]) {
      if (!v.IsScalar() || !YAML::convert<bool>::decode(v, s.is_default)) fail(where + ": 'default' is true or false");
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) fail("the list is empty");
  try {
    check_models(out);
  } catch (const std::runtime_error& e) {
    fail(e.what());
  }
  return out;
}

void check_models(const std::vector<model_spec>& models) {
  std::set<std::string> names;
  int defaults = 0;
  for (const auto& m : models) {
    if (!names.insert(m.name).second) throw std::runtime_error("the model name '" + m.name + "' is used twice");
    for (const auto& a : m.aliases) {
      if (!names.insert(a).second)
        throw std::runtime_error("the name '" + a + "' (an alias of '" + m.name + "') is used twice");
    }
    defaults += m.is_default ? 1 : 0;
  }
  if (defaults > 1) throw std::runtime_error("more than one model says default: true");
}

}  // namespace tandem
