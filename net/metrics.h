// Prometheus metrics of the serving front (prefix "tandem:"). Counters and histograms are
// fed by the network sessions (any io thread: one mutex inside, held for microseconds);
// the runtime's gauges (running/waiting sequences, KV blocks, prefix cache) are read from
// the actors at scrape time and passed to render().
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "actors/cluster/router.h"
#include "actors/scheduler/scheduler.h"
#include "engine/kv/kv_cache_stats.h"
#include "engine/speculation/speculation_policy.h"
#include "tandem/api.h"

namespace tandem::net {

struct runtime_figures {
  bool ready = false;
  scheduler_stats sched;
  kv_cache_stats kv;
  admission_stats admission;
  std::string spec_method;  // "" when the runtime does not speculate
  speculation_stats spec;
  bool clustered = false;  // a cluster's router: the figures below, and sched/kv summed over the nodes
  cluster_stats cluster;
  bool images = false;  // --mmproj: the image series are rendered (from server_metrics' own counts)
};

class latency_histogram {
 public:
  // Request latencies, 1 ms to 30 s.
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
  latency_histogram() : latency_histogram({kBounds.begin(), kBounds.end()}) {}
  explicit latency_histogram(std::vector<double> bounds)  // ascending, seconds
      : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double seconds, uint64_t times = 1);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound: observations at most it (cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class server_metrics {
 public:
  // One API request (or WebSocket generation) ended with this HTTP-style status. `model`: the
  // model that served it in a server of several (a `model` label), "" in a server of one.
  void count_request(const std::string& tenant, int status, const std::string& model = "");
  // A refusal before work: "unauthorized", "rate_limited", "overloaded", "invalid_request".
  void count_rejection(const std::string& reason);
  // A guard model's verdict (net/guard.h): stage input, output or moderation.
  void count_guard(const std::string& stage, bool flagged);
  // A generation finished: its token counts and timings.
  void observe_generation(const std::string& tenant, const generation_done& d, const std::string& model = "");

  std::string render(const runtime_figures& f) const;
  // A server of several models: each loaded model's engine series, labelled model="NAME".
  std::string render(const std::vector<std::pair<std::string, runtime_figures>>& models) const;

 private:
  // When the adapter set last changed (no adapters yet: it never does after start): the
  // value of tandem:lora_requests_info, which the endpoint picker reads as "latest".
  const double adapters_since_ = unix_seconds();
  static double unix_seconds();
  // The series read from one runtime's actors, then the front's own (images: the image series).
  std::string render_engine(const runtime_figures& f) const;
  void render_server(std::string& out, bool images) const;
  mutable std::mutex mutex_;
  latency_histogram ttft_;
  latency_histogram itl_;
  latency_histogram e2e_queue_;
  // One image's decode and encode, 50 ms (a small image, a small encoder) to 2 minutes.
  latency_histogram image_encode_{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  uint64_t images_rejected_ = 0;
  std::map<std::tuple<std::string, int, std::string>, uint64_t> requests_;  // tenant, status, model
  std::map<std::string, uint64_t> rejections_;
  std::map<std::pair<std::string, bool>, uint64_t> guard_checks_;  // stage, flagged
  // By (tenant, model).
  std::map<std::pair<std::string, std::string>, uint64_t> prompt_tokens_, generation_tokens_, cached_tokens_;
};

// The reason label for a refused submit's status.
const char* rejection_reason(int status);

}  // namespace tandem::net
