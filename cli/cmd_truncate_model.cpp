// `tandem truncate-model`: writes the first N blocks of a model as a draft model.
#include <cstdio>
#include <stdexcept>

#include "cli/commands.h"
#include "engine/model/model_path.h"
#include "engine/model/model_truncation.h"

namespace tandem::cli {
namespace {

struct truncate_options {
  std::string model = "default";
  std::string out;
  uint32_t layers = 0;
};

void run_truncate(const truncate_options& o) {
  const auto f = gguf::file::open(resolve_model_path(o.model));
  try {
    truncate_layers(f, o.layers).write(o.out);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  std::fprintf(stderr, "wrote %s (first %u blocks)\n", o.out.c_str(), o.layers);
}

}  // namespace

void register_truncate_model(CLI::App& app) {
  auto o = std::make_shared<truncate_options>();
  auto* sub = app.add_subcommand("truncate-model", "Write a layer-truncated copy of a model (a draft model)");
  sub->add_option("-m,--model", o->model, "GGUF file, or 'default'")->capture_default_str();
  sub->add_option("--layers", o->layers, "Blocks to keep")->required();
  sub->add_option("-o,--out", o->out, "Output GGUF path")->required();
  sub->callback([o] { run_truncate(*o); });
}

}  // namespace tandem::cli
