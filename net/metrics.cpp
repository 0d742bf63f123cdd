#include "net/metrics.h"

#include <chrono>
#include <cstdio>

namespace tandem::net {
namespace {

std::string fmt_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// Label values are tenant names from the config or fixed words; escape anyway.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void gauge(std::string& out, const std::string& name, const std::string& help, double v) {
  header(out, name, "gauge", help);
  out += name + " " + fmt_double(v) + "\n";
}

void counter(std::string& out, const std::string& name, const std::string& help, double v) {
  header(out, name, "counter", help);
  out += name + " " + fmt_double(v) + "\n";
}

// Keyed by (tenant, model); a server of one model leaves the model out ("").
void per_tenant(std::string& out, const std::string& name, const std::string& help,
                const std::map<std::pair<std::string, std::string>, uint64_t>& m) {
  header(out, name, "counter", help);
  for (const auto& [key, v] : m) {
    out += name + "{tenant=\"" + label(key.first) + "\"" +
           (key.second.empty() ? std::string() : ",model=\"" + label(key.second) + "\"") + "} " + std::to_string(v) +
           "\n";
  }
}

}  // namespace

const char* rejection_reason(int status) {
  switch (status) {
    case 401:
      return "unauthorized";
    case 429:
      return "rate_limited";
    case 503:
      return "overloaded";
    default:
      return "invalid_request";
  }
}

void latency_histogram::observe(double seconds, uint64_t times) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (seconds <= bounds_[i]) counts_[i] += times;
  }
  count_ += times;
  sum_ += seconds * static_cast<double>(times);
}

