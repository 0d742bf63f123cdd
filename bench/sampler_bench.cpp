// The sampler's cost per sequence, one thread, on the default model's own logits: the rows
// of a chat conversation's assistant turn (every position's next-token distribution, one
// prefill with all logits). A 152,064-entry vocabulary (Qwen's) is the same rows extended:
// the extra ids take values drawn from the row's own lower 99%, so the top stays the
// model's and the tail grows, as a larger vocabulary's does. Also a batch of 64 sequences
// on the compute pool (parallel sampling, as the device worker does it) against one thread.
// Prints a table on stderr and one JSON object on stdout (bench/run_sampler_bench.py).
//
//   sampler_bench [--model default] [--reps 9] [--threads 0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/platform/thread_pool.h"
#include "engine/sampling/row_kernels.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace tandem;
using clock_type = std::chrono::steady_clock;

const char* kConversation =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nI am planning a weekend trip to the mountains with two friends. What should we pack, "
    "and how do we stay safe if the weather turns?<|im_end|>\n<|im_start|>assistant\n"
    "Great idea! For a weekend in the mountains, pack layers: a warm fleece, a waterproof jacket and "
    "trousers, a hat and gloves, even in summer. Bring sturdy boots that you have already worn in, a map "
    "and a compass as well as your phone, a head torch with spare batteries, a first-aid kit, enough water "
    "and food for an extra day, and a small emergency shelter or space blanket. Before you leave, check the "
    "forecast, tell someone your route and when you expect to be back, and agree with your friends on a "
    "time to turn around. If the weather turns, do not push on to the summit: head down by the way you "
    "know, stay together, put on your layers before you get cold, and if visibility drops, stop, take a "
    "bearing and move carefully from one landmark to the next. If someone is hurt or you are lost, call "
    "the emergency number, give your location, and keep warm while you wait.<|im_end|>\n";

struct config {
  const char* name;
  sampling_params p;
};

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

std::vector<config> configs() {
  std::vector<config> out;
  auto add = [&](const char* name, float t, int32_t k, float top_p, float min_p, float rep) {
    sampling_params p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = rep;
    p.seed = 7;
    out.push_back({name, p});
  };
  add("greedy", 0.0f, 0, 1.0f, 0.0f, 1.0f);
  add("T 0.7, no truncation", 0.7f, 0, 1.0f, 0.0f, 1.0f);
  add("T 0.7, top_p 0.95", 0.7f, 0, 0.95f, 0.0f, 1.0f);
  add("T 1.0, top_p 0.95", 1.0f, 0, 0.95f, 0.0f, 1.0f);
  add("T 0.7, top_k 40", 0.7f, 40, 1.0f, 0.0f, 1.0f);
  add("T 0.8, top_k 40, top_p 0.95, min_p 0.05 (llama.cpp's defaults)", 0.8f, 40, 0.95f, 0.05f, 1.0f);
  add("T 0.7, min_p 0.05", 0.7f, 0, 1.0f, 0.05f, 1.0f);
  add("T 0.7, top_p 0.95, repetition penalty 1.1 (256-token history)", 0.7f, 0, 0.95f, 0.0f, 1.1f);
  return out;
}

// The row's length extended to n: extra entries drawn from its values below the 99th percentile.
std::vector<float> extend(const std::vector<float>& row, size_t n, std::mt19937& rng) {
  std::vector<float> sorted = row;
  std::sort(sorted.begin(), sorted.end());
  std::uniform_int_distribution<size_t> pick(0, sorted.size() * 99 / 100);
  std::vector<float> out = row;
  while (out.size() < n) out.push_back(sorted[pick(rng)]);
  return out;
}

// The fastest of `reps` passes over the rows, as the mean CPU time of this thread per
// sample() in microseconds (the machine is shared: CPU time leaves out the time the thread
// waited for a core, and the fastest pass is the least disturbed one). Rows from memory:
// each row once per pass (198 rows, 38 MB at 49k: out of the caches, as a batch's logits
// are). hot: each row sampled once untimed, then three times timed, from the cache.
double time_per_row(const config& c, const std::vector<std::vector<float>>& rows, const std::vector<int32_t>& history,
                    int reps, bool hot, size_t* kept_tokens) {
  double best = 1e30;
  sampler s(c.p);
  for (const auto& r : rows) (void)s.sample(r, history);  // warm-up: scratch space
  for (int rep = 0; rep < reps; ++rep) {
    double us = 0.0;
    if (hot) {
      for (const auto& r : rows) {
        (void)s.sample(r, history);
        const double t0 = thread_cpu_us();
        for (int i = 0; i < 3; ++i) (void)s.sample(r, history);
        us += (thread_cpu_us() - t0) / 3;
      }
    } else {
      const double t0 = thread_cpu_us();
      for (const auto& r : rows) (void)s.sample(r, history);
      us = thread_cpu_us() - t0;
    }
    best = std::min(best, us / static_cast<double>(rows.size()));
  }
  size_t kept = 0;
  for (const auto& r : rows) kept += s.distribution(r, history).size();
  *kept_tokens = kept / rows.size();
  return best;
}

