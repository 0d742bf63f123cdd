// `tandem detokenize`: token ids back to text.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

struct detokenize_options {
  std::string model;
  std::vector<std::string> ids;  // each may hold several ids separated by commas or spaces
  bool hide_special = false;
};

std::vector<token_id> parse_ids(const std::vector<std::string>& args) {
  std::vector<token_id> ids;
  for (const auto& arg : args) {
    size_t pos = 0;
    while (pos < arg.size()) {
      if (arg[pos] == ',' || arg[pos] == ' ' || arg[pos] == '\t' || arg[pos] == '\n' || arg[pos] == '[' ||
          arg[pos] == ']') {
        ++pos;
        continue;
      }
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(arg.substr(pos), &used);
      } catch (const std::exception&) {
        throw std::runtime_error("not a token id: '" + arg.substr(pos) + "'");
      }
      if (v < 0 || v > INT32_MAX) throw std::runtime_error("token id out of range: " + std::to_string(v));
      ids.push_back(static_cast<token_id>(v));
      pos += used;
    }
  }
  return ids;
}

void run_detokenize(const detokenize_options& o) {
  const auto tok = tokenizer::from_gguf(gguf::file::open(resolve_model_path(o.model)));
  const auto ids = parse_ids(o.ids);
  for (token_id id : ids) {
    if (id >= static_cast<token_id>(tok.vocab_size())) {
      throw std::runtime_error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                               std::to_string(tok.vocab_size()) + " tokens)");
    }
  }
  const std::string text = tok.decode(ids, !o.hide_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

void register_detokenize(CLI::App& app) {
  auto opts = std::make_shared<detokenize_options>();
  auto* sub = app.add_subcommand("detokenize", "Turn token ids back into text");
  sub->add_option("-m,--model", opts->model, "GGUF file, or 'default' (the default model)")->default_str("default");
  sub->add_option("--ids,ids", opts->ids, "Token ids: '1,2,3' or separate arguments")->required();
  sub->add_flag("--no-special", opts->hide_special, "Render control tokens (e.g. <|im_end|>) as nothing");
  sub->callback([opts] { run_detokenize(*opts); });
}

}  // namespace tandem::cli
