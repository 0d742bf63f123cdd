// The server config file of `tandem serve --config FILE` (YAML), and --print-config.
//
//   built-in defaults  <  the config file  <  the command line
//
// Every option of the serve command is a key: its long name without the dashes, with '_' or
// '-' between words (max_num_seqs, max-num-seqs). Flags take true or false, and a `--no-X`
// flag is the key X (enable_prefix_caching: false). A list option (allowed_origins) takes a
// YAML list or one comma-separated string. `tenants` is the tenants list that
// engine/tenants/tenant_limits.h reads, so a tenants file is a server config file as it is;
// `models` is the list of models a server of several serves (models/model_spec.h).
// Unknown keys, wrong types and refused values are errors naming the file and the key.
//
// The keys come from the command's options themselves (CLI11), so a flag added to serve is
// settable here with no change to this file.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "tandem/tenants.h"

namespace tandem::cli {

class server_config {
 public:
  // Adds --print-config to `cmd` and records the defaults of its options: construct it after
  // every other option of the command has been added.
  explicit server_config(CLI::App* cmd);

  // Sets every option the command line left unset that the file names, through the option
  // itself (its conversion and checks), and returns the file's tenants (none without the key).
  // Throws std::runtime_error naming the file and the key.
  std::vector<tenant_config> apply(const std::string& path);

  bool print_requested() const { return print_; }
  // The file's `models` list (models/model_spec.h), read specially as `tenants` is; empty
  // without the key.
  const std::vector<model_spec>& models() const { return models_; }

  // The effective settings as YAML that --config reads back. Values of options whose name ends
  // in "key", and tenants' api_keys, are not shown: a comment says whether they are set.
  std::string effective_yaml(const std::vector<tenant_config>& tenants) const;

 private:
  struct setting {
    CLI::Option* option = nullptr;
    std::string key;            // as printed: max_num_seqs
    bool flag = false;          // takes no value on the command line
    bool negated = false;       // a --no-X flag: the key X is the negation of the flag
    bool list = false;          // takes several values
    std::string default_value;  // the bound variable's value before parsing, as CLI11 writes it
  };
  const setting* find(const std::string& key, bool& inverted) const;
  std::vector<std::string> values(const setting& s) const;

  CLI::App* cmd_;
  bool print_ = false;
  std::vector<setting> settings_;  // in the order of --help
  std::string applied_path_;
  std::vector<model_spec> models_;
};

}  // namespace tandem::cli
