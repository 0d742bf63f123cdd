// `tandem generate`: one completion, streamed to stdout as it is generated, with one stats
// line on stderr (prompt tokens and speed, generated tokens and speed). On the CPU engine
// directly; through the actor runtime with --speculative or --device cuda.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "actors/sampling_params_from.h"
#include "cli/commands.h"
#include "cli/model_sha256.h"
#include "cli/speculative_options.h"
#include "cli/tiled_cache_options.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/prompt_encoder.h"
#include "engine/gguf/gguf.h"
#include "engine/model/generator.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"
#include "gpu/cli/device_options.h"

#include <fstream>
#include <iterator>

namespace tandem::cli {
namespace {

struct generate_options {
  std::string model;
  std::string model_sha256;  // set: the file must have this SHA-256 (cli/model_sha256.h)
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
  runtime_config rt;  // the speculative-decoding options, --mmproj
  device_options device;
  std::vector<std::string> images;  // --image FILE: before the prompt, in order (needs --chat)
};

// A file's bytes as a data: URI (percent-encoded: decode_data_uri reads either form).
std::string file_data_uri(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("--image: cannot read '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const char* hex = "0123456789ABCDEF";
  std::string uri = "data:application/octet-stream,";
  uri.reserve(uri.size() + 3 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    uri += '%';
    uri += hex[b >> 4];
    uri += hex[b & 15];
  }
  return uri;
}

std::vector<chat_message> chat_messages(const generate_options& o) {
  std::vector<chat_message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  return messages;
}

// With --speculative or --device cuda: the same completion through the actor runtime
// (drafter, the scheduler's speculation policy and the batched verification step; or the
// GPU device worker), printing speculation figures in the stats line when drafting.
void run_on_runtime(const generate_options& o);

// The sampling flags as the runtime takes them; run_generate hands the engine the same
// through sampling_params_from, as the device workers do.
sampling_options sampling_of(const generate_options& o) {
  sampling_options s;
  s.temperature = o.temperature;
  s.top_p = o.top_p;
  s.top_k = o.top_k;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repeat_penalty;
  s.seed = o.seed;
  return s;
}

void run_generate(const generate_options& o) {
  verify_model_sha256(o.model, o.model_sha256, stderr);  // before any of the file is used
  if (!o.images.empty() && (o.rt.mmproj.empty() || !o.chat)) {
    throw std::runtime_error("--image needs --mmproj PATH and --chat");
  }
  if (o.rt.speculative != "none" || o.device.cuda() || !o.rt.mmproj.empty()) return run_on_runtime(o);
  const auto path = resolve_model_path(o.model);
  auto file = gguf::file::open(path);
  const auto tok = tokenizer::from_gguf(file);
  const std::vector<token_id> prompt =
      o.chat ? encode_chat(tok, chat_template::from_gguf(file, o.rt.chat_template), chat_messages(o), true)
             : encode_prompt(tok, o.prompt);
  if (prompt.empty()) throw std::runtime_error("the prompt is empty");

  model_options mo;
  mo.n_threads = o.threads;
  mo.tiled_cache_dir = o.rt.tiled_cache_dir_in_use();
  model m(file, mo);
  const int64_t tokens = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  kv_pool cache(m.config(), kv_pool_options{16, tokens + 16, 0, parse_kv_cache_dtype(o.rt.kv_cache_dtype)});
  kv_block_allocator allocator(cache.n_blocks());

  generation_options g;
  g.max_tokens = o.max_tokens;
  g.sampling = sampling_params_from(sampling_of(o));
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
  // A stop token is not printed but was generated: counted, as the runtime path and the
  // API's usage count it (the same output gave 87 here and 88 with --speculative).
  const int32_t generated = stats.generated_tokens + (stats.stopped ? 1 : 0);
  std::fprintf(stderr,
               "prompt tokens: %d (%.1f tok/s), generated tokens: %d (%.1f tok/s), threads: %d, "
               "kernels: %s\n",
               stats.prompt_tokens, rate(stats.prompt_tokens, stats.prompt_seconds), generated,
               rate(generated > 1 ? generated - 1 : 0, stats.decode_seconds), m.pool().size(),
               std::string(kernels::best_dot_kernels().isa).c_str());
}

using printed_atom = caf::atom_constant<caf::atom("printed")>;

// Prints deltas as they come; reports the final event to `owner`.
sink_actor::behavior_type printing_sink(sink_actor::pointer self, caf::actor owner) {
  return {
      [](const generation_delta& d) {
        std::fwrite(d.text.data(), 1, d.text.size(), stdout);
        std::fflush(stdout);
      },
      [self, owner](const generation_done& d) {
        caf::anon_send(owner, printed_atom::value, d.reason, d.error, d.prompt_tokens, d.completion_tokens, d.ttft_ms,
                       d.tpot_ms);
        self->quit();
      },
  };
}

void run_on_runtime(const generate_options& o) {
  runtime_config rc = o.rt;
  rc.model = o.model.empty() ? "default" : o.model;
  rc.threads = o.threads;
  // Before any actor exists: --device cuda without a usable GPU fails here, with one line.
  const auto device = apply_device_options(o.device, rc);
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};
  auto rt = runtime::start(sys, rc, device ? &*device : nullptr);

  generate_request req;
  if (o.chat) {
    for (const auto& m : chat_messages(o)) req.messages.push_back({m.role, m.content});
    // Images lead the user's message, as llama-mtmd-cli places them when the prompt names none.
    if (!o.images.empty()) {
      req.media_marker = "<__image_cli__>";
      std::string lead;
      for (const auto& path : o.images) {
        req.images.push_back(file_data_uri(path));
        req.image_parts.push_back("--image " + path);
        lead += req.media_marker;
      }
      req.messages.back().content = lead + req.messages.back().content;
    }
  } else {
    req.prompt = o.prompt;
  }
  req.max_tokens = static_cast<uint32_t>(o.max_tokens);
  req.ignore_eos = o.ignore_eos;
  req.sampling = sampling_of(o);

  caf::scoped_actor self{sys};
  req.sink = self->spawn(printing_sink, caf::actor_cast<caf::actor>(self));
  self->request(rt->admission(), caf::infinite, submit_atom::value, req)
      .receive(
          [](const submit_reply& r) {
            if (!r.accepted) throw std::runtime_error(r.error);
          },
          [&](const caf::error& e) { throw std::runtime_error(sys.render(e)); });
  finish_reason reason{};
  std::string error;
  uint32_t n_prompt = 0, n_out = 0;
  double ttft_ms = 0, tpot_ms = 0;
  self->receive([&](printed_atom, finish_reason r, std::string e, uint32_t p, uint32_t c, double t, double tp) {
    reason = r;
    error = std::move(e);
    n_prompt = p;
    n_out = c;
    ttft_ms = t;
    tpot_ms = tp;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (reason == finish_reason::error) throw std::runtime_error(error);

  if (!runtime_access::actors(*rt).drafter) {
    std::fprintf(stderr, "prompt tokens: %u (%.1f tok/s), generated tokens: %u (%.1f tok/s), device: %s\n", n_prompt,
                 ttft_ms > 0 ? n_prompt / (ttft_ms / 1000.0) : 0.0, n_out, tpot_ms > 0 ? 1000.0 / tpot_ms : 0.0,
                 o.device.device.c_str());
    return;
  }
  speculation_stats spec;
  self->request(runtime_access::actors(*rt).scheduler, caf::infinite, spec_stats_atom::value)
      .receive([&](const speculation_stats& s) { spec = s; }, [](const caf::error&) {});
  // K's distribution over the run: "K=count" for each number of drafts a pass verified.
  std::string by_k;
  for (size_t k = 1; k < spec.passes_by_k.size(); ++k) {
    if (spec.passes_by_k[k] == 0) continue;
    by_k += (by_k.empty() ? "" : " ") + std::to_string(k) + "=" + std::to_string(spec.passes_by_k[k]);
  }
  std::fprintf(stderr,
               "prompt tokens: %u (%.1f tok/s), generated tokens: %u (%.1f tok/s), speculative: %s, drafted: %llu, "
               "accepted: %llu (%.1f%%), mean accepted length: %.2f, passes by K: %s, steps with speculation off: "
               "%llu\n",
               n_prompt, ttft_ms > 0 ? n_prompt / (ttft_ms / 1000.0) : 0.0, n_out, tpot_ms > 0 ? 1000.0 / tpot_ms : 0.0,
               rc.speculative.c_str(), static_cast<unsigned long long>(spec.drafted),
               static_cast<unsigned long long>(spec.accepted), 100.0 * spec.acceptance_rate(), spec.mean_accepted(),
               by_k.empty() ? "none" : by_k.c_str(), static_cast<unsigned long long>(spec.steps_off));
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<generate_options>();
  auto* sub =
      app.add_subcommand("generate", "Generate a completion (CPU, or a GPU with --device cuda), streamed to stdout");
  sub->add_option("--prompt", o->prompt, "Prompt text")->required();
  sub->add_option("--model", o->model, "GGUF file, or 'default'")->default_str("default");
  add_model_sha256_option(sub, o->model_sha256);
  sub->add_flag("--chat", o->chat, "Apply the model's chat template (the prompt is the user message)");
  sub->add_option("--system", o->system, "System message (with --chat)");
  sub->add_option("--max-tokens", o->max_tokens, "Most tokens to generate")
      ->default_val(256)
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy")->default_val(0.8f);
  sub->add_option("--top-p", o->top_p, "Nucleus sampling threshold (1 = off)")->default_val(0.95f);
  sub->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0 = off)")->default_val(40);
  sub->add_option("--min-p", o->min_p, "Drop tokens below min-p times the top probability")->default_val(0.05f);
  sub->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1 = off)")->default_val(1.0f);
  sub->add_option("--seed", o->seed, "Sampling seed (same seed, same output); default random");
  sub->add_option("--threads", o->threads, "CPU threads (default: one per core)");
  add_tiled_cache_options(sub, o->rt);
  sub->add_option("--kv-cache-dtype", o->rt.kv_cache_dtype,
                  "KV cache element type: auto (= f16), f16, q8_0 (1.88x the tokens per byte; CPU only), or fp8 "
                  "(E4M3, 2x the tokens per byte; --device cuda only)")
      ->check(CLI::IsMember({"auto", "f16", "q8_0", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  add_device_options(sub, o->device);
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep going past end-of-generation tokens");
  sub->add_option("--chat-template", o->rt.chat_template,
                  "With --chat: a Jinja file, a named variant of the file's, or a family overriding the model's");
  sub->add_option("--mmproj", o->rt.mmproj, "A vision projector GGUF for the model (llama.cpp's mmproj file)");
  sub->add_option("--image", o->images, "An image file (PNG, JPEG, WebP) before the prompt; repeatable (--chat)");
  add_speculative_options(sub, o->rt);
  sub->callback([o] { run_generate(*o); });
}

}  // namespace tandem::cli