void latency_histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    out += name + "_bucket{le=\"" + fmt_double(bounds_[i]) + "\"} " + std::to_string(counts_[i]) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + fmt_double(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

double server_metrics::unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void server_metrics::count_request(const std::string& tenant, int status, const std::string& model) {
  std::lock_guard lock(mutex_);
  ++requests_[{tenant, status, model}];
}

void server_metrics::count_guard(const std::string& stage, bool flagged) {
  std::lock_guard lock(mutex_);
  ++guard_checks_[{stage, flagged}];
}

void server_metrics::count_rejection(const std::string& reason) {
  std::lock_guard lock(mutex_);
  ++rejections_[reason];
}

void server_metrics::observe_generation(const std::string& tenant, const generation_done& d, const std::string& model) {
  std::lock_guard lock(mutex_);
  prompt_tokens_[{tenant, model}] += d.prompt_tokens;
  generation_tokens_[{tenant, model}] += d.completion_tokens;
  cached_tokens_[{tenant, model}] += d.cached_tokens;
  if (d.completion_tokens > 0) ttft_.observe(d.ttft_ms / 1000.0);
  if (d.completion_tokens > 1) itl_.observe(d.tpot_ms / 1000.0, d.completion_tokens - 1);
  e2e_queue_.observe(d.queue_ms / 1000.0);
  for (const float s : d.image_encode_seconds) image_encode_.observe(s);
  images_rejected_ += d.image_rejected ? 1 : 0;
}

namespace {

// A router's view of its nodes, one series per node (label node="host:port").
void render_cluster(std::string& out, const cluster_stats& c) {
  const auto per_node = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    for (const auto& n : c.nodes) {
      out += std::string(name) + "{node=\"" + label(n.address) + "\"} " + fmt_double(value(n)) + "\n";
    }
  };
  per_node("tandem:cluster_node_up", "gauge", "1 while the router is joined to the node",
           [](const node_figures& n) { return n.up ? 1.0 : 0.0; });
  per_node("tandem:cluster_node_outstanding", "gauge", "Sequences the router has running or queued on the node",
           [](const node_figures& n) { return double(n.outstanding); });
  per_node("tandem:cluster_node_kv_cache_usage_ratio", "gauge", "Fraction of the node's KV blocks used by sequences",
           [](const node_figures& n) {
             return n.last.kv_blocks_total ? double(n.last.kv_blocks_used) / n.last.kv_blocks_total : 0.0;
           });
  per_node("tandem:cluster_node_num_requests_waiting", "gauge", "Sequences waiting in the node's scheduler",
           [](const node_figures& n) { return double(n.last.sched.waiting); });
  per_node("tandem:cluster_node_prefix_cache_queries_total", "counter", "Prompt tokens the node looked up",
           [](const node_figures& n) { return double(n.last.prefix_queries); });
  per_node("tandem:cluster_node_prefix_cache_hits_total", "counter", "Prompt tokens the node found in its cache",
           [](const node_figures& n) { return double(n.last.prefix_hits); });
  per_node("tandem:cluster_node_index_blocks", "gauge", "Prefix blocks the router's index says the node holds",
           [](const node_figures& n) { return double(n.index_blocks); });
  header(out, "tandem:cluster_routed_total", "counter",
         "Sequences sent to each node, by why: session (its session's node), prefix (it held part of the "
         "prompt) or load");
  for (const auto& n : c.nodes) {
    const std::string node = label(n.address);
    out += "tandem:cluster_routed_total{node=\"" + node + "\",reason=\"prefix\"} " + std::to_string(n.prefix_routed) +
           "\n";
    out += "tandem:cluster_routed_total{node=\"" + node + "\",reason=\"session\"} " + std::to_string(n.session_routed) +
           "\n";
    out += "tandem:cluster_routed_total{node=\"" + node + "\",reason=\"load\"} " +
           std::to_string(n.routed - n.prefix_routed - n.session_routed) + "\n";
  }
  per_node("tandem:cluster_retried_total", "counter", "Sequences moved off the node when it was lost, before a token",
           [](const node_figures& n) { return double(n.retried); });
  per_node("tandem:cluster_lost_total", "counter", "Sequences that ended with an error when the node was lost",
           [](const node_figures& n) { return double(n.lost); });
  per_node("tandem:cluster_joins_total", "counter", "Times the router joined the node",
           [](const node_figures& n) { return double(n.joins); });
  per_node("tandem:cluster_node_warming", "gauge", "1 while the node prefills its warm-up and takes no sequence",
           [](const node_figures& n) { return n.warming ? 1.0 : 0.0; });
  per_node("tandem:cluster_warmups_total", "counter", "Joins after which the node was sent hot prefixes to prefill",
           [](const node_figures& n) { return double(n.warmups); });
  per_node("tandem:cluster_warmup_timeouts_total", "counter",
           "Warm-ups cut short by --warmup-timeout-s (the node took traffic unwarmed)",
           [](const node_figures& n) { return double(n.warmup_timeouts); });
  per_node("tandem:cluster_warmup_tokens_total", "counter", "Prompt tokens sent to the node to prefill as warm-up",
           [](const node_figures& n) { return double(n.warmup_tokens); });
  per_node("tandem:cluster_node_warmup_seconds", "gauge", "How long the node's last warm-up took",
           [](const node_figures& n) { return n.warmup_seconds; });
  counter(out, "tandem:cluster_routing_decisions_total", "Routing decisions made", double(c.decisions));
  counter(out, "tandem:cluster_routing_decision_seconds_total", "Time spent deciding (prompt hashing included)",
          c.decision_us_total / 1e6);
  counter(out, "tandem:cluster_unroutable_total", "Sequences no node could take (answered 503)", double(c.unroutable));
  header(out, "tandem:cluster_routing_policy", "gauge", "The routing policy in use");
  out += "tandem:cluster_routing_policy{policy=\"" + label(c.policy) + "\"} 1\n";
}

// The prefix cache's disk tier (--kv-cache-dir): engine/kv_disk/disk_store.h counts these.
void render_kv_disk(std::string& out, const kv_cache_stats& kv) {
  const auto& d = kv.disk;
  auto c = [&](const char* name, const char* help, uint64_t v) { counter(out, name, help, static_cast<double>(v)); };
  gauge(out, "tandem:kv_disk_files", "Block files in the disk tier", static_cast<double>(d.files));
  gauge(out, "tandem:kv_disk_bytes", "Bytes of the disk tier's block files", static_cast<double>(d.bytes));
  gauge(out, "tandem:kv_disk_max_bytes", "The disk tier's bound (--kv-cache-disk-bytes)",
        static_cast<double>(d.max_bytes));
  c("tandem:kv_disk_hits_total", "Blocks read from the disk tier and verified", d.hits);
  c("tandem:kv_disk_misses_total", "Blocks asked of the disk tier and not found (or refused)", d.misses);
  c("tandem:kv_disk_hit_tokens_total", "Prompt tokens whose KV came into memory from the disk tier",
    kv.disk_hit_tokens);
  c("tandem:kv_disk_corrupt_total", "Block files refused when read (corrupt, truncated, foreign) and removed",
    d.corrupt);
  c("tandem:kv_disk_writes_total", "Block files written", d.writes);
  c("tandem:kv_disk_write_errors_total", "Block files that could not be written", d.write_errors);
  c("tandem:kv_disk_evictions_total", "Block files removed to stay within the bounds", d.evictions);
  c("tandem:kv_disk_read_bytes_total", "Bytes read from the disk tier", d.bytes_read);
  c("tandem:kv_disk_written_bytes_total", "Bytes written to the disk tier", d.bytes_written);
  c("tandem:kv_disk_removed_at_open_total", "Leftover or malformed files removed when the directory was opened",
    d.removed_at_open);
  gauge(out, "tandem:kv_disk_unknown_files", "Files of other names found in the directory (left alone)",
        static_cast<double>(d.unknown_files));
}

// Steps sized in time (engine/schedule/step_planner.h): the last step's budget, its predicted
// and measured time, and the cost model behind both.
void render_step_budget(std::string& out, const scheduler_stats& s) {
  gauge(out, "tandem:target_itl_seconds", "The step time the planner sizes prompt work for (--target-itl-ms)",
        s.target_step_ms / 1e3);
  gauge(out, "tandem:target_ttft_seconds",
        "The wait for a first token at which prompts get the whole step target (--target-ttft-ms; 0 = off)",
        s.target_ttft_ms / 1e3);
  gauge(out, "tandem:prompt_share_ratio", "Prompts' floor now, as a share of the step target beside decoding rows",
        s.prompt_share);
  gauge(out, "tandem:step_budget_tokens",
        "Tokens the last step might compute: its decode rows and the prompt tokens its time allowed",
        s.step_budget_tokens);
  gauge(out, "tandem:step_predicted_seconds", "The cost model's prediction of the last step's time (0: not ready)",
        s.step_predicted_ms / 1e3);
  gauge(out, "tandem:step_measured_seconds", "The last step's time, from planning it to its result",
        s.step_measured_ms / 1e3);
  header(out, "tandem:step_phase_seconds", "gauge",
         "The last step's measured time by phase (they sum to tandem:step_measured_seconds): plan (drafting, "
         "the KV reservation), forward, sample, transit (messaging and waits between the actors) and apply");
  const std::pair<const char*, double> phases[] = {{"plan", s.step_plan_ms},
                                                   {"forward", s.step_forward_ms},
                                                   {"sample", s.step_sample_ms},
                                                   {"transit", s.step_transit_ms},
                                                   {"apply", s.step_apply_ms}};
  for (const auto& [phase, ms] : phases) {
    out += std::string("tandem:step_phase_seconds{phase=\"") + phase + "\"} " + fmt_double(ms / 1e3) + "\n";
  }
  header(out, "tandem:step_cost_seconds", "gauge",
         "The cost model: seconds per step (fixed), per decode row, per prompt token and per attended key");
  static const char* const parts[] = {"fixed", "decode_row", "prompt_token", "key"};
  for (size_t i = 0; i < s.step_cost.size() && i < 4; ++i) {
    out += std::string("tandem:step_cost_seconds{part=\"") + parts[i] + "\"} " + fmt_double(s.step_cost[i] / 1e3) + "\n";
  }
}

// Several models' engine series as one exposition: each sample gains the label
// model="NAME" first, and each family (its HELP and TYPE, then every model's samples) stays
// together, in the order the families first appear.
std::string merge_by_model(const std::vector<std::pair<std::string, std::string>>& rendered) {
  struct family {
    std::string head;  // its HELP and TYPE lines
    std::string samples;
  };
  std::vector<std::string> order;
  std::map<std::string, family> families;
  for (const auto& [model, text] : rendered) {
    const std::string tag = "model=\"" + label(model) + "\"";
    std::string current;  // the family of the lines that follow its HELP
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      at = end + 1;
      if (line.rfind("# HELP ", 0) == 0) {
        current = line.substr(7, line.find(' ', 7) - 7);
        if (!families.count(current)) order.push_back(current);
        auto& f = families[current];
        if (f.head.empty()) f.head = line + "\n";
        continue;
      }
      if (line.rfind("# TYPE ", 0) == 0) {
        auto& f = families[current];
        if (f.head.find("# TYPE ") == std::string::npos) f.head += line + "\n";
        continue;
      }
      if (line.empty()) continue;
      const size_t brace = line.find('{'), space = line.find(' ');
      std::string sample = brace != std::string::npos && brace < space
                               ? line.substr(0, brace + 1) + tag + "," + line.substr(brace + 1)
                               : line.substr(0, space) + "{" + tag + "}" + line.substr(space);
      families[current].samples += sample + "\n";
    }
  }
  std::string out;
  for (const auto& name : order) out += families[name].head + families[name].samples;
  return out;
}

}  // namespace

