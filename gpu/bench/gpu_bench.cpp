// gpu_bench: the H200 benchmark table on synthetic models with Llama-3-8B shapes.
//
//   copy bandwidth (device-to-device, read + write) -> the roofline
//   batch-1 decode tok/s per weight type vs roofline = bandwidth / bytes read per step
//   throughput (output tok/s) at batch 1..256 for 128-in/128-out and 1000-in/1000-out
//   TTFT of a 1,000-token prompt
//   paged-attention kernel bandwidth (unique KV bytes / time)
//
// Every step samples on the device (argmax) and copies only token ids back, as the worker
// does. A time budget (--budget-s) skips what would not fit; skipped cells print "-".
// Decode steps run as CUDA graphs (gpu/plan/graph_cache.h) unless --enforce-eager.
//   GEMV launch variants per shape and type (gpu/bench/gemv_bench.cpp); the winners serve the
//   rest of the run and are written out for gpu/plan/gemv_table.inc
// Usage: gpu_bench [--budget-s 360] [--types bf16,q8_0,q4_0,q4_k_m] [--enforce-eager]
//                  [--no-tune] [--tune-out FILE] [--torch FILE] | --probe
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/quant_mixture.h"
#include "gpu/bench/gemv_bench.h"
#include "gpu/gpu_model.h"
#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"

namespace tandem::gpu {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

model_config llama3_8b() {
  model_config c;
  c.architecture = "llama";
  c.name = "synthetic Llama-3-8B shapes";
  c.n_layer = 32, c.n_embd = 4096, c.n_head = 32, c.n_head_kv = 8, c.head_dim = 128, c.n_ff = 14336;
  c.n_vocab = 128256, c.n_ctx_train = 8192, c.n_rot = 128, c.rope_freq_base = 500000.0f, c.rms_eps = 1e-5f;
  return c;
}

// The weights of a synthetic model of `c`'s shape in `name`: one weight type ("bf16",
// "q8_0", ...), or a file type's mixture ("q4_k_m": llama-quantize's per-tensor rule, as
// engine/gguf/quant_mixture.h gives it for these shapes).
std::optional<gpu_model::synthetic_weights> synthetic_for(const std::string& name, const model_config& c) {
  gpu_model::synthetic_weights sw;
  if (const auto t = parse_tensor_type(name)) {
    sw.weight_type = *t;
    sw.head_type = *t == tensor_type::bf16 || *t == tensor_type::f16 ? *t : tensor_type::q8_0;
    return sw;
  }
  const auto ft = gguf::parse_file_type(name);
  if (!ft) return std::nullopt;
  std::vector<gguf::tensor_desc> descs;
  descs.push_back({"output.weight", 2, c.n_embd, tensor_type::f32});
  descs.push_back({"token_embd.weight", 2, c.n_embd, tensor_type::f32});
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* m : {"attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"}) {
      descs.push_back(
          {b + m + ".weight", 2, std::string(m) == "ffn_down" ? int64_t{c.n_ff} : int64_t{c.n_embd}, tensor_type::f32});
    }
  }
  std::sort(descs.begin(), descs.end(),
            [](const auto& a, const auto& b) { return gguf::llama_tensor_order(a.name, b.name); });
  const auto types = gguf::plan_tensor_types(*ft, descs, {c.n_layer, c.n_head, c.n_head_kv});
  sw.weight_type = ft->default_type;
  for (size_t i = 0; i < descs.size(); ++i) {
    const std::string& n = descs[i].name;
    if (n == "token_embd.weight") sw.head_type = types[i];
    if (n == "output.weight") sw.output_type = types[i];
    if (n.find(".attn_v.") != std::string::npos) sw.attn_v_types.push_back(types[i]);
    if (n.find(".ffn_down.") != std::string::npos) sw.ffn_down_types.push_back(types[i]);
  }
  return sw;
}

