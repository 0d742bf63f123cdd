// Tandem's runtime inside a host's CAF actor_system:
//
//   caf::actor_system sys{cfg};
//   auto rt = tandem::runtime::start(sys, {.model = "default"});   // loads the model
//   self->request(rt->admission(), caf::infinite, tandem::submit_atom::value, request)...
//
// The runtime spawns admission, scheduler, cache manager and one CPU device worker; every
// request gets its own streamer. Destroying the runtime stops all of them.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tandem/api.h"
#include "tandem/tenants.h"

namespace tandem {

// Internal types, declared only: their headers (engine/, actors/) are not installed.
struct model_config;
struct runtime_shared;
struct runtime_actors;  // the internal actors' handles (actors/runtime_actors.h)
struct device_factory;  // a device worker other than the CPU one (actors/runtime_actors.h)
struct tenant_accounts;  // tenant accounts shared by several runtimes (actors/runtime_actors.h)

struct runtime_config {
  std::string model = "default";  // GGUF path, or "default"
  int threads = 0;                // compute threads; 0 = one per core
  // Where the CPU's re-laid (tiled) weights are kept between starts, one file per model
  // (engine/model/tiled_cache.h); "" or tiled_cache false = re-lay them in memory at every
  // start. The CLI's default is $TANDEM_HOME/tiled (--tiled-cache-dir, --no-tiled-cache).
  std::string tiled_cache_dir;
  bool tiled_cache = true;
  std::string tiled_cache_dir_in_use() const { return tiled_cache ? tiled_cache_dir : std::string(); }
  uint32_t max_num_seqs = 64;              // running sequences at most
  uint32_t max_num_batched_tokens = 2048;  // tokens per step at most
  // Steps sized in time (--target-itl-ms; step_planner.h): while sequences decode, a step's
  // prompt tokens are what the measured cost model says fits in this many ms beside the
  // decoding rows, so streams keep a readable pace; max_num_batched_tokens stays the cap.
  // 0 = off (a step takes max_num_batched_tokens whatever they cost).
  double target_itl_ms = 150;
  // Optionally, prompts get more of a step the longer one has waited for its first token: the
  // whole target beside decode once a prompt has waited this long (--target-ttft-ms). Off by
  // default (0: a fixed floor of a quarter of the target): under overload it trades streams'
  // pace for the queue's wait (docs/benchmarks.md, issue 53's reading).
  double target_ttft_ms = 0;
  uint32_t prefill_chunk = 512;            // prompt tokens per sequence per step at most
  bool cost_aware_chunks = true;           // later chunks of a long prompt get fewer tokens, so
                                           // each costs about what the first did (step_planner.h)
  uint32_t block_size = 16;                // tokens per KV block
  uint64_t kv_cache_tokens = 0;            // KV pool size; 0 = 16 full contexts, at most 64 Ki tokens
  std::string kv_cache_dtype = "auto";     // "auto" (= f16), "f16" or "q8_0" (--kv-cache-dtype): q8_0
                                           // holds 1.88x the tokens per byte; CPU device only
  bool enable_prefix_caching = true;
  // The prefix cache's disk tier (--kv-cache-dir, --kv-cache-disk-bytes; docs/architecture.md):
  // every full block entering the prefix cache is also written to a file in this directory
  // (at most kv_cache_disk_bytes of them, least recently used out first), and a prompt's
  // blocks missing from memory are read back from there, also after a restart. "" = none.
  // CPU device only; the directory also keeps the prefix-cache salt key (salt.key).
  std::string kv_cache_dir;
  uint64_t kv_cache_disk_bytes = uint64_t{8} << 30;
  // Sliding-window models (gemma3) keep their local layers' KV in a pool of its own and free
  // what the window has passed (vLLM's hybrid KV cache manager); true: one pool for every
  // layer, every position held (--disable-hybrid-kv-cache-manager, as vLLM's flag).
  bool disable_hybrid_kv_cache_manager = false;
  uint32_t max_in_flight = 1024;       // accepted, unfinished requests; beyond: 503
  uint32_t max_model_len = 0;          // 0 = the model's trained context
  std::string chat_template;           // a family name overriding the model's template
  std::vector<tenant_config> tenants;  // API keys and limits; empty = open mode (no keys)
  // LoRA adapters over the model (--lora NAME=PATH[:SCALE]; engine/lora/adapter.h): GGUF files
  // as llama.cpp's convert_lora_to_gguf writes them. A request picks one by "model":
  // "<model>:NAME" or llama-server's "lora" field (ids in this order); CPU device only.
  struct lora_adapter {
    std::string name;
    std::string path;
    float scale = 1.0f;  // the scale a request naming the adapter gets (times alpha / rank)
  };
  std::vector<lora_adapter> lora_adapters;
  // Images in chat (--mmproj PATH: a vision projector GGUF as llama.cpp's libmtmd reads it,
  // `clip.*` keys; engine/vision, docs/vision.md). CPU device only. Each image is bounded
  // before it is decoded (--image-max-bytes, --image-max-side, --image-max-pixels) and a
  // request carries at most limit_mm_per_prompt of them (vLLM's --limit-mm-per-prompt).
  std::string mmproj;
  // The image encoder's threads (--mmproj-threads), which run at idle priority beside the
  // device worker's: 0 = half of `threads` (at least 1), which keeps the other streams'
  // pace while an image encodes (docs/vision.md).
  uint32_t mmproj_threads = 0;
  uint32_t limit_mm_per_prompt = 4;
  uint64_t image_max_bytes = uint64_t{20} << 20;
  uint32_t image_max_side = 8192;
  uint64_t image_max_pixels = uint64_t{4096} * 4096;
  // Speculative decoding (--speculative, --num-speculative-tokens): "none", "ngram" (prompt
  // lookup), "layer-skip" (the target's first speculative_layers blocks draft) or "draft"
  // (a separate model, draft_model, sharing the target's vocabulary).
  std::string speculative = "none";
  std::string draft_model;
  uint32_t speculative_layers = 0;      // layer-skip: 0 = a quarter of the target's blocks
  uint32_t num_speculative_tokens = 4;  // starting K; adapts within [min, max]
  uint32_t speculative_k_min = 1;
  uint32_t speculative_k_max = 10;
  bool speculative_adaptive = true;  // false: draft at every step regardless of cost
  // Cluster mode (docs/cluster.md). With nodes ("host:port" of engine nodes' gates) this
  // runtime is a router: it loads the file's vocabulary and chat template but no weights,
  // keeps admission and the streamers, and runs every sequence on a node. Without nodes but
  // with a secret it is a node: node_gate() is what routers join. The actor system must
  // load caf::io::middleman and register tandem::add_message_types(cfg) and
  // tandem::add_cluster_message_types(cfg) (include/tandem/remote.h).
  std::vector<std::string> nodes;
  std::string cluster_secret;               // shared by a cluster's router and nodes
  std::string routing_policy = "kv-aware";  // router: kv-aware, least-loaded or round-robin
  // What the server is for: embeddings (or rerank) instead of generation when `embeddings`
  // is set, `pooling` is given, or the file declares a pooling type (<arch>.pooling_type).
  // pooling: "" = the file's (else last, vLLM's choice for decoder models), or none, mean,
  // cls, last, rank (--pooling).
  bool embeddings = false;
  std::string pooling;
  // The Batch API (POST /v1/files, /v1/batches; actors/batch_queue.h, docs/serving.md): its
  // uploads, queue and results live in batch_dir ("" = $TANDEM_HOME/batches), written so a
  // crash loses at most the requests in flight. Bounds: an upload's bytes and requests, a
  // tenant's uploads together, and the batch requests running at once (all batches together,
  // at kBatchPriority).
  std::string batch_dir;
  uint64_t batch_max_file_bytes = uint64_t{100} << 20;
  uint32_t batch_max_lines = 50000;
  uint64_t batch_max_tenant_bytes = uint64_t{1} << 30;
  uint32_t batch_max_in_flight = 8;
  // Cluster warm-up (docs/cluster.md, "Warm-up"). Router: a node that joins first prefills the
  // hottest prompt prefixes (hits in the last warmup_window_s and the window before), at most
  // warmup_prefixes of them and warmup_max_tokens tokens in all (0 prefixes: no warm-up), and
  // takes sequences once they are done or warmup_timeout_s passed. Node (`tandem serve`): its
  // readiness waits for a router's warm-up, at most warmup_timeout_s.
  uint32_t warmup_prefixes = 8;
  uint32_t warmup_max_tokens = 4096;
  double warmup_timeout_s = 60;
  double warmup_window_s = 300;
  // The router-node link over TLS with mutual certificates (docs/cluster.md): the router
  // connects through CAF's OpenSSL module, which the host must have loaded
  // (caf::openssl::manager) with the certificate, key and CA in the actor system's config.
  bool cluster_tls = false;
};

// Scheduler settings the runtime wants from the host's actor system, set on its config
// before the system is created: CAF's default work-stealing workers, once idle, poll for new
// messages only every 10 ms, which would add that much to every hop of a step (scheduler ->
// cache manager -> scheduler -> device worker -> scheduler -> streamer). The sharing policy
// wakes a worker the moment a message arrives and never spins beside the compute threads.
// scheduler_threads caps CAF's workers (0 = CAF's default, max(4, cores)): the runtime's
// scheduled actors are light, and every extra worker adds wake-ups (CPU per token).
void tune_actor_system(caf::actor_system_config& cfg, size_t scheduler_threads = 1);

class runtime {
 public:
  // Loads the model and spawns the actors. Throws std::runtime_error with a clear message.
  // `device` replaces the CPU device worker (in-tree only: the tandem binary passes one for
  // --device cuda, so this library stays free of CUDA); a host passes nothing. `accounts`:
  // the tenant ledger of a server of several models (in-tree: models/supervisor.h), so a
  // tenant's limits count across them; none: this runtime keeps its own.
  static std::unique_ptr<runtime> start(caf::actor_system& sys, const runtime_config& cfg,
                                        const device_factory* device = nullptr,
                                        const tenant_accounts* accounts = nullptr);
  // Shuts down gracefully: new requests are refused from now on (503); those in flight may
  // finish within `grace`, then the rest are cancelled (their sinks get the final event).
  // Returns when none is left, or after `grace` and 5 s more. The destructor then stops
  // the actors.
  void stop(std::chrono::milliseconds grace);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Where requests go (include/tandem/api.h).
  admission_actor admission() const;
  uint32_t max_model_len() const;
  const runtime_config& config() const { return cfg_; }
  uint32_t kv_blocks() const { return kv_blocks_; }

  // A cluster node's gate, to publish with the middleman (null unless this runtime is a node).
  caf::actor node_gate() const;
  bool is_router() const { return !cfg_.nodes.empty(); }

 private:
  // The in-tree parts (the HTTP front, the CLI, tests, benchmarks) read the tokenizer, the
  // chat template, the model's config and the actors through actors/runtime_access.h, which
  // is not installed: nothing here returns a type a host cannot include.
  friend class runtime_access;
  runtime();
  static std::unique_ptr<runtime> start_router(caf::actor_system& sys, const runtime_config& cfg,
                                               const tenant_accounts* accounts);
  runtime_config cfg_;
  std::shared_ptr<const runtime_shared> shared_;
  std::shared_ptr<const model_config> model_cfg_;
  uint32_t kv_blocks_ = 0;
  uint64_t weight_bytes_beyond_file_ = 0;  // runtime_access::weight_bytes_beyond_file
  std::unique_ptr<runtime_actors> actors_;
};

}  // namespace tandem
