// Speculative decoding benchmarks on the default model, greedy:
//   single stream, each method (none, ngram, layer-skip, draft) on (a) input-grounded tasks
//   (correct a given passage) and (b) open chat: decode tok/s, speed-up over none,
//   acceptance rate and mean accepted length per verification pass;
//   aggregate throughput at 1, 4 and 16 streams with n-gram drafting adaptive, always-on, off.
// This machine's speed drifts by up to 30% within seconds, so every comparison is paired:
// the methods run each task back to back, the modes each stream count back to back, and a
// speed-up is the median over five reps of the ratio within each rep.
// Prints one JSON object on stdout; progress on stderr. Run by bench/run_speculative_bench.py.
// Usage: speculative_bench [DRAFT LAYERS (24)] [COMPUTE THREADS (0: one per core)] [PART (all,
//        single or batch: just one of the two parts, for quicker experiments)]
#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "bench/compute_probe.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/model/model_truncation.h"
#include "tandem/runtime.h"

using namespace tandem;
using clock_type = std::chrono::steady_clock;

namespace {

struct outcome {
  request_id id = 0;
  generation_done done;
};

}  // namespace

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(outcome)

namespace {

using outcome_atom = caf::atom_constant<caf::atom("outcome")>;

sink_actor::behavior_type quiet_sink(sink_actor::pointer self, caf::actor owner) {
  return {
      [](const generation_delta&) {},
      [self, owner](const generation_done& d) {
        caf::anon_send(owner, outcome_atom::value, outcome{d.id, d});
        self->quit();
      },
  };
}

// Input-grounded task (a): correct a passage that has a few mistakes in it and write it out
// again in full. A model that does the task copies most of the passage; SmolLM2-135M does for
// some passages and paraphrases others, and all of them count.
const char* kPassages[] = {
    "The old bridge over the river was built in 1872 by a company of stone masons from the north. It has seven arches, "
    "each wide enough for a barge to pass beneth, and a narrow footpath on its eastern side. In the great flood of "
    "1911 the water rose to within a metre of the parapet, but the bridge held, and it still carrys traffic today.",
    "Photosynthesis is the proces by which green plants use sunlight to turn water and carbon dioxide into sugar and "
    "oxygen. It takes place mainly in the leafs, inside small structures called chloroplasts, which contain the green "
    "pigment chlorophyll. The oxygen is released into the air, and the sugar feeds the plant as it grows.",
    "Our team meets every Monday at nine in the small conference room. Please bring you weekly report, a list of "
    "open questions, and any blockers you have run into. If you cannot attend, send your report to the team lead by "
    "sunday evening so that it can be discussed in your absence.",
};

std::vector<generate_request> grounded_tasks() {
  std::vector<generate_request> out;
  for (const char* passage : kPassages) {
    generate_request r;
    r.messages = {
        {"user", std::string("Correct any mistakes in this passage and write it out again in full:\n\n") + passage}};
    r.max_tokens = 128;
    r.sampling.temperature = 0;
    out.push_back(r);
  }
  return out;
}

std::vector<generate_request> chat_tasks() {
  std::vector<generate_request> out;
  for (const char* q : {"Tell me about the history of tea.", "What makes a good friend?",
                        "Describe a walk through a forest in autumn."}) {
    generate_request r;
    r.messages = {{"user", q}};
    r.max_tokens = 128;
    r.sampling.temperature = 0;
    out.push_back(r);
  }
  return out;
}

struct run_figures {
  double tok_per_s = 0;  // completion tokens / decode time (after the first token)
  uint64_t tokens = 0;
  double decode_ms = 0;    // single stream: the tasks' decode time, first token to last
  speculation_stats spec;  // for this run only
  double speedup = 0;      // against its pair in the same rep (set by the caller)
};

speculation_stats spec_stats(caf::actor_system& sys, runtime& rt) {
  speculation_stats s;
  if (!runtime_access::actors(rt).drafter) return s;
  caf::scoped_actor self{sys};
  self->request(runtime_access::actors(rt).scheduler, caf::infinite, spec_stats_atom::value)
      .receive([&](const speculation_stats& x) { s = x; }, [](const caf::error&) {});
  return s;
}

// Runs `tasks` one after another (streams = 1) or `streams` copies at once.
run_figures run(caf::actor_system& sys, runtime& rt, const std::vector<generate_request>& tasks, int streams) {
  caf::scoped_actor self{sys};
  const auto before = spec_stats(sys, rt);
  run_figures f;
  const auto t0 = clock_type::now();
  auto submit = [&](generate_request r) {
    r.sink = self->spawn(quiet_sink, caf::actor_cast<caf::actor>(self));
    self->request(rt.admission(), caf::infinite, submit_atom::value, r)
        .receive([](const submit_reply&) {}, [](const caf::error&) {});
  };
  if (streams == 1) {
    for (const auto& t : tasks) {
      const auto s0 = clock_type::now();
      submit(t);
      self->receive([&](outcome_atom, const outcome& o) {
        const double total = std::chrono::duration<double, std::milli>(clock_type::now() - s0).count();
        f.decode_ms += total - o.done.ttft_ms;
        f.tokens += o.done.completion_tokens;
      });
    }
    f.tok_per_s = static_cast<double>(f.tokens) / (f.decode_ms / 1000.0);
  } else {
    for (int i = 0; i < streams; ++i) submit(tasks[static_cast<size_t>(i) % tasks.size()]);
    for (int i = 0; i < streams; ++i)
      self->receive([&](outcome_atom, const outcome& o) { f.tokens += o.done.completion_tokens; });
    f.tok_per_s = static_cast<double>(f.tokens) / std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  const auto after = spec_stats(sys, rt);
  f.spec.drafted = after.drafted - before.drafted;
  f.spec.accepted = after.accepted - before.accepted;
  f.spec.passes = after.passes - before.passes;
  f.spec.steps_off = after.steps_off - before.steps_off;
  return f;
}

using bench::median;

// The figures of the median run by tok/s, the speed-up as the median of the reps' paired
// ratios, and the acceptance over all runs (rather than one run's few hundred tokens).
std::string figures_json(std::vector<run_figures> runs, const std::vector<double>& task_speedups = {}) {
  std::vector<double> speedups;
  speculation_stats all;
  for (const auto& r : runs) {
    speedups.push_back(r.speedup);
    all.drafted += r.spec.drafted;
    all.accepted += r.spec.accepted;
    all.passes += r.spec.passes;
    all.steps_off += r.spec.steps_off;
  }
  std::sort(runs.begin(), runs.end(),
            [](const run_figures& a, const run_figures& b) { return a.tok_per_s < b.tok_per_s; });
  const run_figures& f = runs[runs.size() / 2];
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "{\"tok_per_s\":%.2f,\"tokens\":%llu,\"speedup\":%.3f,\"drafted\":%llu,\"accepted\":%llu,"
                "\"acceptance\":%.4f,\"mean_accepted\":%.3f,\"steps_off\":%llu,\"tasks\":[",
                f.tok_per_s, static_cast<unsigned long long>(f.tokens), median(speedups),
                static_cast<unsigned long long>(all.drafted), static_cast<unsigned long long>(all.accepted),
                all.acceptance_rate(), all.mean_accepted(), static_cast<unsigned long long>(f.spec.steps_off));
  std::string out = buf;
  for (size_t i = 0; i < task_speedups.size(); ++i) {
    char num[32];
    std::snprintf(num, sizeof num, "%s%.3f", i > 0 ? "," : "", task_speedups[i]);
    out += num;
  }
  return out + "]}";
}

}  // namespace

