// Runtime benchmarks on the default model through the public actor API:
//   throughput  aggregate decode tok/s with 1, 4, 16 and 64 concurrent streams (decode only)
//   prefix      TTFT with a ~2,000-token shared system prompt, cold vs cached; and the cost
//               of prefix caching when nothing is reused (caching on vs off)
//   chunking    inter-token latency of 8 running streams while a ~4,000-token prompt is
//               prefilled, chunked (512) vs unchunked
//   sampling    64 streams greedy against sampled (what sampling costs), and a realistic
//               chat mix (sampled, varied prompts, outputs ending at EOS)
//   kv-dtype    64 streams with an f16 and with a q8_0 KV cache, short and ~250-token prompts
//               (only on request: docs/benchmarks.md's KV cache section)
// Prints one JSON object on stdout; progress on stderr. Run by bench/run_runtime_bench.py.
// Usage: runtime_bench [MODEL] [TOKENS PER STREAM] [COMPUTE THREADS (0: one per core)]
//                      [throughput | prefix | planning | sampling | kv-dtype]   (only that part)
#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/device/device_worker.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "actors/spawn.h"
#include "bench/compute_probe.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "tandem/runtime.h"

using namespace tandem;
using clock_type = std::chrono::steady_clock;

namespace {

struct trace {
  request_id id = 0;
  clock_type::time_point submitted;
  std::vector<clock_type::time_point> token_times;  // one entry per token
  generation_done done;
};

}  // namespace

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(trace)

