// `tandem serve`: the OpenAI-compatible HTTP + SSE server and the WebSocket endpoint on the
// actor runtime. Option names follow vLLM's where the meaning is the same.
#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <unistd.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "actors/cluster/cluster_node.h"
#include "cli/cmd_cluster_tls.h"
#include "net/http/node_tls_front.h"
#include "cli/commands.h"
#include "cli/model_sha256.h"
#include "cli/server_config.h"
#include "cli/speculative_options.h"
#include "cli/lora_options.h"
#include "cli/vision_options.h"
#include "cli/tiled_cache_options.h"
#include "engine/tenants/tenant_limits.h"
#include "gpu/cli/device_options.h"
#include "models/model_spec.h"
#include "models/supervisor.h"
#include "net/server.h"
#include "tandem/remote.h"
#include "tandem/runtime.h"

namespace tandem::cli {
namespace {

struct serve_options {
  std::string model = "default";
  // A server of several models (models/): every --model NAME=PATH given, or the config's
  // `models` list; empty: one model (--model PATH) takes every name.
  std::vector<model_spec> models;
  uint64_t models_memory_budget = 0;  // 0: three quarters of the machine's memory
  std::string models_keep_alive = "5m";
  double models_load_timeout_s = 120;
  std::string admin_api_key;
  std::string model_sha256;  // set: the file must have this SHA-256 (cli/model_sha256.h)
  std::string served_model_name;
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string config;
  std::string api_key;
  bool allow_open_non_loopback = false;
  std::string chat_page;
  runtime_config rt;
  device_options device;
  int io_threads = 1;  // one writes ~50k SSE events/s; a second only adds wake-ups (CPU per token)
  uint32_t stream_interval = 1;
  uint32_t max_connections = 1024;
  uint32_t timeout_s = 30;
  size_t max_pending_output_bytes = 1 << 20;
  size_t max_body_bytes = 0;  // 0: 1 MiB, or 32 MiB with --mmproj (images come inline)
  int send_buffer_bytes = 0;
  uint32_t max_connections_per_address = 0;
  uint32_t ws_idle_timeout_s = 60;
  uint32_t ws_auth_timeout_s = 5;
  uint32_t shutdown_timeout_s = 30;
  std::vector<std::string> allowed_origins;
  std::string metrics_api_key;
  // TLS (vLLM's names; net/http/tls_context.h).
  std::string ssl_keyfile;
  std::string ssl_certfile;
  std::string ssl_ca_certs;
  int ssl_cert_reqs = 0;
  uint32_t ssl_handshake_timeout_s = 10;
  std::string log_level = "info";
  std::string reasoning_parser = "auto";
  std::string tool_call_parser = "auto";
  std::string pooling = "auto";  // auto: the file's <arch>.pooling_type (runtime_config::pooling "")
  bool plain_text_prompts = false;
  uint32_t responses_store_max_responses = 1000;
  uint64_t responses_store_max_bytes = uint64_t{64} << 20;
  uint32_t responses_store_ttl_s = 3600;
  // Cluster mode (docs/cluster.md).
  std::string role = "single";  // single, node, router
  std::string node_host = "127.0.0.1";
  uint16_t node_port = 7070;
  std::string cluster_secret_file;
  cluster_tls_options cluster_tls;
};

// The cluster secret: --cluster-secret-file (first line), else $TANDEM_CLUSTER_SECRET.
std::string read_cluster_secret(const std::string& path) {
  std::string secret;
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("--cluster-secret-file: cannot read " + path);
    std::getline(in, secret);
  } else if (const char* env = std::getenv("TANDEM_CLUSTER_SECRET")) {
    secret = env;
  }
  while (!secret.empty() && (secret.back() == '\r' || secret.back() == ' ')) secret.pop_back();
  if (secret.size() < 16) {
    throw std::runtime_error(
        "--role node/router needs a cluster secret of 16 characters or more (--cluster-secret-file or "
        "TANDEM_CLUSTER_SECRET): routers join nodes with it");
  }
  return secret;
}

// Raises the open-files limit to its hard limit where allowed, and keeps --max-connections
// below what is left of it (model files, the listener and the like need a few): at the
// limit, accept() fails with EMFILE. Prints what it did.
void fit_connections_to_file_limit(uint32_t& max_connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur != before) {
    std::printf("tandem: open files limit raised from %llu to %llu\n", static_cast<unsigned long long>(before),
                static_cast<unsigned long long>(lim.rlim_cur));
  }
  constexpr rlim_t kReserved = 64;
  const rlim_t room = lim.rlim_cur > 2 * kReserved ? lim.rlim_cur - kReserved : lim.rlim_cur / 2;
  if (lim.rlim_cur != RLIM_INFINITY && max_connections > room) {
    std::printf("tandem: --max-connections lowered from %u to %llu: the open files limit is %llu\n", max_connections,
                static_cast<unsigned long long>(room), static_cast<unsigned long long>(lim.rlim_cur));
    max_connections = static_cast<uint32_t>(room);
  }
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

// The chat page: --chat-page, or the first that exists of
//   examples/chat/index.html              under the working directory
//   BIN/../share/tandem/chat/index.html   an installed binary's (make install, the .deb)
//   SOURCE/examples/chat/index.html       the source tree this binary was built from
std::string find_chat_page(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> candidates{"examples/chat/index.html"};
  if (!ec) candidates.push_back((exe.parent_path().parent_path() / "share/tandem/chat/index.html").string());
  candidates.push_back(std::string(TANDEM_SOURCE_DIR) + "/examples/chat/index.html");
  for (const std::string& p : candidates) {
    if (std::filesystem::exists(p, ec)) return p;
  }
  return {};
}

const model_spec& default_model(const std::vector<model_spec>& models) {
  for (const auto& m : models) {
    if (m.is_default) return m;
  }
  return models.front();
}

uint64_t default_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 4 * 3 : uint64_t{8} << 30;
}