std::string server_metrics::render(const runtime_figures& f) const {
  std::string out = render_engine(f);
  render_server(out, f.images);
  return out;
}

std::string server_metrics::render(const std::vector<std::pair<std::string, runtime_figures>>& models) const {
  std::vector<std::pair<std::string, std::string>> rendered;
  rendered.reserve(models.size());
  bool images = false;
  for (const auto& [name, f] : models) {
    rendered.emplace_back(name, render_engine(f));
    images = images || f.images;
  }
  std::string out = merge_by_model(rendered);
  render_server(out, images);
  return out;
}

std::string server_metrics::render_engine(const runtime_figures& f) const {
  std::string out;
  out.reserve(8192);
  gauge(out, "tandem:ready", "1 once the model is loaded and the server takes requests", f.ready ? 1 : 0);
  // The Gateway API Inference Extension's model-server protocol reads the next two, the KV
  // usage ratio and tandem:lora_requests_info (docs/cluster.md names the picker's flags):
  // running = sequences in the running batch; waiting = sequences queued for it (preempted
  // ones included), neither counting requests still in admission or tokenization.
  gauge(out, "tandem:num_requests_running", "Sequences in the running batch", f.sched.running);
  gauge(out, "tandem:num_requests_waiting", "Sequences waiting to be scheduled", f.sched.waiting);
  gauge(out, "tandem:requests_in_flight", "Accepted requests not finished yet", f.admission.in_flight);
  gauge(out, "tandem:kv_blocks_total", "KV cache blocks in the pool", f.kv.pool.total);
  gauge(out, "tandem:kv_blocks_used", "KV blocks held by sequences (outside the prefix cache)", f.kv.pool.used);
  gauge(out, "tandem:kv_blocks_cached", "KV blocks held only by the prefix cache (evictable)", f.kv.pool.cached_free);
  gauge(out, "tandem:kv_blocks_free", "KV blocks neither used nor cached", f.kv.pool.free);
  // 0..1, vLLM's kv_cache_usage_perc: blocks only the prefix cache holds are evictable, so free.
  gauge(out, "tandem:kv_cache_usage_ratio", "Fraction of KV blocks used by sequences (0..1)",
        f.kv.pool.total ? static_cast<double>(f.kv.pool.used) / f.kv.pool.total : 0.0);
  // vLLM's lora_requests_info shape. No adapters yet: empty lists and max_lora 0, so a picker's
  // adapter-affinity scorer sees a server that holds none (and can load none).
  header(out, "tandem:lora_requests_info", "gauge",
         "Adapters running and waiting (labels); the value is when the set last changed (Unix seconds)");
  out += "tandem:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} ";
  char since[32];
  std::snprintf(since, sizeof since, "%.3f\n", adapters_since_);  // %g would round to 9 digits
  out += since;
  if (f.kv.local_pool.total > 0) {  // a model with sliding-window layers: their own pool
    gauge(out, "tandem:kv_local_blocks_total", "Sliding-window layers' KV blocks in their pool", f.kv.local_pool.total);
    gauge(out, "tandem:kv_local_blocks_used", "Sliding-window layers' KV blocks held by sequences (their window)",
          f.kv.local_pool.used);
    gauge(out, "tandem:kv_local_blocks_cached", "Sliding-window layers' KV blocks held only by the prefix cache",
          f.kv.local_pool.cached_free);
  }
  gauge(out, "tandem:kv_sequences", "Sequences holding a block table", f.kv.sequences);
  counter(out, "tandem:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
          static_cast<double>(f.kv.prefix_queries));
  counter(out, "tandem:prefix_cache_hits_total", "Prompt tokens found in the prefix cache",
          static_cast<double>(f.kv.prefix_hits));
  counter(out, "tandem:kv_evictions_total", "Cached KV blocks evicted", static_cast<double>(f.kv.pool.evictions));
  if (f.kv.disk_enabled) render_kv_disk(out, f.kv);
  counter(out, "tandem:scheduler_steps_total", "Steps run by the device", static_cast<double>(f.sched.steps));
  counter(out, "tandem:preemptions_total", "Sequences preempted for lack of KV blocks",
          static_cast<double>(f.sched.preemptions));
  counter(out, "tandem:priority_preemptions_total",
          "Of the preemptions: running sequences a more urgent arrival displaced (request priority)",
          static_cast<double>(f.sched.priority_preemptions));
  counter(out, "tandem:slo_rejected_total",
          "Requests refused at once because their x-slo-ttft-ms could not be met (x-slo-reject: true)",
          static_cast<double>(f.sched.slo_rejected));
  render_step_budget(out, f.sched);
  counter(out, "tandem:device_restarts_total", "Device workers that died and were replaced",
          static_cast<double>(f.sched.device_restarts));
  counter(out, "tandem:requests_cancelled_total", "Requests cancelled (client gone or cancel frame)",
          static_cast<double>(f.admission.cancelled));

  if (!f.spec_method.empty()) {
    // Speculative decoding (vLLM's spec_decode names), labelled by drafting method.
    const std::string m = "{method=\"" + label(f.spec_method) + "\"}";
    header(out, "tandem:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed and verified");
    out += "tandem:spec_decode_num_draft_tokens_total" + m + " " + std::to_string(f.spec.drafted) + "\n";
    header(out, "tandem:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted");
    out += "tandem:spec_decode_num_accepted_tokens_total" + m + " " + std::to_string(f.spec.accepted) + "\n";
    header(out, "tandem:spec_decode_mean_accepted_length", "gauge", "Accepted drafts per verification pass");
    out += "tandem:spec_decode_mean_accepted_length" + m + " " + std::to_string(f.spec.mean_accepted()) + "\n";
    header(out, "tandem:spec_decode_steps_off_total", "counter", "Steps where the cost model switched drafting off");
    out += "tandem:spec_decode_steps_off_total" + m + " " + std::to_string(f.spec.steps_off) + "\n";
    // One series per K from 1: name{method, k} = by_k[k].
    auto per_k = [&](const char* name, const char* type, const char* help, const auto& by_k) {
      header(out, name, type, help);
      for (size_t k = 1; k < by_k.size(); ++k) {
        out += std::string(name) + "{method=\"" + label(f.spec_method) + "\",k=\"" + std::to_string(k) + "\"} " +
               std::to_string(by_k[k]) + "\n";
      }
    };
    per_k("tandem:spec_decode_k", "gauge", "Sequences by their current number of draft tokens K", f.spec.k_histogram);
    per_k("tandem:spec_decode_passes_total", "counter", "Verification passes by the number of drafts K they checked",
          f.spec.passes_by_k);
  }

  if (f.clustered) render_cluster(out, f.cluster);
  return out;
}