namespace {

using trace_atom = caf::atom_constant<caf::atom("trace")>;

sink_actor::behavior_type timing_sink(sink_actor::stateful_pointer<trace> self, caf::actor owner,
                                      clock_type::time_point submitted) {
  self->state.submitted = submitted;
  return {
      [self](const generation_delta& d) {
        const auto now = clock_type::now();
        for (size_t i = 0; i < d.tokens.size(); ++i) self->state.token_times.push_back(now);
      },
      [self, owner](const generation_done& d) {
        self->state.id = d.id;
        self->state.done = d;
        caf::anon_send(owner, trace_atom::value, self->state);
        self->quit();
      },
  };
}

double ms(clock_type::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

// The decoding all streams did at once: the tokens after the last stream's first token up to
// the first stream's last, and that window.
struct decode_run {
  double tok_per_s = 0;
  uint64_t tokens = 0;  // in the window
  double window_ms = 0;
};
decode_run steady_decode(const std::map<request_id, trace>& traces) {
  auto from = clock_type::time_point::min(), to = clock_type::time_point::max();
  for (const auto& [id, t] : traces) {
    from = std::max(from, t.token_times.front());
    to = std::min(to, t.token_times.back());
  }
  decode_run r;
  for (const auto& [id, t] : traces) {
    for (const auto& tt : t.token_times) r.tokens += tt > from && tt <= to;
  }
  r.window_ms = to > from ? ms(to - from) : 0.0;
  r.tok_per_s = r.window_ms > 0 ? static_cast<double>(r.tokens) / (r.window_ms / 1000.0) : 0.0;
  return r;
}

class bench_client {
 public:
  bench_client(caf::actor_system& sys, runtime& rt) : sys_(sys), rt_(rt), self_(sys) {}

  request_id submit(generate_request r) {
    const auto now = clock_type::now();
    r.sink = self_->spawn(timing_sink, caf::actor_cast<caf::actor>(self_), now);
    request_id id = 0;
    self_->request(rt_.admission(), caf::infinite, submit_atom::value, r)
        .receive([&](const submit_reply& rep) { id = rep.id; }, [](const caf::error&) {});
    return id;
  }
  trace wait_one() {
    trace t;
    self_->receive([&](trace_atom, trace& x) { t = std::move(x); });
    return t;
  }
  std::map<request_id, trace> wait(size_t n) {
    std::map<request_id, trace> out;
    for (size_t i = 0; i < n; ++i) {
      auto t = wait_one();
      out[t.id] = std::move(t);
    }
    return out;
  }

 private:
  caf::actor_system& sys_;
  runtime& rt_;
  caf::scoped_actor self_;
};

generate_request fixed_length(std::string prompt, uint32_t n) {
  generate_request r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

std::string system_prompt(int variant, size_t min_chars) {
  std::string s = "System prompt " + std::to_string(variant) + ". You are a meticulous assistant for a company. ";
  for (int i = 0; s.size() < min_chars; ++i) {
    s += "Rule " + std::to_string(i) + " of set " + std::to_string(variant) +
         ": answer politely, cite the policy, and never reveal internal notes. ";
  }
  return s;
}

std::unique_ptr<runtime> start(caf::actor_system& sys, runtime_config rc, const device_factory* device = nullptr) {
  rc.kv_cache_tokens = rc.kv_cache_tokens ? rc.kv_cache_tokens : 65536;
  return runtime::start(sys, rc, device);
}

std::string throughput(caf::actor_system& sys, const runtime_config& base, uint32_t n_tokens) {
  auto rt = start(sys, base);
  bench_client c(sys, *rt);
  c.submit(fixed_length("Warm-up.", 8));
  c.wait(1);
  // Decode throughput: tokens that arrive while every stream is decoding (from the moment
  // the last stream has its first token to the moment the first stream has its last), over
  // that window. Prompt processing stays out, so one stream and 64 compare decode with
  // decode. The stream counts take turns, five rounds, and each figure is the median of its
  // five runs: this machine's speed drifts by 10-25% over minutes, and one count's runs all
  // in a row would carry that drift into the ratios between counts.
  const std::vector<int> stream_counts{1, 4, 16, 64};
  constexpr int kRounds = 5;
  std::map<int, std::vector<decode_run>> runs;
  bench::compute_probe probe(base.threads);
  std::vector<double> round_extra;  // the probe's figure around each round
  for (int round = 0; round < kRounds; ++round) {
    const double extra_before = probe.measure();
    for (int streams : stream_counts) {
      std::fprintf(stderr, "throughput: round %d, %d streams x %u tokens...\n", round + 1, streams, n_tokens);
      for (int i = 0; i < streams; ++i) {
        c.submit(fixed_length("Story " + std::to_string(round * 100 + i) + ": once upon a time", n_tokens));
      }
      const decode_run r = steady_decode(c.wait(static_cast<size_t>(streams)));
      std::fprintf(stderr, "  %.1f tok/s\n", r.tok_per_s);
      runs[streams].push_back(r);
    }
    round_extra.push_back((extra_before + probe.measure()) / 2);
  }
  // Each round's ratio to its own one-stream run (seconds apart) is steadier than the ratio of
  // the medians: the speed drifts by up to 30% within seconds here.
  std::map<int, std::vector<double>> vs_one;
  for (int streams : stream_counts) {
    for (int round = 0; round < kRounds; ++round) {
      vs_one[streams].push_back(runs[streams][round].tok_per_s / runs[1][round].tok_per_s);
    }
  }
  std::string json = "{\"rounds\":[";
  for (int round = 0; round < kRounds; ++round) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "%s{\"extra_token_cost\":%.3f,\"vs_one_16\":%.3f}", round > 0 ? "," : "",
                  round_extra[round], vs_one[16][round]);
    json += buf;
  }
  for (auto& [streams, v] : vs_one) std::sort(v.begin(), v.end());
  json += "],\"runs\":[";
  for (int streams : stream_counts) {
    auto& v = runs[streams];
    std::sort(v.begin(), v.end(), [](const decode_run& a, const decode_run& b) { return a.tok_per_s < b.tok_per_s; });
    const decode_run& median = v[v.size() / 2];
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s{\"streams\":%d,\"tokens\":%llu,\"window_ms\":%.1f,\"tok_per_s\":%.2f,\"vs_one_paired\":%.3f}",
                  json.back() == '[' ? "" : ",", streams, static_cast<unsigned long long>(median.tokens),
                  median.window_ms, median.tok_per_s, vs_one[streams][kRounds / 2]);
    json += buf;
  }
  // Scheduling overhead: time the scheduler spends planning next to the device's step time.
  caf::scoped_actor self{sys};
  scheduler_stats st;
  self->request(runtime_access::actors(*rt).scheduler, caf::infinite, stats_atom::value)
      .receive([&](const scheduler_stats& x) { st = x; }, [](const caf::error&) {});
  char buf[200];
  std::snprintf(buf, sizeof buf, "],\"steps\":%llu,\"plan_ms\":%.2f,\"device_ms\":%.2f",
                static_cast<unsigned long long>(st.steps), st.plan_ms, st.device_ms);
  return json + buf;
}

// What sampling costs and a realistic mix, through the runtime (no HTTP):
//   paired   64 streams x N fixed-length tokens, greedy then sampled (temperature 0.7, top_p
//            0.95), five rounds; decode tok/s in the all-decoding window as above, and the
//            median of the rounds' ratios
//   mix      64 concurrent chat requests in a closed loop (a new one as each ends, 192 in
//            all): sampled, prompts of 20-1,000 tokens (log-uniform; half behind one shared
//            system prompt), max_tokens 64, 128 or 256, ending at EOS or there
// CPU time (user + system, seconds) of this process's model threads: the device worker
// ("tandem-device") and its compute pool ("tandem-compute"), from /proc/self/task/*/stat.
double model_threads_cpu_s() {
  double ticks = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm"), stat(task.path() / "stat");
    std::string name, line;
    std::getline(comm, name);
    std::getline(stat, line);
    if (name != "tandem-device" && name != "tandem-compute") continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 0; i < 11; ++i) rest >> field;  // state .. cmajflt
    double utime = 0, stime = 0;
    rest >> utime >> stime;
    ticks += utime + stime;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string sampling(caf::actor_system& sys, const runtime_config& base, uint32_t n_tokens) {
  auto rt = start(sys, base);
  bench_client c(sys, *rt);
  c.submit(fixed_length("Warm-up.", 8));
  c.wait(1);
  constexpr int kStreams = 64, kRounds = 5;
  double cpu_per_token = 0;  // of the last run: the model threads' CPU time per token, in ms
  auto decode_tok_s = [&](int round, bool sampled) {
    const double cpu0 = model_threads_cpu_s();
    for (int i = 0; i < kStreams; ++i) {
      auto r = fixed_length("Story " + std::to_string(round * 1000 + i + (sampled ? 500 : 0)) + ": once upon a time",
                            n_tokens);
      if (sampled) {
        r.sampling.temperature = 0.7f;
        r.sampling.top_p = 0.95f;
        r.sampling.seed = round * 1000 + i;
      }
      c.submit(std::move(r));
    }
    const auto traces = c.wait(kStreams);
    cpu_per_token = 1e3 * (model_threads_cpu_s() - cpu0) / (static_cast<double>(kStreams) * n_tokens);
    return steady_decode(traces).tok_per_s;
  };
  std::vector<double> greedy, sampled, ratio, cpu_ratio;
  for (int round = 0; round < kRounds; ++round) {
    std::fprintf(stderr, "sampling: round %d, %d streams x %u tokens, greedy then sampled...\n", round + 1, kStreams,
                 n_tokens);
    greedy.push_back(decode_tok_s(round, false));
    const double cpu_greedy = cpu_per_token;
    sampled.push_back(decode_tok_s(round, true));
    ratio.push_back(greedy.back() / sampled.back());
    cpu_ratio.push_back(cpu_per_token / cpu_greedy);
    std::fprintf(stderr, "  %.1f vs %.1f tok/s, %.3f vs %.3f ms of model-thread CPU per token\n", greedy.back(),
                 sampled.back(), cpu_greedy, cpu_per_token);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"paired\":{\"streams\":%d,\"tokens\":%u,\"greedy_tok_s\":%.2f,\"sampled_tok_s\":%.2f,"
                "\"greedy_over_sampled\":%.4f,\"cpu_sampled_over_greedy\":%.4f},",
                kStreams, n_tokens, median(greedy), median(sampled), median(ratio), median(cpu_ratio));
  std::string json = buf;

  // The mix.
  const std::string system =
      "You are a helpful assistant for a garden-tools shop. Orders ship within two working days; returns are "
      "accepted within thirty days; every tool has a two-year guarantee. Answer briefly and politely, ask for the "
      "order number when a question is about an order, and never promise discounts.";
  const std::vector<std::string> sentences = {
      "I ordered a pair of pruning shears last week and they have not arrived yet.",
      "My essay argues that cities should plant more trees along busy roads.",
      "The meeting moved to Thursday afternoon because two people were travelling.",
      "We tried the recipe twice, but the bread stayed flat both times.",
      "The instructions say to charge the battery fully before the first use.",
      "She asked whether the guarantee also covers the charger and the case.",
      "The new timetable adds an early train but removes the one at noon.",
      "He wrote that the software crashes whenever he opens a large file."};
  std::mt19937 rng(20);
  auto request = [&](int k) {
    generate_request r;
    const double tokens = std::exp(std::uniform_real_distribution<double>(std::log(20.0), std::log(1000.0))(rng));
    std::string text = "Note " + std::to_string(k) + ":";
    while (static_cast<double>(text.size()) / 4.2 < tokens) text += " " + sentences[rng() % sentences.size()];
    if (rng() % 2) r.messages.push_back({"system", system});
    r.messages.push_back({"user", text + "\n\nWhat should I do?"});
    r.max_tokens = std::vector<uint32_t>{64, 128, 256}[rng() % 3];
    r.sampling.temperature = 0.7f;
    r.sampling.top_p = 0.95f;
    return r;
  };
  constexpr int kTotal = 192;
  int sent = 0;
  const auto t0 = clock_type::now();
  for (; sent < kStreams; ++sent) c.submit(request(sent));
  std::vector<double> ttft, itl;
  uint64_t tokens = 0;
  for (int done = 0; done < kTotal; ++done) {
    const trace t = c.wait_one();
    if (!t.token_times.empty()) ttft.push_back(ms(t.token_times.front() - t.submitted));
    for (size_t i = 1; i < t.token_times.size(); ++i) itl.push_back(ms(t.token_times[i] - t.token_times[i - 1]));
    tokens += t.token_times.size();
    if (sent < kTotal) c.submit(request(sent++));
    if ((done + 1) % 32 == 0) std::fprintf(stderr, "sampling: mix, %d of %d requests done\n", done + 1, kTotal);
  }
  const double wall_s = ms(clock_type::now() - t0) / 1000.0;
  std::snprintf(buf, sizeof buf,
                "\"mix\":{\"streams\":%d,\"requests\":%d,\"tokens\":%llu,\"wall_s\":%.2f,\"tok_s\":%.2f,"
                "\"ttft_p50_ms\":%.1f,\"ttft_p99_ms\":%.1f,\"itl_p50_ms\":%.2f,\"itl_p99_ms\":%.2f}}",
                kStreams, kTotal, static_cast<unsigned long long>(tokens), wall_s, static_cast<double>(tokens) / wall_s,
                percentile(ttft, 0.5), percentile(ttft, 0.99), percentile(itl, 0.5), percentile(itl, 0.99));
  return json + buf;
}

scheduler_stats scheduler_stats_of(caf::actor_system& sys, runtime& rt) {
  caf::scoped_actor self{sys};
  scheduler_stats st;
  self->request(runtime_access::actors(rt).scheduler, caf::infinite, stats_atom::value)
      .receive([&](const scheduler_stats& x) { st = x; }, [](const caf::error&) {});
  return st;
}

// The scheduler's planning time per step with 64 running sequences: the device's idle time
// between a result and the next plan (applying the result, proposing, the cache manager's
// reserve round trip, finalizing), over runs of 64 decoding streams (short prompts, so nearly
// every step has all 64 running). Median of five runs.
std::string planning(caf::actor_system& sys, const runtime_config& base, uint32_t n_tokens) {
  auto rt = start(sys, base);
  bench_client c(sys, *rt);
  c.submit(fixed_length("Warm-up.", 8));
  c.wait(1);
  constexpr int kStreams = 64;
  std::vector<double> per_step_ms;
  for (int run = 0; run < 5; ++run) {
    std::fprintf(stderr, "planning: run %d, %d streams x %u tokens...\n", run + 1, kStreams, n_tokens);
    const scheduler_stats before = scheduler_stats_of(sys, *rt);
    for (int i = 0; i < kStreams; ++i) {
      c.submit(fixed_length("Plan " + std::to_string(run * 100 + i) + ": the", n_tokens));
    }
    c.wait(kStreams);
    const scheduler_stats after = scheduler_stats_of(sys, *rt);
    const double steps = static_cast<double>(after.steps - before.steps);
    per_step_ms.push_back(steps > 0 ? (after.plan_ms - before.plan_ms) / steps : 0.0);
    std::fprintf(stderr, "  %.1f us per step\n", per_step_ms.back() * 1000);
  }
  std::sort(per_step_ms.begin(), per_step_ms.end());
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"streams\":%d,\"tokens\":%u,\"plan_us_per_step\":%.1f,\"min_us\":%.1f}", kStreams,
                n_tokens, per_step_ms[2] * 1000, per_step_ms[0] * 1000);
  return buf;
}

