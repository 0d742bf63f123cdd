// `tandem tokenize`: the token ids and pieces of a text, as a table or as JSON.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/text_escape.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

struct tokenize_options {
  std::string model;
  std::string prompt;
  bool prompt_given = false;
  bool json = false;
  bool no_bos = false;
  bool parse_special = false;
};

void run_tokenize(const tokenize_options& o) {
  const auto tok = tokenizer::from_gguf(gguf::file::open(resolve_model_path(o.model)));
  std::string text = o.prompt;
  if (!o.prompt_given) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const auto ids = tok.encode(text, !o.no_bos, o.parse_special);

  if (o.json) {
    boost::json::array id_list, tokens;
    for (token_id id : ids) {
      id_list.emplace_back(id);
      boost::json::object t;
      t["id"] = id;
      t["text"] = tok.token_text(id);
      const std::string& piece = tok.piece(id);
      if (utf8::is_valid(piece)) {
        t["piece"] = piece;
      } else {
        t["piece_hex"] = to_hex(piece);  // part of a multi-byte character
      }
      t["control"] = tok.is_control(id);
      tokens.emplace_back(std::move(t));
    }
    boost::json::object doc;
    doc["ids"] = std::move(id_list);
    doc["tokens"] = std::move(tokens);
    doc["count"] = ids.size();
    std::printf("%s\n", boost::json::serialize(doc).c_str());
    return;
  }
  for (token_id id : ids) {
    std::printf("%8d  '%s'%s\n", id, escape_for_terminal(tok.piece(id)).c_str(),
                tok.is_control(id) ? "  (control)" : "");
  }
  std::printf("%zu tokens\n", ids.size());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<tokenize_options>();
  auto* sub = app.add_subcommand("tokenize", "Show the token ids and pieces of a text");
  sub->add_option("-m,--model", opts->model, "GGUF file, or 'default' (the default model)")->default_str("default");
  sub->add_option("-p,--prompt,prompt", opts->prompt, "Text to tokenize (read from stdin when absent)");
  sub->add_flag("--json", opts->json, "Print JSON: ids and, per token, id, vocabulary text and piece");
  sub->add_flag("--no-bos", opts->no_bos, "Do not add BOS/EOS even where the model asks for them");
  sub->add_flag("--parse-special", opts->parse_special,
                "Turn special-token text (e.g. <|im_end|>) into special tokens; by default it is plain text");
  sub->callback([opts, sub] {
    opts->prompt_given = sub->count("--prompt") > 0;
    run_tokenize(*opts);
  });
}

}  // namespace tandem::cli