supervisor_config supervisor_settings(const serve_options& o, const std::optional<device_factory>& device) {
  supervisor_config sc;
  sc.models = o.models;
  sc.base = o.rt;
  sc.device = device;
  sc.memory_budget = o.models_memory_budget > 0 ? o.models_memory_budget : default_memory_budget();
  sc.keep_alive_s = parse_keep_alive(o.models_keep_alive, "--models-keep-alive");
  sc.load_timeout_s = o.models_load_timeout_s;
  sc.admin_key = o.admin_api_key;
  for (const auto& t : o.rt.tenants) {
    for (const auto& m : t.models) {
      bool known = false;
      for (const auto& spec : o.models) known = known || spec.name == m;
      if (!known) throw std::runtime_error("tenant '" + t.name + "' names model '" + m + "', which is not served");
    }
  }
  return sc;
}

// A server of several models: the supervisor loads the default one now (pinned), the others
// on first use; a graceful end drains every loaded one.
int serve_models(const serve_options& o, caf::actor_system& sys, net::http_server& server,
                 const model_supervisor_actor& sup) {
  model_grant first;
  {
    caf::scoped_actor self{sys};
    self->request(sup, caf::infinite, ms_default_atom::value)
        .receive([&](model_grant& g) { first = std::move(g); }, [&](caf::error& e) { first.message = sys.render(e); });
  }
  if (!first.rt) throw std::runtime_error(first.message);
  server.attach(*first.rt);
  const uint64_t budget = o.models_memory_budget > 0 ? o.models_memory_budget : default_memory_budget();
  std::printf(
      "tandem: ready: %zu models, default %s (memory budget %llu MiB), %s\n", o.models.size(), first.name.c_str(),
      static_cast<unsigned long long>(budget >> 20),
      o.rt.tenants.empty() ? "open mode (no API keys)" : (std::to_string(o.rt.tenants.size()) + " tenant(s)").c_str());
  std::fflush(stdout);
  server.wait_for_signal();
  std::printf("tandem: shutting down (up to %u s for running requests)\n", o.shutdown_timeout_s);
  std::fflush(stdout);
  server.stop_accepting();
  loaded_runtimes all;
  {
    caf::scoped_actor self{sys};
    self->request(sup, std::chrono::seconds(10), ms_all_atom::value)
        .receive([&](loaded_runtimes& v) { all = std::move(v); }, [](caf::error&) {});
  }
  for (const auto& rt : all) rt->stop(std::chrono::seconds(o.shutdown_timeout_s));
  server.wait_for_answers(std::chrono::seconds(5));
  server.stop();
  std::fflush(stdout);
  _exit(0);
}