double copy_bandwidth(stream& st) {
  const size_t bytes = size_t{2} << 30;
  device_buffer a(bytes), b(bytes);
  fill_bytes_async(a.data(), 1, bytes, st.handle());
  copy_on_device_async(b.data(), a.data(), bytes, st.handle());
  event t0(true), t1(true);
  t0.record(st.handle());
  const int reps = 10;
  for (int i = 0; i < reps; ++i) copy_on_device_async(b.data(), a.data(), bytes, st.handle());
  t1.record(st.handle());
  t1.synchronize();
  return 2.0 * static_cast<double>(bytes) * reps / (event::elapsed_ms(t0, t1) / 1e3);  // read + write
}

class driver {
 public:
  driver(gpu_model& m, stream& st) : m_(m), st_(st), ids_(size_t{4096} * sizeof(int32_t)) {}

  // One step: forward, argmax on the device, ids back. Returns the sampled ids.
  std::vector<int32_t> step(const step_input& in) {
    const step_rows rows = m_.enqueue_forward(in, st_.handle());
    launch_argmax(m_.logits(), rows.n_rows, static_cast<int32_t>(m_.config().n_vocab), m_.sampled(), st_.handle());
    copy_to_host_async(ids_.data(), m_.sampled(), static_cast<size_t>(rows.n_rows) * sizeof(int32_t), st_.handle());
    st_.synchronize();
    return {ids_.as<int32_t>(), ids_.as<int32_t>() + rows.n_rows};
  }

  // B sequences of n_in prompt tokens then n_out generated: seconds for the prefill (all
  // prompts, in steps of at most max_tokens) and for the decode steps. false: no room.
  bool run(int32_t B, int32_t n_in, int32_t n_out, int32_t max_tokens, double& prefill_s, double& decode_s) {
    const int32_t bt = 16, per_seq = (n_in + n_out + bt - 1) / bt;
    if (static_cast<int64_t>(per_seq) * B > m_.n_blocks()) return false;
    std::mt19937 rng(1);
    std::vector<seq_step> seqs(static_cast<size_t>(B));
    for (int32_t i = 0; i < B; ++i) {
      auto& s = seqs[static_cast<size_t>(i)];
      s.seq = static_cast<uint64_t>(i);
      for (int32_t b = 0; b < per_seq; ++b) s.blocks.push_back(i * per_seq + b);
      s.tokens.resize(static_cast<size_t>(n_in));
      for (auto& t : s.tokens) t = static_cast<int32_t>(rng() % m_.config().n_vocab);
    }
    auto t0 = clock_type::now();
    std::vector<int32_t> next(static_cast<size_t>(B));
    for (int32_t i = 0; i < B;) {  // prefill: whole prompts, several per step
      if (n_in > max_tokens) {     // a long prompt alone, in chunks of max_tokens
        auto s = seqs[static_cast<size_t>(i)];
        for (int32_t at = 0; at < n_in; at += max_tokens) {
          step_input in;
          in.seqs.push_back(s);
          in.seqs[0].start_pos = at;
          const int32_t n = std::min(max_tokens, n_in - at);
          in.seqs[0].tokens.assign(s.tokens.begin() + at, s.tokens.begin() + at + n);
          next[static_cast<size_t>(i)] = step(in)[0];
        }
        ++i;
        continue;
      }
      step_input in;
      int32_t used = 0;
      std::vector<int32_t> members;
      while (i < B && (members.empty() || used + n_in <= max_tokens)) {
        in.seqs.push_back(seqs[static_cast<size_t>(i)]);
        members.push_back(i);
        used += n_in, ++i;
      }
      const auto ids = step(in);
      for (size_t j = 0; j < members.size(); ++j) next[static_cast<size_t>(members[j])] = ids[j];
    }
    prefill_s = seconds_since(t0);
    t0 = clock_type::now();
    step_input in;
    in.seqs = seqs;
    for (int32_t i = 0; i < B; ++i) {
      in.seqs[static_cast<size_t>(i)].start_pos = n_in;
      in.seqs[static_cast<size_t>(i)].tokens = {next[static_cast<size_t>(i)]};
    }
    for (int32_t k = 1; k < n_out; ++k) {  // the prefill produced the first output token
      const auto ids = step(in);
      for (int32_t i = 0; i < B; ++i) {
        auto& s = in.seqs[static_cast<size_t>(i)];
        ++s.start_pos;
        s.tokens[0] = ids[static_cast<size_t>(i)];
      }
    }
    decode_s = seconds_since(t0);
    return true;
  }

