// Decode steps with and without LoRA adapters (issue 54's target: a step of 32 sequences over
// 8 different rank-16 adapters at >= 0.8x the tokens/s of the same step without adapters).
// The model's forward pass alone (no actors): the sequences are prefilled, then decode steps
// alternate between the plain step (no row has an adapter) and the mixed one (sequence i on
// adapter i % 8), each writing its own position, so both see the same context lengths. The
// adapters are F16 (convert_lora_to_gguf's default), on every layer's attn_q/k/v/output and
// ffn_gate/up/down, made in memory by engine/synthetic/synthetic_lora.
//
// Usage: lora_bench MODEL.gguf [seqs 32] [adapters 8] [rank 16] [steps 10] [threads 0] [context 32]
// Prints a table on stderr and a JSON line on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/median.h"
#include "engine/gguf/gguf.h"
#include "engine/kernels/isa.h"
#include "engine/lora/adapter.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_lora.h"

using namespace tandem;
using tandem::bench::median;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lora_bench MODEL.gguf [seqs] [adapters] [rank] [steps] [threads] [context]\n");
    return 2;
  }
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int n_seqs = arg(2, 32), n_adapters = arg(3, 8), rank = arg(4, 16), steps = arg(5, 10), threads = arg(6, 0),
            context = arg(7, 32);
  model_options mo;
  mo.n_threads = threads;
  auto m = model::open(argv[1], mo);
  m->wait_tiled_cache();
  const auto& c = m->config();

  // The adapters, in memory.
  std::vector<std::vector<std::byte>> files;
  std::vector<std::shared_ptr<const lora::adapter>> adapters;
  for (int i = 0; i < n_adapters; ++i) {
    synthetic_lora_spec spec;
    spec.rank = static_cast<uint32_t>(rank);
    spec.alpha = static_cast<float>(rank);
    spec.strength = 0.05f;
    spec.seed = 1000 + static_cast<uint64_t>(i);
    files.push_back(make_synthetic_lora(m->file(), spec).serialize());
    adapters.push_back(lora::adapter::from_file(gguf::file::parse(files.back()), c, m->weights(),
                                                kernels::best_dot_kernels()));
  }
  m->set_adapters(adapters);

  const int per_seq = context + 2 * steps + 2;
  kv_pool pool(c, kv_pool_options{16, static_cast<int32_t>((per_seq + 16) * n_seqs), 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  uint32_t rng = 12345;
  for (int s = 0; s < n_seqs; ++s) {
    seq_step st;
    st.seq = static_cast<seq_id>(s);
    for (int j = 0; j < context; ++j) {
      rng = rng * 1664525u + 1013904223u;
      st.tokens.push_back(static_cast<int32_t>(rng % c.n_vocab));
    }
    if (!alloc.reserve(st.blocks, per_seq, pool.block_tokens())) {
      std::fprintf(stderr, "lora_bench: the KV pool is too small\n");
      return 1;
    }
    in.seqs.push_back(std::move(st));
  }
  step_output out;
  std::fprintf(stderr, "lora_bench: prefilling %d sequences of %d tokens (%s kernels)\n", n_seqs, context,
               std::string(kernels::best_dot_kernels().isa).c_str());
  m->forward(in, pool, out);  // the prompts, every sequence without an adapter

  std::vector<double> plain_ms, mixed_ms;
  int32_t pos = context;
  auto decode = [&](bool with_adapters) {
    for (int s = 0; s < n_seqs; ++s) {
      auto& st = in.seqs[static_cast<size_t>(s)];
      st.tokens = {static_cast<int32_t>((s * 7 + pos) % static_cast<int32_t>(c.n_vocab))};
      st.start_pos = pos;
      st.adapter = with_adapters ? s % n_adapters : -1;
      st.adapter_scale = 1.0f;
    }
    const auto t0 = std::chrono::steady_clock::now();
    m->forward(in, pool, out);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++pos;
    return ms;
  };
  decode(false);  // warm-up of both kinds of step
  decode(true);
  for (int i = 0; i < steps; ++i) {
    if (i % 2 == 0) {
      plain_ms.push_back(decode(false));
      mixed_ms.push_back(decode(true));
    } else {
      mixed_ms.push_back(decode(true));
      plain_ms.push_back(decode(false));
    }
  }
  std::vector<double> ratios;
  for (size_t i = 0; i < plain_ms.size(); ++i) ratios.push_back(plain_ms[i] / mixed_ms[i]);
  const double p = median(plain_ms), x = median(mixed_ms), r = median(ratios);
  std::fprintf(stderr, "%d sequences, one token each; %d adapters of rank %d: step %.1f ms (%.1f tok/s) without, "
               "%.1f ms (%.1f tok/s) with; ratio %.3f (median of %d paired steps)\n",
               n_seqs, n_adapters, rank, p, 1000.0 * n_seqs / p, x, 1000.0 * n_seqs / x, r, steps);
  std::printf(
      "{\"seqs\":%d,\"adapters\":%d,\"rank\":%d,\"context\":%d,\"threads\":%d,\"kernels\":\"%s\",\"plain_ms\":%.3f,"
      "\"mixed_ms\":%.3f,\"plain_tok_s\":%.2f,\"mixed_tok_s\":%.2f,\"ratio\":%.4f}\n",
      n_seqs, n_adapters, rank, context, m->pool().size(), std::string(kernels::best_dot_kernels().isa).c_str(), p, x,
      1000.0 * n_seqs / p, 1000.0 * n_seqs / x, r);
  return 0;
}