// One step's sampling for 64 sequences: on `pool` (each its own sampler) or on one thread.
double batch_us(const std::vector<std::vector<float>>& rows, const sampling_params& p, thread_pool* pool, int reps) {
  std::vector<sampler> samplers;
  for (size_t i = 0; i < 64; ++i) {
    sampling_params q = p;
    q.seed = i;
    samplers.emplace_back(q);
  }
  double best = 1e30;
  for (int rep = 0; rep <= reps; ++rep) {
    const auto t0 = clock_type::now();
    if (pool) {
      pool->parallel_for(64,
                         [&](int64_t i, int) { (void)samplers[static_cast<size_t>(i)].sample(rows[i % rows.size()]); });
    } else {
      for (size_t i = 0; i < 64; ++i) (void)samplers[i].sample(rows[i % rows.size()]);
    }
    if (rep > 0) best = std::min(best, std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_spec = "default";
  int reps = 9, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model") {
      model_spec = argv[i + 1];
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "sampler_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  model_options options;
  options.n_threads = threads;
  auto m = model::open(resolve_model_path(model_spec), options);
  const auto tok = tokenizer::from_gguf(m->file());
  const auto ids = tok.encode(kConversation, false, true);
  const auto& c = m->config();
  kv_pool cache(c, kv_pool_options{16, static_cast<int64_t>(ids.size()) + 32, 0});
  kv_block_allocator allocator(cache.n_blocks());
  step_input in;
  in.seqs.push_back(seq_step{1, ids, 0, {}, true});
  allocator.reserve(in.seqs[0].blocks, static_cast<int>(ids.size()), cache.block_tokens());
  step_output out;
  m->forward(in, cache, out);
  // The assistant turn's rows: from the third "<|im_start|>" on.
  size_t first = 0;
  for (size_t i = 0, seen = 0; i < ids.size(); ++i) {
    if (tok.token_text(ids[i]) == "<|im_start|>" && ++seen == 3) first = i + 2;
  }
  std::vector<std::vector<float>> rows49, rows152;
  std::mt19937 rng(1);
  for (size_t i = first; i + 1 < ids.size(); ++i) {
    const auto r = out.row(0, static_cast<int32_t>(i));
    rows49.emplace_back(r.begin(), r.end());
    rows152.push_back(extend(rows49.back(), 152064, rng));
  }
  std::vector<int32_t> history(ids.end() - std::min<size_t>(256, ids.size() - first), ids.end());
  std::fprintf(stderr, "sampler_bench: %zu rows of %zu logits (and extended to 152064), row kernels %s, %d reps\n",
               rows49.size(), rows49[0].size(), std::string(sampling::best_row_kernels().isa).c_str(), reps);

  std::string json = "{\"row_kernels\": \"" + std::string(sampling::best_row_kernels().isa) +
                     "\", \"rows\": " + std::to_string(rows49.size()) + ", \"configs\": [";
  bool first_cfg = true;
  for (const auto& cfg : configs()) {
    const auto& hist = cfg.p.repetition_penalty != 1.0f ? history : std::vector<int32_t>{};
    size_t kept49 = 0, kept152 = 0, unused = 0;
    const double us49 = time_per_row(cfg, rows49, hist, reps, false, &kept49);
    const double us152 = time_per_row(cfg, rows152, hist, reps, false, &kept152);
    const double hot49 = time_per_row(cfg, rows49, hist, reps, true, &unused);
    const double hot152 = time_per_row(cfg, rows152, hist, reps, true, &unused);
    std::fprintf(stderr,
                 "  %-66s %7.1f us (49,152; %.1f in cache)  %7.1f us (152,064; %.1f in cache)  kept %zu / %zu\n",
                 cfg.name, us49, hot49, us152, hot152, kept49, kept152);
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\": \"%s\", \"us_49k\": %.2f, \"us_152k\": %.2f, \"hot_us_49k\": %.2f, "
                  "\"hot_us_152k\": %.2f, \"kept_49k\": %zu, \"kept_152k\": %zu}",
                  first_cfg ? "" : ", ", cfg.name, us49, us152, hot49, hot152, kept49, kept152);
    json += buf;
    first_cfg = false;
  }
  // 64 sequences of one step, T 0.7 top_p 0.95: the compute pool against one thread.
  sampling_params p;
  p.temperature = 0.7f;
  p.top_p = 0.95f;
  const double one = batch_us(rows49, p, nullptr, reps), pooled = batch_us(rows49, p, &m->pool(), reps);
  std::fprintf(stderr, "  64 sequences, T 0.7 top_p 0.95: %.0f us on one thread, %.0f us on the pool (%d threads)\n",
               one, pooled, m->pool().size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "], \"batch64_one_thread_us\": %.1f, \"batch64_pool_us\": %.1f, \"pool_threads\": %d}",
                one, pooled, m->pool().size());
  json += buf;
  std::printf("%s\n", json.c_str());
  return 0;
}