 private:
  gpu_model& m_;
  stream& st_;
  pinned_buffer ids_;
};

std::string cell(double v, const char* fmt = "%.0f") {
  if (!(v > 0)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

void attention_bandwidth(stream& st, int32_t n_seq, int32_t ctx, int sm_count) {
  const int32_t n_head = 32, n_kv = 8, hd = 128, bt = 16, width = ctx / bt, n_blocks = n_seq * width;
  const size_t elems = static_cast<size_t>(n_blocks) * n_kv * bt * hd;
  device_buffer k(elems * 2), v(elems * 2), q(static_cast<size_t>(n_seq) * n_head * hd * 4);
  launch_random_weights(layout_of(tensor_type::f16, 1, static_cast<int64_t>(elems)), k.data(), 3, st.handle());
  launch_random_weights(layout_of(tensor_type::f16, 1, static_cast<int64_t>(elems)), v.data(), 4, st.handle());
  launch_random_weights(layout_of(tensor_type::f32, 1, int64_t{n_seq} * n_head * hd), q.data(), 5, st.handle());
  std::vector<int32_t> pos(static_cast<size_t>(n_seq), ctx - 1), seq(static_cast<size_t>(n_seq)),
      tables(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_seq; ++i) seq[static_cast<size_t>(i)] = i;
  for (int32_t i = 0; i < n_blocks; ++i) tables[static_cast<size_t>(i)] = i;
  device_buffer dpos(pos.size() * 4), dseq(seq.size() * 4), dtab(tables.size() * 4);
  copy_to_device_async(dpos.data(), pos.data(), pos.size() * 4, st.handle());
  copy_to_device_async(dseq.data(), seq.data(), seq.size() * 4, st.handle());
  copy_to_device_async(dtab.data(), tables.data(), tables.size() * 4, st.handle());
  const split_plan sp = plan_attention_splits(static_cast<uint32_t>(n_seq * n_head), static_cast<uint32_t>(ctx), bt,
                                              static_cast<uint32_t>(sm_count), 16);
  device_buffer partials(static_cast<size_t>(n_seq) * n_head * sp.n_splits * (hd + 2) * 4);
  device_buffer out(static_cast<size_t>(n_seq) * n_head * hd * 4);
  const kv_layer kv{k.as<uint16_t>(), v.as<uint16_t>(), n_kv, hd, bt};
  const attention_args a{n_head, 1.0f / std::sqrt(128.0f), width, static_cast<int32_t>(sp.n_splits),
                         static_cast<int32_t>(sp.keys_per_split)};
  auto once = [&] {
    launch_paged_attention(q.as<float>(), dpos.as<int32_t>(), dseq.as<int32_t>(), dtab.as<int32_t>(), n_seq, kv, a,
                           partials.as<float>(), out.as<float>(), st.handle());
  };
  once();
  event t0(true), t1(true);
  t0.record(st.handle());
  const int reps = 20;
  for (int i = 0; i < reps; ++i) once();
  t1.record(st.handle());
  t1.synchronize();
  const double s = event::elapsed_ms(t0, t1) / 1e3 / reps;
  std::printf("| paged attention | %d seqs x %d ctx, 32 q / 8 kv heads, hd 128, %u splits | %.3f ms | %.0f GB/s |\n",
              n_seq, ctx, sp.n_splits, s * 1e3, 2.0 * elems * 2 / s / 1e9);
}

int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--probe")) {  // gpu/check.sh: does this binary start here?
      std::printf("gpu_bench\n");
      return 0;
    }
  }
  double budget_s = 360;
  std::string types = "bf16,q8_0,q4_0,q4_k_m";
  bool graphs = true, tune = true;
  gemv_bench_options gemv;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--enforce-eager")) graphs = false;
    if (!std::strcmp(argv[i], "--no-tune")) tune = false;
    if (i + 1 < argc && !std::strcmp(argv[i], "--budget-s")) budget_s = std::atof(argv[++i]);
    if (i + 1 < argc && !std::strcmp(argv[i], "--types")) types = argv[++i];
    if (i + 1 < argc && !std::strcmp(argv[i], "--tune-out")) gemv.table_out = argv[++i];
    if (i + 1 < argc && !std::strcmp(argv[i], "--torch")) gemv.torch_file = argv[++i];
    if (i + 1 < argc && !std::strcmp(argv[i], "--gemv-types")) gemv.types = argv[++i];
  }
  if (!cuda_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  const auto start = clock_type::now();
  stream st;
  const device_memory_info mem = memory_info();
  const double bw = copy_bandwidth(st);
  std::printf(
      "## GPU benchmark (gpu_bench)\n\nSMs %d, memory %.1f GiB, measured device copy bandwidth %.0f GB/s "
      "(read + write)\n\n",
      mem.sm_count, mem.total_bytes / double(1 << 30), bw / 1e9);

  if (tune) run_gemv_bench(st, mem, bw, gemv);

  std::printf("\n| kind | configuration | time | figure |\n|---|---|---|---|\n");
  attention_bandwidth(st, 64, 4096, mem.sm_count);
  attention_bandwidth(st, 1, 32768, mem.sm_count);

  const model_config c = llama3_8b();
  // Dense tensor-core peaks of the SXM H100 / H200 (132 SMs), the prefill's denominators;
  // other cards print no percentage.
  const bool sxm = mem.sm_count == 132;
  const double bf16_peak = sxm ? 989.4e12 : 0, fp8_peak = sxm ? 1978.9e12 : 0;
  // FLOPs of a prompt of L tokens: every matrix once per token (2 per weight), attention's
  // QK^T and PV over the causal context (2 x q_dim x (p + 1) each at position p), one head row.
  const double matrix_params = static_cast<double>(c.n_layer) * c.block_matrix_macs();
  auto prompt_flops = [&](double L) {
    return 2 * matrix_params * L + 2.0 * c.n_layer * c.q_dim() * L * (L + 1) + 2 * c.head_macs();
  };
  // TensorRT-LLM's offline shapes (input/output at batch 64 and 256).
  const int32_t offline[4][2] = {{128, 128}, {128, 2048}, {1000, 1000}, {2048, 2048}};
  std::string prefill_rows, offline_rows;
  std::printf(
      "\n| weights | batch-1 decode tok/s | roofline tok/s | %% of roofline | batch-8 decode tok/s (x batch 1) |"
      " TTFT 1000 tok (ms) |\n|---|---|---|---|---|---|\n");
  size_t at = 0;
  while (at < types.size()) {
    const size_t comma = std::min(types.find(',', at), types.size());
    const std::string name = types.substr(at, comma - at);
    at = comma + 1;
    const auto sw = synthetic_for(name, c);
    if (!sw) continue;
    gpu_model_options opt;
    opt.limits.max_tokens = 2048;
    opt.limits.max_logit_rows = 256;
    opt.limits.max_seqs = 256;
    opt.limits.max_table_width = 576;  // 9,216 tokens per sequence: the 8,192-token prompt
    opt.cuda_graphs = graphs;
    // Quantized weights: BF16 copies for the prefill GEMM, and the per-product dequantization
    // kept too, for the TTFT of each.
    opt.bf16_shadow = sw->weight_type != tensor_type::bf16 && sw->weight_type != tensor_type::f16;
    opt.keep_dequantize_scratch = opt.bf16_shadow;
    gpu_model m(c, *sw, opt);
    driver d(m, st);
    // Batch-1 decode at a 128-token context: bytes read per step = every matrix + one
    // embedding row + the K/V of the context.
    double pre = 0, dec = 0;
    d.run(1, 128, 2, 2048, pre, dec);  // warm-up
    d.run(1, 128, 129, 2048, pre, dec);
    const double tok_s = 128 / dec;
    const double bytes = static_cast<double>(m.weight_bytes() - row_bytes(sw->head_type, c.n_embd) * (c.n_vocab - 1)) +
                         192.0 * c.kv_bytes_per_token(2);
    const double roof = bw / (bytes - static_cast<double>(m.bf16_shadow_bytes()));  // decode never reads the copies
    // Batch 8 at the same context: every weight byte now serves eight tokens.
    d.run(8, 128, 129, 2048, pre, dec);
    const double tok_s8 = 8 * 128 / dec;
    double ttft = 0, ttft_dequant = 0;
    d.run(1, 1000, 1, 2048, ttft, dec);
    if (m.has_bf16_shadow()) {
      m.use_bf16_shadow(false);
      d.run(1, 1000, 1, 2048, ttft_dequant, dec);
      m.use_bf16_shadow(true);
    }
    char line[512];
    std::snprintf(line, sizeof line, "| %s | %.1f | %.1f | %.0f%% | %.0f (%.1fx) | %.1f%s |\n", name.c_str(), tok_s,
                  roof, 100 * tok_s / roof, tok_s8, tok_s8 / tok_s, ttft * 1e3,
                  ttft_dequant > 0 ? (" (" + cell(ttft_dequant * 1e3, "%.1f") + " dequantizing)").c_str() : "");
    std::printf("%s", line);
    std::fflush(stdout);

    // Prefill: one prompt of L tokens, in steps of up to 2,048.
    std::string pf;
    for (int32_t L : {512, 2048, 8192}) {
      double p = 0, q = 0;
      const bool ok = budget_s - seconds_since(start) > 20 && d.run(1, L, 1, 2048, p, q);
      const double flops = ok ? prompt_flops(L) / p : 0;
      char c1[96];
      std::snprintf(c1, sizeof c1, " %s tok/s (%s) |", ok ? cell(L / p).c_str() : "-",
                    ok && bf16_peak > 0 ? (cell(100 * flops / bf16_peak, "%.0f") + "% of BF16 peak").c_str() : "-");
      pf += c1;
    }
    prefill_rows.append("| ").append(name).append(" |").append(pf).append("\n");

    // Offline throughput at TensorRT-LLM's shapes; skipped when the budget or the KV pool
    // would not hold them.
    std::string off;
    for (const auto& sh : offline) {
      for (int32_t B : {64, 256}) {
        double p = 0, q = 0;
        const double left = budget_s - seconds_since(start);
        // Estimate from the decode rate (one step per output token, slower at larger batches).
        const bool fits = left > 30 && (sh[1] / tok_s) * (1 + B / 64.0) < left / 3;
        const bool ok = fits && d.run(B, sh[0], sh[1], 2048, p, q);
        off.append(" ").append(ok ? cell(B * sh[1] / (p + q)) : std::string("-")).append(" |");
      }
    }
    offline_rows.append("| ").append(name).append(" |").append(off).append("\n");
  }
  std::printf(
      "\n### Prefill (one prompt, steps of up to 2,048 tokens; model FLOPs / time against the dense peak%s)\n\n"
      "| weights | 512 | 2,048 | 8,192 |\n|---|---|---|---|\n%s",
      sxm ? ": BF16 989 TFLOPS, FP8 1,979 TFLOPS (SXM H100/H200)" : "", prefill_rows.c_str());
  (void)fp8_peak;
  std::printf(
      "\n### Offline throughput (output tok/s; input/output, batch)\n\n"
      "| weights | 128/128 x64 | x256 | 128/2048 x64 | x256 | 1000/1000 x64 | x256 | 2048/2048 x64 | x256 |\n"
      "|---|---|---|---|---|---|---|---|---|\n%s",
      offline_rows.c_str());
  std::printf(
      "\nWeights %s (q4_k_m: llama-quantize's Q4_K_M mixture, Q6_K head); embedding and head BF16 (BF16 model) or "
      "Q8_0; KV cache F16; %s; argmax "
      "sampling on the device; total %.0f s.\n",
      types.c_str(), graphs ? "decode steps as CUDA graphs (captures included in the times)" : "eager launches",
      seconds_since(start));
  return 0;
}

}  // namespace
}  // namespace tandem::gpu

int main(int argc, char** argv) {
  try {
    return tandem::gpu::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}
