// `tandem quantize IN OUT TYPE`: a GGUF model into another file type, like llama-quantize
// (engine/gguf/quantize_file.h; the per-tensor rule of the _S/_M/_L mixtures is in
// engine/gguf/quant_mixture.h).
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quantize_file.h"
#include "engine/model/model_path.h"

namespace tandem::cli {
namespace {

struct quantize_cli_options {
  std::string in, out, type;
  bool allow_requantize = false;
  unsigned threads = 0;
  bool quiet = false;
};

std::string file_type_names() {
  std::string out;
  for (const auto& ft : gguf::file_types()) {
    if (!out.empty()) out += ", ";
    out += ft.name;
  }
  return out;
}

void run_quantize(const quantize_cli_options& o) {
  const auto ft = gguf::parse_file_type(o.type);
  if (!ft) throw std::runtime_error("unknown file type '" + o.type + "' (one of " + file_type_names() + ")");
  const auto in_path = resolve_model_path(o.in);
  const auto in = gguf::file::open(in_path);
  const auto t0 = std::chrono::steady_clock::now();
  gguf::quantize_options options;
  options.allow_requantize = o.allow_requantize;
  options.threads = o.threads;
  size_t n = 0;
  options.on_tensor = [&](const std::string& name, tensor_type from, tensor_type to) {
    ++n;
    if (o.quiet) return;
    std::fprintf(stderr, "[%4zu/%4zu] %-36s %-6s -> %s\n", n, in.tensors().size(), name.c_str(),
                 std::string(traits_of(from).name).c_str(), std::string(traits_of(to).name).c_str());
  };
  const auto w = gguf::quantize_model(in, *ft, options);
  w.write(o.out);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s (%s - %s) in %.1f s\n", o.out.c_str(), std::string(ft->name).c_str(),
               file_type_name(ft->id).c_str(), s);
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<quantize_cli_options>();
  auto* sub = app.add_subcommand("quantize", "Convert a GGUF model to another file type (like llama-quantize)");
  sub->add_option("in", o->in, "Input GGUF (F32/F16/BF16, or quantized with --allow-requantize; 'default' ok)")
      ->required();
  sub->add_option("out", o->out, "Output GGUF path")->required();
  sub->add_option("type", o->type, "File type: " + file_type_names())->required();
  sub->add_flag("--allow-requantize", o->allow_requantize, "Allow quantized input tensors (dequantized first)");
  sub->add_option("-t,--threads", o->threads, "Threads (default: all)");
  sub->add_flag("-q,--quiet", o->quiet, "Do not list the tensors");
  sub->callback([o] { run_quantize(*o); });
}

}  // namespace tandem::cli
