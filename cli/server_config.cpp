#include "cli/server_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/tenants/tenant_limits.h"

namespace tandem::cli {
namespace {

std::string dashes_to_underscores(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A secret's value stays off the screen (and out of logs the output is pasted into).
bool is_secret(const std::string& key) { return ends_with(key, "key"); }

// CLI11 writes a list's default as "[a,b]" (CLI::detail::to_string).
std::vector<std::string> split_default_list(const std::string& text) {
  std::string inner = text;
  if (inner.size() >= 2 && inner.front() == '[' && inner.back() == ']') inner = inner.substr(1, inner.size() - 2);
  std::vector<std::string> out;
  if (inner.empty()) return out;
  std::stringstream in(inner);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// As a person writes it: 120, 0.5, 1e+06.
std::string number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string describe(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  if (n.IsNull()) return "nothing";
  return "'" + n.Scalar() + "'";
}

}  // namespace

server_config::server_config(CLI::App* cmd) : cmd_(cmd) {
  for (CLI::Option* opt : cmd->get_options()) {
    if (opt == cmd->get_help_ptr() || opt->get_lnames().empty()) continue;
    const std::string name = opt->get_lnames().front();
    if (name == "config") continue;
    setting s;
    s.option = opt;
    s.flag = opt->get_expected_max() == 0;
    // `!--no-X` in CLI11: giving the flag stores "false" in its variable.
    s.negated = s.flag && !opt->get_fnames().empty() && opt->get_flag_value(name, "") == "false";
    s.key = dashes_to_underscores(s.negated && name.rfind("no-", 0) == 0 ? name.substr(3) : name);
    s.list = !s.flag && opt->get_items_expected_max() > 1;
    if (s.flag) {
      // A flag turns its variable away from the default: a plain flag's is false, a --no-X one's true.
      s.default_value = s.negated ? "true" : "false";
    } else {
      // The bound variable as it is now, before parsing; --help keeps showing what it showed.
      const std::string shown = opt->get_default_str();
      opt->capture_default_str();
      s.default_value = opt->get_default_str();
      opt->default_str(shown);
    }
    settings_.push_back(std::move(s));
  }
  cmd->add_flag("--print-config", print_,
                "Print the effective configuration (defaults, then the --config file, then these flags) as YAML, "
                "and exit");
}

const server_config::setting* server_config::find(const std::string& key, bool& inverted) const {
  const std::string k = dashes_to_underscores(key);
  inverted = false;
  for (const setting& s : settings_) {
    if (s.key == k) return &s;
    if (s.negated && "no_" + s.key == k) {  // the flag's own name: no_enable_prefix_caching: true
      inverted = true;
      return &s;
    }
  }
  return nullptr;
}

std::vector<tenant_config> server_config::apply(const std::string& path) {
  const auto fail = [&](const std::string& what) -> void {
    throw std::runtime_error("config file " + path + ": " + what);
  };
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    fail("cannot be read");
  } catch (const YAML::Exception& e) {
    fail(e.what());
  }
  applied_path_ = path;
  if (root.IsNull()) return {};  // an empty file sets nothing
  if (!root.IsMap()) fail("expected a map of settings (key: value), got " + describe(root));

  std::vector<tenant_config> tenants;
  std::set<std::string> seen;
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>("");
    const YAML::Node& value = item.second;
    if (!seen.insert(dashes_to_underscores(key)).second) fail("'" + key + "' is set twice");
    if (key == "tenants") {
      tenants = load_tenants_yaml(path);
      continue;
    }
    if (key == "models") {
      models_ = load_models_yaml(path);
      continue;
    }
    if (key == "config") fail("'config': a config file cannot name another one");
    if (key == "print_config" || key == "print-config") fail("'" + key + "' is a command-line flag only");
    bool inverted = false;
    const setting* s = find(key, inverted);
    if (s == nullptr) fail("unknown key '" + key + "' (tandem serve has no --" + key + "; see tandem serve --help)");
    if (s->option->count() > 0) continue;  // given on the command line, which wins
    if (value.IsNull()) fail("'" + key + "' has no value");
    if (value.IsMap()) fail("'" + key + "' takes " + (s->list ? "a list" : "one value") + ", not a map");
    try {
      if (s->flag) {
        bool on = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, on)) {
          fail("'" + key + "' must be true or false, got " + describe(value));
        }
        s->option->add_result(on != inverted ? "true" : "false");
      } else if (value.IsSequence()) {
        if (!s->list) fail("'" + key + "' takes one value, not a list");
        if (value.size() == 0) continue;  // an empty list sets nothing (--print-config writes [] for one)
        for (const auto& v : value) {
          if (!v.IsScalar()) fail("'" + key + "' must be a list of values, one is " + describe(v));
          s->option->add_result(v.Scalar());
        }
      } else {
        s->option->add_result(value.Scalar());
      }
      s->option->run_callback();  // converts and checks, as for the same flag on the command line
    } catch (const CLI::Error& e) {
      fail("'" + key + "': " + e.what());
    }
  }
  return tenants;
}

