// `tandem generate`: one completion on the CPU, streamed to stdout as it is generated, with
// one stats line on stderr (prompt tokens and speed, generated tokens and speed).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/chat_template.h"
#include "engine/generator.h"
#include "engine/gguf.h"
#include "engine/kv_block_allocator.h"
#include "engine/model.h"
#include "engine/model_path.h"
#include "engine/tokenizer.h"

namespace tandem::cli {
namespace {

struct generate_options {
  std::string model;
  std::string prompt;
  bool chat = false;
  std::string system;
  int max_tokens = 256;
  float temperature = 0.8f;
  float top_p = 0.95f;
  int top_k = 40;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  int threads = 0;
  bool ignore_eos = false;
};

// Chat prompt: markup segments may contain control tokens, message text never does.
std::vector<token_id> chat_prompt(const tokenizer& tok, const gguf::file& f, const generate_options& o) {
  const auto tmpl = chat_template::from_gguf(f);
  std::vector<chat_message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  std::vector<token_id> ids;
  if (tok.add_bos() && tok.bos() >= 0 && !tmpl.renders_bos()) ids.push_back(tok.bos());
  for (const auto& seg : tmpl.render_segments(messages, true)) {
    const auto part = tok.encode(seg.text, false, !seg.is_content);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

void run_generate(const generate_options& o) {
  const auto path = resolve_model_path(o.model);
  auto file = gguf::file::open(path);
  const auto tok = tokenizer::from_gguf(file);
  const std::vector<token_id> prompt =
      o.chat ? chat_prompt(tok, file, o) : tok.encode(o.prompt, true, false);
  if (prompt.empty()) throw std::runtime_error("the prompt is empty");

  model m(file, model_options{o.threads});
  const int64_t tokens = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  kv_pool cache(m.config(), kv_pool_options{16, tokens + 16, 0});
  kv_block_allocator allocator(cache.n_blocks());

  generation_options g;
  g.max_tokens = o.max_tokens;
  g.sampling.temperature = o.temperature;
  g.sampling.top_p = o.top_p;
  g.sampling.top_k = o.top_k;
  g.sampling.min_p = o.min_p;
  g.sampling.repetition_penalty = o.repeat_penalty;
  if (o.seed >= 0) g.sampling.seed = static_cast<uint64_t>(o.seed);
  if (!o.ignore_eos) g.sampling.stop_tokens = tok.end_of_generation_ids();

  incremental_decoder text(tok, false);
  const auto stats = generate(m, cache, allocator, prompt, g, [&](int32_t id) {
    const std::string piece = text.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const std::string rest = text.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  auto rate = [](int32_t n, double s) { return s > 0.0 ? n / s : 0.0; };
  std::fprintf(stderr,
               "prompt tokens: %d (%.1f tok/s), generated tokens: %d (%.1f tok/s), threads: %d, "
               "kernels: %s\n",
               stats.prompt_tokens, rate(stats.prompt_tokens, stats.prompt_seconds),
               stats.generated_tokens,
               rate(stats.generated_tokens > 1 ? stats.generated_tokens - 1 : 0, stats.decode_seconds),
               m.pool().size(), std::string(kernels::best_dot_kernels().isa).c_str());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<generate_options>();
  auto* sub = app.add_subcommand("generate", "Generate a completion on the CPU, streamed to stdout");
  sub->add_option("--prompt", o->prompt, "Prompt text")->required();
  sub->add_option("--model", o->model, "GGUF file, or 'default'")->default_str("default");
  sub->add_flag("--chat", o->chat, "Apply the model's chat template (the prompt is the user message)");
  sub->add_option("--system", o->system, "System message (with --chat)");
  sub->add_option("--max-tokens", o->max_tokens, "Most tokens to generate")->default_val(256)->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy")->default_val(0.8f);
  sub->add_option("--top-p", o->top_p, "Nucleus sampling threshold (1 = off)")->default_val(0.95f);
  sub->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0 = off)")->default_val(40);
  sub->add_option("--min-p", o->min_p, "Drop tokens below min-p times the top probability")->default_val(0.05f);
  sub->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1 = off)")->default_val(1.0f);
  sub->add_option("--seed", o->seed, "Sampling seed (same seed, same output); default random");
  sub->add_option("--threads", o->threads, "CPU threads (default: one per core)");
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep going past end-of-generation tokens");
  sub->callback([o] { run_generate(*o); });
}

}  // namespace tandem::cli