void server_metrics::render_server(std::string& out, bool images) const {
  std::lock_guard lock(mutex_);
  ttft_.render(out, "tandem:time_to_first_token_seconds", "Time from submit to the first token");
  itl_.render(out, "tandem:inter_token_latency_seconds", "Time between output tokens (per token, mean per request)");
  if (images) {
    image_encode_.render(out, "tandem:image_encode_seconds",
                         "Time to decode and encode one image (--mmproj), off the step loop");
    header(out, "tandem:images_rejected_total", "counter", "Images refused (malformed, too large, not an image)");
    out += "tandem:images_rejected_total " + std::to_string(images_rejected_) + "\n";
  }
  e2e_queue_.render(out, "tandem:request_queue_time_seconds", "Time waiting before the first step");
  header(out, "tandem:requests_total", "counter", "API requests by tenant and HTTP status (and model, with several)");
  for (const auto& [key, v] : requests_) {
    const auto& [tenant, status, model] = key;
    out += "tandem:requests_total{tenant=\"" + label(tenant) + "\",status=\"" + std::to_string(status) + "\"" +
           (model.empty() ? std::string() : ",model=\"" + label(model) + "\"") + "} " + std::to_string(v) + "\n";
  }
  header(out, "tandem:rejections_total", "counter", "Requests refused before any work, by reason");
  for (const char* reason : {"unauthorized", "rate_limited", "overloaded", "invalid_request"}) {
    const auto it = rejections_.find(reason);
    out += std::string("tandem:rejections_total{reason=\"") + reason + "\"} " +
           std::to_string(it == rejections_.end() ? 0 : it->second) + "\n";
  }
  if (!guard_checks_.empty()) {
    header(out, "tandem:guard_checks_total", "counter", "Guard model verdicts by stage (input, output, moderation)");
    for (const auto& [key, v] : guard_checks_) {
      out += "tandem:guard_checks_total{stage=\"" + label(key.first) + "\",verdict=\"" +
             (key.second ? "unsafe" : "safe") + "\"} " + std::to_string(v) + "\n";
    }
  }
  per_tenant(out, "tandem:prompt_tokens_total", "Prompt tokens by tenant", prompt_tokens_);
  per_tenant(out, "tandem:generation_tokens_total", "Generated tokens by tenant", generation_tokens_);
  per_tenant(out, "tandem:cached_prompt_tokens_total", "Prompt tokens served from the prefix cache by tenant",
             cached_tokens_);
}

}  // namespace tandem::net