std::string prefix(caf::actor_system& sys, const runtime_config& base) {
  std::vector<double> cold, cached;
  {
    auto rt = start(sys, base);
    bench_client c(sys, *rt);
    for (int v = 0; v < 3; ++v) {
      std::fprintf(stderr, "prefix: system prompt %d, cold then cached...\n", v);
      const std::string sp = system_prompt(v, 9000);
      c.submit(fixed_length(sp + "\nQuestion: what is rule 3?", 1));
      const auto a = c.wait_one();
      c.submit(fixed_length(sp + "\nQuestion: what is rule 7?", 1));
      const auto b = c.wait_one();
      cold.push_back(a.done.ttft_ms);
      cached.push_back(b.done.ttft_ms);
      std::fprintf(stderr, "  prompt %u tokens: cold %.1f ms, cached %.1f ms (%u cached)\n", a.done.prompt_tokens,
                   a.done.ttft_ms, b.done.ttft_ms, b.done.cached_tokens);
    }
  }
  // No reuse at all: prefix caching on vs off on the same unique 1,000-token prompts (none
  // shares a block with another), one pair of fresh runtimes per prompt. The speed drifts by
  // up to 30% within seconds here, so only a pair's ratio compares, and the figure is the
  // median ratio. Two identical runtimes side by side are not equally fast either: the one
  // created first ran a few percent slower in an A/A run (both caching). So each pair
  // alternates which runtime is created first and which runs first, and both compute with
  // one model object (the same tiled weights at the same addresses); only the flag differs.
  std::fprintf(stderr, "prefix: no-reuse cost, caching on vs off...\n");
  runtime_config rc_on = base, rc_off = base;
  rc_on.enable_prefix_caching = true;
  rc_off.enable_prefix_caching = false;
  rc_on.kv_cache_tokens = rc_off.kv_cache_tokens = 8192;
  model_options mo;
  mo.n_threads = base.threads;
  std::shared_ptr<model> one_model = model::open(resolve_model_path(base.model), mo);
  device_factory same_model;
  same_model.spawn = [one_model](caf::actor_system& s, std::shared_ptr<model>, uint32_t n_blocks, uint32_t block_size) {
    return spawn_cpu_device_worker(s, one_model, n_blocks, block_size);
  };
  auto timed = [](bench_client& cl, const generate_request& r) {
    const auto t0 = clock_type::now();
    cl.submit(r);
    cl.wait_one();
    return ms(clock_type::now() - t0);
  };
  // The direct cost besides: the cache manager's time in its handlers, where prefix
  // matching, block hashing and indexing happen (the only work that caching adds).
  auto busy_ms = [&](runtime& r) {
    caf::scoped_actor self{sys};
    double b = 0;
    self->request(runtime_access::actors(r).cache_manager, caf::infinite, stats_atom::value)
        .receive([&](const kv_cache_stats& s) { b = s.busy_ms; }, [](const caf::error&) {});
    return b;
  };
  constexpr int kPairs = 24;
  std::vector<double> on_ms, off_ms, ratios;
  double busy_on = 0, busy_off = 0;
  for (int i = 0; i < kPairs; ++i) {
    const bool on_created_first = i % 2 == 0, on_runs_first = (i / 2) % 2 == 0;
    std::unique_ptr<runtime> rt_on, rt_off;
    if (on_created_first) {
      rt_on = start(sys, rc_on, &same_model);
      rt_off = start(sys, rc_off, &same_model);
    } else {
      rt_off = start(sys, rc_off, &same_model);
      rt_on = start(sys, rc_on, &same_model);
    }
    bench_client c_on(sys, *rt_on), c_off(sys, *rt_off);
    timed(c_on, fixed_length("Warm-up.", 2));
    timed(c_off, fixed_length("Warm-up.", 2));
    const double busy_on0 = busy_ms(*rt_on), busy_off0 = busy_ms(*rt_off);
    const auto r = fixed_length(system_prompt(100 + i, 4000) + "\nGo.", 16);
    const double first = timed(on_runs_first ? c_on : c_off, r);
    const double second = timed(on_runs_first ? c_off : c_on, r);
    on_ms.push_back(on_runs_first ? first : second);
    off_ms.push_back(on_runs_first ? second : first);
    ratios.push_back(on_ms.back() / off_ms.back());
    busy_on += busy_ms(*rt_on) - busy_on0;
    busy_off += busy_ms(*rt_off) - busy_off0;
    std::fprintf(stderr, "  prompt %d: on %.1f ms, off %.1f ms\n", i, on_ms.back(), off_ms.back());
  }
  const double on = percentile(on_ms, 0.5), off = percentile(off_ms, 0.5);
  // A distribution-free 95% interval for the median ratio: order statistics k and n + 1 - k
  // (1-based), k = floor(n / 2 - 0.98 sqrt(n)), the normal approximation to the binomial.
  std::sort(ratios.begin(), ratios.end());
  const auto n = static_cast<double>(ratios.size());
  const size_t k = static_cast<size_t>(std::max(1.0, std::floor(n / 2 - 0.98 * std::sqrt(n))));
  const double ci_low = ratios[k - 1], ci_high = ratios[ratios.size() - k];
  double total_on = 0;
  for (double x : on_ms) total_on += x;
  char buf[600];
  std::snprintf(buf, sizeof buf,
                "{\"cold_ttft_ms\":%.2f,\"cached_ttft_ms\":%.2f,\"speedup\":%.2f,\"no_reuse_on_ms\":%.1f,"
                "\"no_reuse_off_ms\":%.1f,\"no_reuse_overhead_pct\":%.2f,\"no_reuse_prompts\":%zu,"
                "\"cache_busy_on_ms\":%.3f,\"cache_busy_off_ms\":%.3f,\"no_reuse_total_on_ms\":%.1f,"
                "\"no_reuse_ci_low_pct\":%.2f,\"no_reuse_ci_high_pct\":%.2f}",
                percentile(cold, 0.5), percentile(cached, 0.5), percentile(cold, 0.5) / percentile(cached, 0.5), on,
                off, 100.0 * (percentile(ratios, 0.5) - 1.0), on_ms.size(), busy_on, busy_off, total_on,
                100.0 * (ci_low - 1.0), 100.0 * (ci_high - 1.0));
  return buf;
}