constexpr int kReps = 5;

int main(int argc, char** argv) {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};
  const uint32_t draft_layers = argc > 1 ? static_cast<uint32_t>(std::stoi(argv[1])) : 24;
  const auto draft_path = std::filesystem::temp_directory_path() / "tandem_bench_draft.gguf";
  truncate_layers(gguf::file::open(default_model_path()), draft_layers).write(draft_path);

  runtime_config base;
  base.kv_cache_tokens = 32768;
  base.threads = argc > 2 ? std::stoi(argv[2]) : 0;  // compute threads; 0 = one per core
  const std::string part = argc > 3 ? argv[3] : "all";
  const bool run_single = part == "all" || part == "single", run_batch = part == "all" || part == "batch";
  // Single stream: the methods' runtimes live side by side and take turns, task set by task
  // set, five times; each figure is the median run. (One runtime after another made the
  // first one measurably slower than the rest: an order effect, not a method's cost.) The
  // model drafters also run with the cost model off ("-always"): adaptive, they switch
  // themselves off here, and forced on they show their acceptance and what drafting costs.
  const std::vector<std::string> methods =
      run_single ? std::vector<std::string>{"none", "ngram", "layer-skip", "draft", "layer-skip-always", "draft-always"}
                 : std::vector<std::string>{};
  const std::string always_suffix = "-always";
  std::vector<std::unique_ptr<runtime>> method_rts;
  for (const auto& method : methods) {
    runtime_config rc = base;
    const bool always = method.ends_with(always_suffix);
    rc.speculative = always ? method.substr(0, method.size() - always_suffix.size()) : method;
    rc.speculative_adaptive = !always;
    rc.speculative_layers = draft_layers;
    rc.draft_model = draft_path.string();
    method_rts.push_back(runtime::start(sys, rc));
    run(sys, *method_rts.back(), {grounded_tasks()[0]}, 1);  // warm-up
  }
  // The machine's speed drifts by up to 30% within seconds (a one-token decode step measured
  // back to back: 4.1-5.5 ms medians per half second), so a speed-up is only as good as the
  // pairing behind it. Each task runs under every method back to back (the order reversed on
  // every other task), and a rep's speed-up is the sum of none's decode times over the
  // method's, task by task; the figure is the median of the five reps' ratios. The greedy
  // outputs are identical, so the tokens are the same on both sides.
  std::map<std::pair<size_t, int>, std::vector<run_figures>> single_runs;      // (method, 0 grounded / 1 chat)
  std::map<std::tuple<size_t, int, size_t>, std::vector<double>> task_ratios;  // (method, kind, task)
  std::optional<bench::compute_probe> probe;
  if (run_single) probe.emplace(base.threads);
  std::vector<double> rep_extra;  // compute_probe's figure around each rep's grounded tasks
  for (int rep = 0; run_single && rep < kReps; ++rep) {
    const double extra_before = probe->measure();
    for (int kind = 0; kind < 2; ++kind) {
      const auto tasks = kind == 0 ? grounded_tasks() : chat_tasks();
      std::vector<run_figures> rep_runs(methods.size());
      for (size_t t = 0; t < tasks.size(); ++t) {
        std::fprintf(stderr, "single stream, %s task %zu, run %d...\n", kind == 0 ? "grounded" : "chat", t + 1,
                     rep + 1);
        std::vector<run_figures> task_runs(methods.size());
        for (size_t i = 0; i < methods.size(); ++i) {
          const size_t m = (rep * tasks.size() + t) % 2 == 0 ? i : methods.size() - 1 - i;
          task_runs[m] = run(sys, *method_rts[m], {tasks[t]}, 1);
        }
        for (size_t m = 0; m < methods.size(); ++m) {
          auto& r = rep_runs[m];
          r.tokens += task_runs[m].tokens;
          r.decode_ms += task_runs[m].decode_ms;
          r.spec.drafted += task_runs[m].spec.drafted;
          r.spec.accepted += task_runs[m].spec.accepted;
          r.spec.passes += task_runs[m].spec.passes;
          r.spec.steps_off += task_runs[m].spec.steps_off;
          task_ratios[{m, kind, t}].push_back(task_runs[0].decode_ms / task_runs[m].decode_ms);
        }
      }
      for (size_t m = 0; m < methods.size(); ++m) {
        auto& r = rep_runs[m];
        r.tok_per_s = static_cast<double>(r.tokens) / (r.decode_ms / 1000.0);
        r.speedup = rep_runs[0].decode_ms / r.decode_ms;
        std::fprintf(stderr, "  %s: %.1f tok/s, %.2fx, acceptance %.1f%%\n", methods[m].c_str(), r.tok_per_s, r.speedup,
                     100 * r.spec.acceptance_rate());
        single_runs[{m, kind}].push_back(r);
      }
      if (kind == 0) {
        rep_extra.push_back((extra_before + probe->measure()) / 2);
        std::fprintf(stderr, "  a drafted token's extra step time: %.3f of a one-token step\n", rep_extra.back());
      }
    }
  }
  probe.reset();
  method_rts.clear();
  std::string single = "{";
  for (size_t m = 0; m < methods.size(); ++m) {
    std::vector<double> per_task;
    for (size_t t = 0; t < grounded_tasks().size(); ++t) per_task.push_back(median(task_ratios[{m, 0, t}]));
    single += (m > 0 ? ",\"" : "\"") + methods[m] + "\":{\"grounded\":" + figures_json(single_runs[{m, 0}], per_task) +
              ",\"chat\":" + figures_json(single_runs[{m, 1}]) + "}";
  }
  single += std::string(single == "{" ? "" : ",") + "\"reps\":[";
  const size_t ngram = static_cast<size_t>(std::find(methods.begin(), methods.end(), "ngram") - methods.begin());
  for (size_t r = 0; r < rep_extra.size(); ++r) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s{\"extra_token_cost\":%.3f,\"ngram_grounded\":%.3f}", r > 0 ? "," : "",
                  rep_extra[r], single_runs[{ngram, 0}][r].speedup);
    single += buf;
  }
  single += "]}";

  // Batch throughput: the three modes run side by side (one runtime each), interleaved per
  // repetition so drift in the machine's load hits all alike; median of five.
  const std::vector<std::string> modes =
      run_batch ? std::vector<std::string>{"off", "always", "adaptive"} : std::vector<std::string>{};
  std::vector<std::unique_ptr<runtime>> rts;
  for (const auto& mode : modes) {
    runtime_config rc = base;
    rc.kv_cache_tokens = 16384;
    rc.speculative = mode == "off" ? "none" : "ngram";
    rc.speculative_adaptive = mode == "adaptive";
    rts.push_back(runtime::start(sys, rc));
    run(sys, *rts.back(), {grounded_tasks()[0]}, 1);
  }
  auto tasks = grounded_tasks();
  for (auto& t : chat_tasks()) tasks.push_back(t);
  const std::vector<int> stream_counts{1, 4, 16};
  std::map<std::pair<size_t, int>, std::vector<run_figures>> reps;  // (mode, streams) -> runs
  for (int rep = 0; rep < kReps; ++rep) {
    for (int streams : stream_counts) {
      std::vector<run_figures> rep_runs(modes.size());
      for (size_t i = 0; i < modes.size(); ++i) {
        const size_t m = (rep + i) % modes.size();  // each mode first in turn
        std::fprintf(stderr, "throughput, n-gram %s, %d streams, run %d...\n", modes[m].c_str(), streams, rep + 1);
        rep_runs[m] = run(sys, *rts[m], tasks, streams);
        std::fprintf(stderr, "  %.1f tok/s\n", rep_runs[m].tok_per_s);
      }
      for (size_t m = 0; m < modes.size(); ++m) {
        rep_runs[m].speedup = rep_runs[m].tok_per_s / rep_runs[0].tok_per_s;  // against off, this rep
        reps[{m, streams}].push_back(rep_runs[m]);
      }
    }
  }
  std::string batch = "{";
  for (size_t m = 0; m < modes.size(); ++m) {
    batch += (m > 0 ? ",\"" : "\"") + modes[m] + "\":{";
    for (int streams : stream_counts) {
      batch += (streams > 1 ? ",\"" : "\"") + std::to_string(streams) + "\":" + figures_json(reps[{m, streams}]);
    }
    batch += "}";
  }
  batch += "}";
  rts.clear();
  std::filesystem::remove(draft_path);
  std::printf("{\"draft_layers\":%u,\"single\":%s,\"batch\":%s}\n", draft_layers, single.c_str(), batch.c_str());
  return 0;
}