int serve(serve_options o) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  o.rt.model = o.model;
  o.rt.pooling = o.pooling == "auto" ? "" : o.pooling;
  // Before the listener opens: --device cuda without a usable GPU fails here, with one line.
  const auto device = apply_device_options(o.device, o.rt);
  if (!o.api_key.empty()) {
    tenant_config t;
    t.name = "default";
    t.api_keys.push_back(o.api_key);
    o.rt.tenants.push_back(std::move(t));
    check_unique(o.rt.tenants);  // --api-key's tenant beside the config's
  }
  if (o.rt.tenants.empty() && !is_loopback(o.host) && !o.allow_open_non_loopback) {
    std::fprintf(stderr,
                 "tandem serve: no tenants or --api-key given, so every client would be let in; that is allowed only "
                 "on a loopback address (or with --allow-open-non-loopback)\n");
    return kExitFailure;
  }
  if (o.host == "localhost") o.host = "127.0.0.1";
  fit_connections_to_file_limit(o.max_connections);

  const bool clustered = o.role != "single";
  if (clustered) o.rt.cluster_secret = read_cluster_secret(o.cluster_secret_file);
  if (o.role == "router" && o.rt.nodes.empty()) throw std::runtime_error("--role router needs --nodes host:port,...");
  if (o.role != "router" && !o.rt.nodes.empty()) throw std::runtime_error("--nodes is for --role router");
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  if (clustered) {
    cfg.load<caf::io::middleman>();
    add_message_types(cfg);
    add_cluster_message_types(cfg);
  }
  if (o.cluster_tls.enabled()) {
    if (!clustered) throw std::runtime_error("--cluster-tls-* are for --role node or router");
    enable_cluster_tls(cfg, o.cluster_tls);
    o.rt.cluster_tls = true;
  }
  caf::actor_system sys{cfg};
  net::server_options so;
  so.host = o.host;
  so.port = o.port;
  so.io_threads = o.io_threads;
  so.stream_interval = o.stream_interval;
  so.max_connections = o.max_connections;
  so.request_timeout = std::chrono::seconds(o.timeout_s);
  so.write_timeout = std::chrono::seconds(o.timeout_s);
  so.max_pending_output_bytes = o.max_pending_output_bytes;
  so.max_body_bytes = o.max_body_bytes > 0 ? o.max_body_bytes : o.rt.mmproj.empty() ? size_t{1} << 20 : size_t{32} << 20;
  so.send_buffer_bytes = o.send_buffer_bytes;
  so.max_connections_per_address = o.max_connections_per_address;
  so.ws_idle_timeout = std::chrono::seconds(o.ws_idle_timeout_s);
  so.ws_auth_timeout = std::chrono::seconds(o.ws_auth_timeout_s);
  so.allowed_origins = o.allowed_origins;
  so.metrics_api_key = o.metrics_api_key;
  so.ssl_keyfile = o.ssl_keyfile;
  so.ssl_certfile = o.ssl_certfile;
  so.ssl_ca_certs = o.ssl_ca_certs;
  so.ssl_cert_reqs = o.ssl_cert_reqs;
  so.ssl_handshake_timeout = std::chrono::seconds(o.ssl_handshake_timeout_s);
  const char* scheme = so.tls() ? "https" : "http";
  so.parse_reasoning = o.reasoning_parser != "none";
  so.tool_call_parser = o.tool_call_parser == "auto" ? "" : o.tool_call_parser;
  so.prompt_special_tokens = !o.plain_text_prompts;
  so.responses_store.max_responses = o.responses_store_max_responses;
  so.responses_store.max_bytes = o.responses_store_max_bytes;
  so.responses_store.ttl = std::chrono::seconds(o.responses_store_ttl_s);
  so.chat_page_path = find_chat_page(o.chat_page);
  spdlog::info("chat page at /: {}", so.chat_page_path.empty() ? std::string("none") : so.chat_page_path);
  so.served_model_name = o.served_model_name.empty()
                             ? (o.model == "default" ? std::string("SmolLM2-135M-Instruct")
                                                     : std::filesystem::path(o.model).stem().string())
                             : o.served_model_name;
  if (!o.models.empty()) {
    if (clustered) throw std::runtime_error("several models (--model NAME=PATH, models:) are for --role single");
    if (!o.model_sha256.empty()) throw std::runtime_error("--model-sha256 is for a server of one model");
    so.served_model_name = default_model(o.models).name;
    o.model = default_model(o.models).path;
  }
  net::http_server server(sys, so);
  std::optional<model_supervisor_actor> supervisor;
  if (!o.models.empty()) {
    // Each model's `sha256` (the config's models: list) before the server takes a request.
    for (const auto& m : o.models) verify_model_sha256(m.path, m.sha256, stdout, "models: '" + m.name + "': sha256");
    supervisor = spawn_model_supervisor(sys, supervisor_settings(o, device));
    server.set_model_catalog(make_model_catalog(sys, *supervisor, o.admin_api_key));
  }
  server.start();  // /health says 503 while the model loads
  std::printf("tandem: listening on %s://%s:%u (loading %s)\n", scheme, o.host.c_str(), server.port(), o.model.c_str());
  std::fflush(stdout);

  if (supervisor) return serve_models(o, sys, server, *supervisor);
  verify_model_sha256(o.model, o.model_sha256, stdout);  // before any of the file is used
  auto rt = runtime::start(sys, o.rt, device ? &*device : nullptr);
  // With --cluster-tls-*, the node port is Tandem's own TLS front (net/http/node_tls_front.h) and
  // the gate listens on loopback behind it.
  std::optional<net::node_tls_front> tls_front;
  if (o.role == "node") {
    const bool tls = o.rt.cluster_tls;
    const auto gate = sys.middleman().publish(rt->node_gate(), tls ? 0 : o.node_port,
                                              tls ? "127.0.0.1" : o.node_host.c_str(), !tls);
    if (!gate) throw std::runtime_error("--node-port " + std::to_string(o.node_port) + ": " + sys.render(gate.error()));
    if (tls) {
      tls_front.emplace(net::node_tls_options{.host = o.node_host,
                                              .port = o.node_port,
                                              .certfile = o.cluster_tls.certfile,
                                              .keyfile = o.cluster_tls.keyfile,
                                              .cafile = o.cluster_tls.cafile,
                                              .backend_port = *gate,
                                              .handshake_timeout = so.ssl_handshake_timeout});
    }
    std::printf("tandem: cluster node: routers join at %s:%u%s\n", o.node_host.c_str(),
                tls ? tls_front->port() : *gate, tls ? " (TLS, mutual certificates)" : "");
    // Not ready (/health 503) until a router has warmed this node, or --warmup-timeout-s.
    if (o.rt.warmup_timeout_s > 0) {
      std::printf("tandem: cluster node: warming up (ready after a router's warm-up, at most %.0f s)\n",
                  o.rt.warmup_timeout_s);
      std::fflush(stdout);
      caf::scoped_actor waiter{sys};
      bool warmed = false;
      waiter
          ->request(caf::actor_cast<warm_gate_actor>(rt->node_gate()), caf::infinite, ready_atom::value,
                    static_cast<uint32_t>(std::ceil(o.rt.warmup_timeout_s)))
          .receive([&](bool w) { warmed = w; }, [](const caf::error&) {});
      std::printf("tandem: cluster node: %s\n", warmed ? "warm" : "no router's warm-up in time; ready anyway");
    }
  } else if (o.role == "router") {
    std::printf("tandem: cluster router over %zu node(s), routing %s\n", o.rt.nodes.size(),
                o.rt.routing_policy.c_str());
  }
  server.attach(*rt);
  std::printf(
      "tandem: ready: model %s, %s\n", so.served_model_name.c_str(),
      o.rt.tenants.empty() ? "open mode (no API keys)" : (std::to_string(o.rt.tenants.size()) + " tenant(s)").c_str());
  std::printf(
      "tandem: try: curl %s://%s:%u/v1/chat/completions -H 'Content-Type: application/json'%s -d "
      "'{\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"max_tokens\":64}'\n",
      scheme, o.host.c_str(), server.port(), o.rt.tenants.empty() ? "" : " -H 'Authorization: Bearer KEY'");
  std::fflush(stdout);
  server.wait_for_signal();
  // A graceful end: no new connections or requests; those running may finish within
  // --shutdown-timeout, then are cancelled; their clients get the final events.
  std::printf("tandem: shutting down (up to %u s for running requests)\n", o.shutdown_timeout_s);
  std::fflush(stdout);
  server.stop_accepting();
  rt->stop(std::chrono::seconds(o.shutdown_timeout_s));
  server.wait_for_answers(std::chrono::seconds(5));
  server.stop();
  std::fflush(stdout);
  // Sink actors of cancelled requests may still post to the stopped io context: leave at
  // once instead of tearing the actor system down under them.
  _exit(0);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<serve_options>();
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API and WebSocket");
  auto* model_opt = cmd->add_option("--model", o->model,
                                    "GGUF file, or 'default'; NAME=PATH (repeated) serves several models, each "
                                    "picked by the request's model field")
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                        ->capture_default_str();
  cmd->add_option("--models-memory-budget", o->models_memory_budget,
                  "Several models: bytes of models (file, tiled copies kept beside rows, KV cache) loaded at once; "
                  "idle ones are unloaded, least recently used first, to make room (0 = three quarters of the "
                  "machine's memory)")
      ->capture_default_str();
  cmd->add_option("--models-keep-alive", o->models_keep_alive,
                  "Several models: a model idle this long is unloaded (seconds, or 30s / 5m / 2h; -1 = never); a "
                  "model's keep_alive in the config overrides it")
      ->capture_default_str();
  cmd->add_option("--models-load-timeout", o->models_load_timeout_s,
                  "Several models: seconds a request waits for its model to load, then 503 with Retry-After (0 = "
                  "answer 503 at once while it loads)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--admin-api-key", o->admin_api_key,
                  "The key POST /models/load and /models/unload require (several models); unset: those are off");
  add_model_sha256_option(cmd, o->model_sha256);
  cmd->add_option("--served-model-name", o->served_model_name, "The model name /v1/models reports");
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0 = a free one)")->capture_default_str();
  cmd->add_option("--config", o->config,
                  "Server config YAML: any flag here as a key (the flags given win), and tenants (API keys, limits)");
  cmd->add_option("--api-key", o->api_key, "One API key for a single tenant 'default'");
  cmd->add_flag("--allow-open-non-loopback", o->allow_open_non_loopback,
                "Serve without API keys on a non-loopback address");
  cmd->add_option("--max-num-seqs", o->rt.max_num_seqs, "Running sequences at most")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->rt.max_num_batched_tokens, "Tokens per step at most")
      ->capture_default_str();
  cmd->add_option("--target-itl-ms", o->rt.target_itl_ms,
                  "Inter-token latency target while streams decode: prompt work per step is sized by measured cost "
                  "to fit it (0 = off: only --max-num-batched-tokens bounds a step)")
      ->check(CLI::Range(0.0, 60000.0))
      ->capture_default_str();
  cmd->add_option("--target-ttft-ms", o->rt.target_ttft_ms,
                  "While a prompt waits this long for its first token, prompt work grows from a quarter of "
                  "--target-itl-ms to all of it beside the decoding rows (0 = it stays a quarter)")
      ->check(CLI::Range(0.0, 3600000.0))
      ->capture_default_str();
  cmd->add_option("--max-model-len", o->rt.max_model_len, "Context length (0 = the model's)")->capture_default_str();
  cmd->add_option(
      "--kv-cache-tokens", o->rt.kv_cache_tokens,
      "KV cache size in tokens (0 = automatic: with --device cuda, all that --gpu-memory-utilization leaves)");
  cmd->add_option("--block-size", o->rt.block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--kv-cache-dtype", o->rt.kv_cache_dtype,
                  "KV cache element type: auto (= f16), f16, q8_0 (1.88x the tokens per byte; CPU only), or fp8 "
                  "(E4M3, 2x the tokens per byte; --device cuda only)")
      ->check(CLI::IsMember({"auto", "f16", "q8_0", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  cmd->add_option("--max-in-flight", o->rt.max_in_flight, "Accepted unfinished requests at most (then 503)")
      ->capture_default_str();
  cmd->add_flag("!--no-enable-prefix-caching", o->rt.enable_prefix_caching, "Turn the prefix cache off");
  cmd->add_option("--kv-cache-dir", o->rt.kv_cache_dir,
                  "A disk tier under the prefix cache: full KV blocks are also written here and read back when "
                  "memory lacks them, also after a restart (CPU device only; a directory of Tandem's own)");
  cmd->add_option("--kv-cache-disk-bytes", o->rt.kv_cache_disk_bytes,
                  "The disk tier's block files together at most (least recently used out first)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50))
      ->capture_default_str();
  cmd->add_flag("--disable-hybrid-kv-cache-manager", o->rt.disable_hybrid_kv_cache_manager,
                "Sliding-window models: hold every layer's KV for every position in one pool (no freeing)");
  cmd->add_flag("--embeddings", o->rt.embeddings,
                "Serve /v1/embeddings (or /v1/rerank for --pooling rank) instead of text generation");
  cmd->add_option("--pooling", o->pooling,
                  "Embeddings' pooling: mean, cls, last, rank (implies --embeddings); auto: the file's "
                  "<arch>.pooling_type (with --embeddings and none declared: last)")
      ->check(CLI::IsMember({"auto", "none", "mean", "cls", "last", "rank"}))
      ->capture_default_str();
  cmd->add_option("--chat-template", o->rt.chat_template, "Chat template family overriding the model's");
  cmd->add_option("--threads", o->rt.threads, "CPU compute threads (0 = one per core)")->capture_default_str();
  add_tiled_cache_options(cmd, o->rt);
  add_device_options(cmd, o->device);
  add_speculative_options(cmd, o->rt);
  add_lora_options(cmd, o->rt);
  add_vision_options(cmd, o->rt);
  cmd->add_option("--io-threads", o->io_threads, "Network threads")->capture_default_str();
  cmd->add_option("--stream-interval", o->stream_interval,
                  "Tokens per streamed event (SSE chunk, WebSocket frame): the first token at once, then every N; "
                  "more costs the server less per token and makes the stream burstier")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  cmd->add_option("--max-connections", o->max_connections, "Open connections at most")->capture_default_str();
  cmd->add_option("--max-body-bytes", o->max_body_bytes,
                  "Request body size at most (0 = 1 MiB, or 32 MiB with --mmproj: images come inline)")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s,
                  "Seconds to receive a whole request (an idle keep-alive connection included) and for one "
                  "write to drain to a slow reader; then the connection is closed")
      ->check(CLI::Range(1u, 86400u))
      ->capture_default_str();
  cmd->add_option("--max-pending-output-bytes", o->max_pending_output_bytes,
                  "Output a WebSocket may have waiting to be sent before the server stops reading its frames")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--send-buffer-bytes", o->send_buffer_bytes,
                  "Socket send buffer per connection (0 = the kernel's, autotuned)")
      ->capture_default_str();
  cmd->add_option("--max-connections-per-address", o->max_connections_per_address,
                  "Open connections from one client address at most (0 = a quarter of --max-connections, at least 8)")
      ->capture_default_str();
  cmd->add_option("--ws-idle-timeout", o->ws_idle_timeout_s,
                  "Seconds a WebSocket with no generation running and no frame stays open")
      ->check(CLI::Range(1u, 86400u))
      ->capture_default_str();
  cmd->add_option("--ws-auth-timeout", o->ws_auth_timeout_s,
                  "With tenants: seconds a WebSocket opened without a key has to send its auth frame")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout_s,
                  "Seconds running requests may take to finish after SIGTERM/SIGINT; then they are cancelled")
      ->check(CLI::Range(0u, 86400u))
      ->capture_default_str();
  cmd->add_option("--allowed-origins", o->allowed_origins,
                  "Web origins that may use the server from a browser (e.g. https://chat.example.com; '*' = any); "
                  "same-origin pages and non-browser clients always may")
      ->delimiter(',');
  cmd->add_option("--ssl-keyfile", o->ssl_keyfile,
                  "TLS: the server's private key (PEM); with --ssl-certfile, HTTPS and WSS");
  cmd->add_option("--ssl-certfile", o->ssl_certfile,
                  "TLS: the server's certificate chain (PEM, the server's certificate first)");
  cmd->add_option("--ssl-ca-certs", o->ssl_ca_certs,
                  "TLS: CA certificates (PEM) that client certificates must chain to (with --ssl-cert-reqs 1 or 2)");
  cmd->add_option("--ssl-cert-reqs", o->ssl_cert_reqs,
                  "TLS client certificates: 0 not asked for, 1 asked for and verified when given, 2 required")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  cmd->add_option("--ssl-handshake-timeout", o->ssl_handshake_timeout_s,
                  "TLS: seconds a new connection (HTTP, or a cluster node's port) has to finish its handshake; then it "
                  "is closed")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  cmd->add_option("--metrics-api-key", o->metrics_api_key,
                  "A key GET /metrics requires (it shows tenant names and usage); unset: /metrics is open");
  cmd->add_option("--chat-page", o->chat_page,
                  "HTML page served at / (default: examples/chat/index.html, or the installed share/tandem/chat/)");
  cmd->add_option("--reasoning-parser", o->reasoning_parser,
                  "Thinking sections (<think>...</think>, gpt-oss's analysis channel) of chat replies go to "
                  "reasoning_content: 'auto' (when the template writes them) or 'none'")
      ->check(CLI::IsMember({"auto", "none"}))
      ->capture_default_str();
  cmd->add_option("--tool-call-parser", o->tool_call_parser,
                  "Syntax of the model's tool calls: auto (from the chat template), hermes, llama3, mistral, generic, "
                  "harmony (gpt-oss)")
      ->check(CLI::IsMember({"auto", "hermes", "llama3", "mistral", "generic", "harmony"}))
      ->capture_default_str();
  cmd->add_flag("--plain-text-prompts", o->plain_text_prompts,
                "Read /v1/completions prompts as plain text: control-token text in them stays text (for deployments "
                "that splice user text into raw prompts)");
  cmd->add_option("--responses-store-max-responses", o->responses_store_max_responses,
                  "Responses (POST /v1/responses with store: true) kept per tenant for previous_response_id and "
                  "GET /v1/responses/{id}; the oldest go first (0 = keep none)")
      ->capture_default_str();
  cmd->add_option("--responses-store-max-bytes", o->responses_store_max_bytes,
                  "Bytes of stored responses (their whole conversations) kept per tenant; the oldest go first")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--responses-store-ttl", o->responses_store_ttl_s, "Seconds a stored response is kept")
      ->check(CLI::Range(1u, 30u * 86400u))
      ->capture_default_str();
  cmd->add_option("--role", o->role,
                  "single: the whole server in this process; node: the engine of a cluster, joined by a router; "
                  "router: the HTTP front of a cluster, running every request on its --nodes (docs/cluster.md)")
      ->check(CLI::IsMember({"single", "node", "router"}))
      ->capture_default_str();
  cmd->add_option("--nodes", o->rt.nodes, "Router: the nodes' gates, host:port,...")->delimiter(',');
  cmd->add_option("--node-host", o->node_host, "Node: the address its gate listens on")->capture_default_str();
  cmd->add_option("--node-port", o->node_port, "Node: the port its gate listens on")->capture_default_str();
  cmd->add_option("--cluster-secret-file", o->cluster_secret_file,
                  "Node and router: a file whose first line is the cluster's shared secret (else "
                  "$TANDEM_CLUSTER_SECRET)");
  cmd->add_option("--routing-policy", o->rt.routing_policy, "Router: kv-aware, least-loaded or round-robin")
      ->check(CLI::IsMember({"kv-aware", "least-loaded", "round-robin"}))
      ->capture_default_str();
  o->rt.batch_dir = (tandem_home() / "batches").string();
  cmd->add_option("--batch-dir", o->rt.batch_dir,
                  "The Batch API's uploads, queue and results (kept across restarts; a directory of Tandem's own)")
      ->capture_default_str();
  cmd->add_option("--batch-max-file-bytes", o->rt.batch_max_file_bytes, "A Batch API upload's bytes at most")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--batch-max-lines", o->rt.batch_max_lines, "Requests in one batch input file at most")
      ->check(CLI::Range(1u, 10000000u))
      ->capture_default_str();
  cmd->add_option("--batch-max-tenant-bytes", o->rt.batch_max_tenant_bytes,
                  "A tenant's Batch API files (uploads and outputs) together at most; at the bound uploads and new "
                  "batches are refused until files are deleted")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 50))
      ->capture_default_str();
  cmd->add_option("--batch-max-in-flight", o->rt.batch_max_in_flight,
                  "Batch requests running at once, all batches together (they run at the lowest priority)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn, error")->capture_default_str();
  cmd->add_option("--warmup-prefixes", o->rt.warmup_prefixes,
                  "Router: the hottest prompt prefixes a joining node prefills before it takes traffic (0: none)")
      ->check(CLI::Range(0u, 256u))
      ->capture_default_str();
  cmd->add_option("--warmup-max-tokens", o->rt.warmup_max_tokens, "Router: those prefixes' tokens in all, at most")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  cmd->add_option("--warmup-timeout-s", o->rt.warmup_timeout_s,
                  "Router: a joining node takes traffic after this even if not warm; node: /health turns ready "
                  "after a router's warm-up, or after this")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--warmup-window-s", o->rt.warmup_window_s,
                  "Router: a prefix's heat is its cache hits in the last window and the one before")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--cluster-tls-certfile", o->cluster_tls.certfile,
                  "Node and router: this process's certificate (PEM) for the node link over TLS (with the two below)");
  cmd->add_option("--cluster-tls-keyfile", o->cluster_tls.keyfile, "Node and router: its private key (PEM)");
  cmd->add_option("--cluster-tls-ca", o->cluster_tls.cafile,
                  "Node and router: the CA a peer's certificate must chain to (PEM); peers without one are refused");
  const auto config = std::make_shared<server_config>(cmd);  // adds --print-config: after every other option
  cmd->callback([o, config, model_opt] {
    if (!o->config.empty()) o->rt.tenants = config->apply(o->config);
    o->models = config->models();
    // --model NAME=PATH, repeated: several models (over the config's list, as flags win).
    std::vector<model_spec> named;
    size_t plain = 0;
    for (const std::string& arg : model_opt->results()) {
      if (auto spec = parse_model_arg(arg)) {
        named.push_back(std::move(*spec));
      } else {
        ++plain;
      }
    }
    if (!named.empty()) {
      if (plain > 0) throw std::runtime_error("--model: give every model a NAME=PATH when serving several");
      check_models(named);
      o->models = std::move(named);
    }
    if (config->print_requested()) {
      std::fputs(config->effective_yaml(o->rt.tenants).c_str(), stdout);
      return;
    }
    const int rc = serve(*o);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace tandem::cli