std::string chunking(caf::actor_system& sys, runtime_config base, bool chunked) {
  if (chunked) {
    base.prefill_chunk = 512;
    base.max_num_batched_tokens = 520;
  } else {
    base.prefill_chunk = 8192;
    base.max_num_batched_tokens = 8192;
  }
  auto rt = start(sys, base);
  bench_client c(sys, *rt);
  std::fprintf(stderr, "chunking (%s): 8 streams + one long prompt...\n", chunked ? "chunked" : "unchunked");
  std::vector<request_id> streams;
  for (int i = 0; i < 8; ++i) streams.push_back(c.submit(fixed_length("Stream " + std::to_string(i) + ": the", 160)));
  // Let the streams reach steady decode, then submit the long prompt.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const auto t_long = clock_type::now();
  const request_id long_id = c.submit(fixed_length(system_prompt(7, 18000), 1));
  auto traces = c.wait(9);
  const auto& lt = traces.at(long_id);
  const auto t_end = lt.token_times.empty() ? clock_type::now() : lt.token_times.front();
  std::vector<double> gaps;  // inter-token gaps of the streams while the long prompt was in flight
  for (request_id id : streams) {
    const auto& tt = traces.at(id).token_times;
    for (size_t i = 1; i < tt.size(); ++i) {
      if (tt[i] >= t_long && tt[i - 1] <= t_end) gaps.push_back(ms(tt[i] - tt[i - 1]));
    }
  }
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "{\"long_prompt_tokens\":%u,\"long_ttft_ms\":%.1f,\"itl_samples\":%zu,\"itl_p50_ms\":%.2f,"
                "\"itl_p99_ms\":%.2f,\"itl_max_ms\":%.2f}",
                lt.done.prompt_tokens, lt.done.ttft_ms, gaps.size(), percentile(gaps, 0.5), percentile(gaps, 0.99),
                gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end()));
  std::fprintf(stderr, "  %s\n", buf);
  return buf;
}

}  // namespace