std::vector<std::string> server_config::values(const setting& s) const {
  if (s.option->count() == 0) return s.list ? split_default_list(s.default_value) : std::vector{s.default_value};
  std::vector<std::string> given = s.option->results();
  if (!s.list) given = {given.back()};  // the last of a repeated flag or option counts
  return given;
}

std::string server_config::effective_yaml(const std::vector<tenant_config>& tenants) const {
  YAML::Emitter out;
  out << YAML::Comment("tandem serve: the effective configuration (defaults, then " +
                       (applied_path_.empty() ? std::string("no config file") : applied_path_) +
                       ", then the command line)")
      << YAML::Newline;
  out << YAML::BeginMap;
  for (const setting& s : settings_) {
    const std::vector<std::string> v = values(s);
    if (is_secret(s.key) && !(v.empty() || (v.size() == 1 && v[0].empty()))) {
      out << YAML::Newline << YAML::Comment(s.key + ": set, not shown");
      continue;
    }
    out << YAML::Key << s.key << YAML::Value;
    if (s.list) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& x : v) out << x;
      out << YAML::EndSeq;
    } else {
      out << v.front();
    }
  }
  out << YAML::Key << "tenants" << YAML::Value << YAML::BeginSeq;
  for (const tenant_config& t : tenants) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << t.name;
    out << YAML::Comment("api_keys: " + std::to_string(t.api_keys.size()) + ", not shown");
    out << YAML::Key << "requests_per_minute" << YAML::Value << number(t.requests_per_minute);
    out << YAML::Key << "tokens_per_minute" << YAML::Value << number(t.tokens_per_minute);
    out << YAML::Key << "max_concurrent_requests" << YAML::Value << t.max_concurrent;
    out << YAML::Key << "weight" << YAML::Value << number(t.weight);
    out << YAML::Key << "kv_cache_share" << YAML::Value << number(t.kv_cache_share);
    if (t.priority != 0) out << YAML::Key << "priority" << YAML::Value << t.priority;
    if (t.max_priority) out << YAML::Key << "max_priority" << YAML::Value << *t.max_priority;
    if (!t.prefix_cache_group.empty()) {
      out << YAML::Key << "prefix_cache_group" << YAML::Value << t.prefix_cache_group;
    }
    if (!t.models.empty()) {
      out << YAML::Key << "models" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& m : t.models) out << m;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!models_.empty()) {
    out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
    for (const model_spec& m : models_) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << m.name << YAML::Key << "path" << YAML::Value
          << m.path;
      if (!m.aliases.empty()) {
        out << YAML::Key << "aliases" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const auto& a : m.aliases) out << a;
        out << YAML::EndSeq;
      }
      if (m.keep_alive_s) out << YAML::Key << "keep_alive" << YAML::Value << number(*m.keep_alive_s);
      if (m.max_num_seqs) out << YAML::Key << "max_num_seqs" << YAML::Value << *m.max_num_seqs;
      if (m.max_model_len) out << YAML::Key << "max_model_len" << YAML::Value << *m.max_model_len;
      if (m.kv_cache_tokens) out << YAML::Key << "kv_cache_tokens" << YAML::Value << *m.kv_cache_tokens;
      if (m.kv_cache_share) out << YAML::Key << "kv_cache_share" << YAML::Value << number(*m.kv_cache_share);
      if (!m.chat_template.empty()) out << YAML::Key << "chat_template" << YAML::Value << m.chat_template;
      if (!m.sha256.empty()) out << YAML::Key << "sha256" << YAML::Value << m.sha256;
      if (m.is_default) out << YAML::Key << "default" << YAML::Value << true;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tandem::cli
