// Tandem's CPU engine speed on a GGUF file: prompt processing of N tokens in one step (pp)
// and single-stream decode of M tokens from an empty context (tg), best of R runs, plus the
// machine's memory read bandwidth and the weight bytes one decoded token reads. Prints one
// JSON line. Used by bench/compare_llama_cpp.py (`make bench`).
//
//   engine_bench [--model PATH] [--threads T] [--pp 512] [--tg 128] [--reps 3] [--no-tiled]
//                [--tiled-cache DIR]
//
// With --tiled-cache, the first open tiles into a cache file in DIR (engine/model/tiled_cache.h)
// and the second maps it, as every start after the first does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "read_bandwidth.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

const char* origin_name(tandem::tiled_origin o) {
  switch (o) {
    case tandem::tiled_origin::anonymous:
      return "anonymous";
    case tandem::tiled_origin::cache_written:
      return "cache_written";
    case tandem::tiled_origin::cache_read:
      return "cache_read";
    default:
      return "none";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_spec = "default";
  int threads = 0, pp = 512, tg = 128, reps = 3;
  bool tiled = true;
  std::string tiled_cache;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-tiled") {
      tiled = false;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--model")
      model_spec = v;
    else if (a == "--tiled-cache")
      tiled_cache = v;
    else if (a == "--threads")
      threads = std::atoi(v);
    else if (a == "--pp")
      pp = std::atoi(v);
    else if (a == "--tg")
      tg = std::atoi(v);
    else if (a == "--reps")
      reps = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  using namespace tandem;
  model_options options;
  options.n_threads = threads;
  options.tiled_weights = tiled;
  options.tiled_cache_dir = tiled_cache;
  // Opened twice: the first open's time includes the kernel's first touch of fresh memory
  // for the tiled copies (on a VM whose host backs guest memory lazily, far slower than the
  // tiling itself); the second open reuses the memory the first one freed.
  auto load_t0 = clock_type::now();
  auto m = model::open(resolve_model_path(model_spec), options);
  const double first_load_s = seconds_since(load_t0);
  // The cache file's flush and rename, in the background after the first open: not timed.
  const auto commit_t0 = clock_type::now();
  m->wait_tiled_cache();
  const double cache_commit_s = seconds_since(commit_t0);
  m.reset();
  load_t0 = clock_type::now();
  m = model::open(resolve_model_path(model_spec), options);
  const double load_s = seconds_since(load_t0);
  const auto& c = m->config();
  kv_pool cache(c, kv_pool_options{16, pp + tg + 32, 0});
  kv_block_allocator allocator(cache.n_blocks());

  std::vector<int32_t> prompt(static_cast<size_t>(pp));
  for (int i = 0; i < pp; ++i) prompt[static_cast<size_t>(i)] = 1 + (i * 37) % static_cast<int>(c.n_vocab - 2);

  step_output out;
  // Ready = open + the first one-token step: with mmap only, that step faults the weights in
  // (the file in the page cache), which the tiled load did up front.
  double first_step_s = 0;
  {
    step_input in;
    in.seqs.push_back(seq_step{1, {1}, 0, {}, false});
    allocator.reserve(in.seqs[0].blocks, 1, cache.block_tokens());
    const auto t0 = clock_type::now();
    m->forward(in, cache, out);
    first_step_s = seconds_since(t0);
    allocator.release(in.seqs[0].blocks);
  }

  double best_pp = 0, best_tg = 0;
  for (int r = 0; r < reps; ++r) {
    step_input in;
    in.seqs.push_back(seq_step{1, prompt, 0, {}, false});
    allocator.reserve(in.seqs[0].blocks, pp + tg, cache.block_tokens());
    auto t0 = clock_type::now();
    m->forward(in, cache, out);
    best_pp = std::max(best_pp, pp / seconds_since(t0));

    // Decode from an empty context (as llama-bench's tg): tokens fed back one at a time.
    int32_t tok = 1;
    t0 = clock_type::now();
    for (int i = 0; i < tg; ++i) {
      in.seqs[0].tokens = {tok};
      in.seqs[0].start_pos = i;
      m->forward(in, cache, out);
      const auto row = out.last(0);
      tok = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    }
    best_tg = std::max(best_tg, tg / seconds_since(t0));
    allocator.release(in.seqs[0].blocks);
  }

  // Bytes one decode step reads: every weight matrix once, the (tied or separate) output
  // head once; the embedding table contributes one row. Of a stack of experts only the k
  // a token picks (k of n_expert matrices).
  size_t bytes = 0;
  for (const auto& t : m->file().tensors()) {
    if (t.name == "token_embd.weight" && !c.tied_output) continue;
    const bool experts = c.has_experts() && t.name.find("_exps.") != std::string::npos;
    bytes += experts ? t.nbytes / c.n_expert * c.n_expert_used : t.nbytes;
  }
  const double bw = tandem::bench::read_bandwidth_gbs(m->pool().size());
  std::printf(
      "{\"engine\": \"tandem\", \"kernels\": \"%s\", \"tiled\": %s, \"threads\": %d, \"pp\": %d, \"pp_tok_s\": %.2f, "
      "\"tg\": %d, \"tg_tok_s\": %.2f, \"weight_bytes_per_token\": %zu, \"read_gb_s\": %.2f, "
      "\"first_load_s\": %.3f, \"load_s\": %.3f, \"ready_s\": %.3f, \"tiled_from\": \"%s\", "
      "\"cache_commit_s\": %.3f}\n",
      std::string(kernels::best_dot_kernels().isa).c_str(), tiled ? "true" : "false", m->pool().size(), pp, best_pp, tg,
      best_tg, bytes, bw, first_load_s, load_s, load_s + first_step_s, origin_name(m->tiled_from()), cache_commit_s);
  return 0;
}