// The KV cache's element type (--kv-cache-dtype): 64 streams decoding N tokens each with an
// f16 cache and with a q8_0 one, after short prompts and after unique ~250-token ones (more
// keys per step, so the attention's share grows), three rounds with the types taking turns;
// decode tok/s in the all-decoding window as in throughput(), median of the rounds. With
// the pool's bytes per token of each type (the capacity a memory budget buys).
std::string kv_dtypes(caf::actor_system& sys, const runtime_config& base, uint32_t n_tokens) {
  model_options mo;
  mo.n_threads = base.threads;
  std::shared_ptr<model> one_model = model::open(resolve_model_path(base.model), mo);
  device_factory same_model;  // both runtimes compute with one model object (the same tiled weights)
  std::map<std::string, kv_cache_dtype> types{{"f16", kv_cache_dtype::f16}, {"q8_0", kv_cache_dtype::q8_0}};
  std::map<std::string, std::unique_ptr<runtime>> rts;
  for (const auto& [name, dtype] : types) {
    same_model.spawn = [one_model, dtype](caf::actor_system& s, std::shared_ptr<model>, uint32_t n_blocks,
                                          uint32_t block_size) {
      return spawn_cpu_device_worker(s, one_model, n_blocks, block_size, dtype);
    };
    runtime_config rc = base;
    rc.kv_cache_tokens = 65536;
    rc.enable_prefix_caching = false;
    rts[name] = start(sys, rc, &same_model);
  }
  std::string long_text;
  for (int i = 0; long_text.size() < 1100; ++i) {
    long_text += " The river " + std::to_string(i) + " runs past the mill, the church and the old bridge.";
  }
  constexpr int kRounds = 3, kStreams = 64;
  std::map<std::string, std::vector<double>> tps;  // "<type> <prompt>" -> tok/s per round
  for (int round = 0; round < kRounds; ++round) {
    for (const char* prompt : {"short", "long"}) {
      for (int k = 0; k < 2; ++k) {
        const std::string name = (round + k) % 2 == 0 ? "f16" : "q8_0";
        bench_client c(sys, *rts[name]);
        std::fprintf(stderr, "kv dtype: round %d, %s, %s prompts, %d streams x %u tokens...\n", round + 1, name.c_str(),
                     prompt, kStreams, n_tokens);
        for (int i = 0; i < kStreams; ++i) {
          const std::string head = "Story " + std::to_string(round * 1000 + i) + ":";
          c.submit(fixed_length(
              std::string(prompt) == "long" ? head + long_text + " Once upon a time" : head + " once upon a time",
              n_tokens));
        }
        const double tok_s = steady_decode(c.wait(kStreams)).tok_per_s;
        std::fprintf(stderr, "  %.1f tok/s\n", tok_s);
        tps[name + " " + prompt].push_back(tok_s);
      }
    }
  }
  const auto& c = one_model->config();
  std::string json = "{\"streams\":64,\"tokens\":" + std::to_string(n_tokens) + ",\"runs\":[";
  bool first = true;
  for (auto& [key, v] : tps) {
    std::sort(v.begin(), v.end());
    const std::string name = key.substr(0, key.find(' ')), prompt = key.substr(key.find(' ') + 1);
    const double bytes_per_token =
        2.0 * c.n_layer * c.n_head_kv * static_cast<double>(kv_pool::row_bytes_for(c, types[name]));
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"dtype\":\"%s\",\"prompt\":\"%s\",\"tok_per_s\":%.2f,\"bytes_per_token\":%.0f,"
                  "\"tokens_per_gib\":%.0f}",
                  first ? "" : ",", name.c_str(), prompt.c_str(), v[v.size() / 2], bytes_per_token,
                  1073741824.0 / bytes_per_token);
    json += buf;
    first = false;
  }
  return json + "]}";
}

int main(int argc, char** argv) {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};
  runtime_config base;
  base.model = argc > 1 ? argv[1] : "default";
  base.max_num_seqs = 64;
  const uint32_t n_tokens = argc > 2 ? static_cast<uint32_t>(std::stoi(argv[2])) : 64;
  base.threads = argc > 3 ? std::stoi(argv[3]) : 0;
  const std::string part = argc > 4 ? argv[4] : "all";  // all, throughput, prefix, planning, sampling or kv-dtype
  const bool throughput_only = part == "throughput";
  try {
    if (part == "planning") {
      std::printf("{\"planning\":%s}\n", planning(sys, base, n_tokens).c_str());
      return 0;
    }
    if (part == "prefix") {
      std::printf("{\"prefix\":%s}\n", prefix(sys, base).c_str());
      return 0;
    }
    if (part == "kv-dtype") {
      std::printf("{\"kv_dtype\":%s}\n", kv_dtypes(sys, base, n_tokens).c_str());
      return 0;
    }
    if (part == "sampling") {
      std::printf("{\"sampling\":%s}\n", sampling(sys, base, n_tokens).c_str());
      return 0;
    }
    const std::string tp = throughput(sys, base, n_tokens);
    if (throughput_only) {
      std::printf("{\"throughput\":%s}}\n", tp.c_str());
      return 0;
    }
    const std::string px = prefix(sys, base);
    const std::string ch = chunking(sys, base, true);
    const std::string un = chunking(sys, base, false);
    const std::string sm = sampling(sys, base, n_tokens);
    std::printf("{\"throughput\":%s},\"prefix\":%s,\"chunked\":%s,\"unchunked\":%s,\"sampling\":%s}\n", tp.c_str(),
                px.c_str(), ch.c_str(), un.c_str(), sm.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
