#include "tandem/runtime.h"
#include "actors/atoms.h"
#include "actors/runtime_access.h"

#include <algorithm>
#include <cmath>

#include "actors/runtime_actors.h"
#include "actors/runtime_shared.h"
#include "actors/spawn.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/identity.h"
#include "engine/lora/adapter_choice.h"
#include "engine/kv_disk/disk_store.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/pooling/rank_head.h"
#include "engine/tenants/tenant_limits.h"

namespace tandem {

void tune_actor_system(caf::actor_system_config& cfg, size_t scheduler_threads) {
  // Work sharing: one queue, workers sleep on a condition variable when it is empty.
  // Stealing polls and sleeps in fixed intervals, which costs milliseconds per hop here.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  // The runtime's scheduled actors do little per message (the model runs on detached
  // actors), so more workers only add wake-ups between them: with 4 workers the actors used
  // about twice the CPU per streamed token they use with 1 (bench/serve_bench.py, 64 clients).
  if (scheduler_threads > 0) cfg.set("scheduler.max-threads", scheduler_threads);
}

runtime::runtime() : actors_(std::make_unique<runtime_actors>()) {}

namespace {

// The tokenizer, chat templates and context limit every streamer reads (runtime_shared.h).
std::shared_ptr<runtime_shared> load_shared(caf::actor_system& sys, const gguf::file& file, const model_config& mc,
                                            const runtime_config& cfg) {
  auto shared = std::make_shared<runtime_shared>(runtime_shared{.tok = tokenizer::from_gguf(file)});
  try {
    shared->chat = chat_template::from_gguf(file, cfg.chat_template);
    // As transformers does: requests with tools use the file's tool_use variant when it has one.
    const auto& variants = shared->chat->variant_names();
    if (cfg.chat_template.empty() && std::find(variants.begin(), variants.end(), "tool_use") != variants.end()) {
      shared->tool_chat = chat_template::from_gguf(file, "tool_use");
    }
  } catch (const std::exception& e) {
    if (!cfg.chat_template.empty()) throw;  // an explicit override must work
    shared->chat_error = e.what();
  }
  shared->max_model_len = cfg.max_model_len > 0 ? std::min(cfg.max_model_len, mc.n_ctx_train) : mc.n_ctx_train;
  // The tokenizer is shared with the compiler until its vocabulary is built (aliasing shared_ptr).
  shared->grammar_compiler = spawn_grammar_compiler(sys, std::shared_ptr<const tokenizer>(shared, &shared->tok));
  return shared;
}

// What the server is for (runtime_config::embeddings, pooling): a generation server keeps
// pooling none. A reranker needs its classification head; embeddings run on the CPU worker.
void set_embedding_kind(runtime_shared& shared, const gguf::file& file, const model_config& mc,
                        const runtime_config& cfg, bool custom_device) {
  std::optional<pooling_type> p;
  if (!cfg.pooling.empty()) {
    p = parse_pooling(cfg.pooling);
    if (!p) throw std::runtime_error("--pooling: unknown type '" + cfg.pooling + "' (none, mean, cls, last, rank)");
    if (*p == pooling_type::none) {
      if (cfg.embeddings) throw std::runtime_error("--embeddings needs a pooling type other than none");
      return;
    }
  } else if (const auto declared = file_pooling(file); declared && *declared != pooling_type::none) {
    p = declared;
  } else if (cfg.embeddings) {
    p = pooling_type::last;  // a decoder model's own pooling, as vLLM picks it
  }
  if (!p && mc.arch->embeddings_only) {
    throw std::runtime_error("'" + mc.architecture + "' has no output head: serve it with --embeddings (or --pooling)");
  }
  if (!p) return;
  if (custom_device) throw std::runtime_error("embeddings and rerank run on the CPU device only (--device cpu)");
  if (*p == pooling_type::rank && !rank_head::from_gguf(file, mc.n_embd)) {
    throw std::runtime_error("rank pooling needs a classification head (cls.weight or cls.output.weight) in the file");
  }
  shared.pooling = *p;
  shared.n_embd = mc.n_embd;
  shared.rerank_template = file.get_string("tokenizer.chat_template.rerank").value_or("");
}

// The LoRA adapters (--lora), read and checked against the model, which applies them; their
// names, scales and identities go to the streamers and admission. Every tenant's default
// adapter must be one of them.
void load_adapters(tandem::model& m, runtime_shared& shared, const runtime_config& cfg, bool custom_device) {
  if (!cfg.lora_adapters.empty() && custom_device) {
    throw std::runtime_error("--lora: adapters run on the CPU device only (--device cpu)");
  }
  if (cfg.lora_adapters.size() > 256) throw std::runtime_error("--lora: at most 256 adapters");
  std::vector<std::shared_ptr<const lora::adapter>> loaded;
  for (const auto& a : cfg.lora_adapters) {
    if (!lora::valid_adapter_name(a.name)) {
      throw std::runtime_error("--lora: adapter name '" + a.name + "' must be 1 to 64 of A-Z a-z 0-9 . _ -");
    }
    for (const auto& o : shared.adapters) {
      if (o.name == a.name) throw std::runtime_error("--lora: two adapters are named '" + a.name + "'");
    }
    if (!std::isfinite(a.scale)) throw std::runtime_error("--lora " + a.name + ": the scale must be a finite number");
    loaded.push_back(m.load_adapter(a.path));
    shared.adapters.push_back({a.name, a.scale});
    shared.adapter_identities.push_back(loaded.back()->identity());
  }
  for (const auto& t : cfg.tenants) {
    if (t.lora.empty()) continue;
    bool found = false;
    for (const auto& o : shared.adapters) found = found || o.name == t.lora;
    if (!found) {
      throw std::runtime_error("tenant '" + t.name + "': lora '" + t.lora + "' is not an adapter given with --lora (" +
                               lora::adapter_list(shared.adapters) + ")");
    }
  }
  m.set_adapters(std::move(loaded));
}

// The vision projector (--mmproj): checked against the model (its output width is the
// model's embedding width, the vocabulary has its family's marker tokens), and its encoder
// actor with its own pool at a lower priority (image_encoder.h).
void load_vision(caf::actor_system& sys, runtime_shared& shared, const model_config& mc, const runtime_config& cfg,
                 bool custom_device) {
  if (cfg.mmproj.empty()) return;
  if (custom_device) throw std::runtime_error("--mmproj: images run on the CPU device only (--device cpu)");
  if (!mc.causal) throw std::runtime_error("--mmproj: an embeddings model takes no images");
  if (cfg.limit_mm_per_prompt == 0) throw std::runtime_error("--limit-mm-per-prompt must be at least 1");
  std::shared_ptr<const vision::projector> p = vision::projector::load(cfg.mmproj);
  if (p->hparams().n_embd_text != mc.n_embd) {
    throw std::runtime_error("--mmproj: the projector's output width (" + std::to_string(p->hparams().n_embd_text) +
                             ") is not the model's embedding width (" + std::to_string(mc.n_embd) +
                             "): is it this model's projector?");
  }
  if (vision::qwen_family(p->hparams().family) != mc.arch->mrope) {
    throw std::runtime_error(std::string("--mmproj: a ") + vision::family_name(p->hparams().family) +
                             " projector does not fit a '" + mc.architecture +
                             "' model (Qwen2-VL's and Qwen2.5-VL's images need their multimodal RoPE: qwen2vl, "
                             "and only they do)");
  }
  vision::image_layout layout(*p, shared.tok);
  const vision::image_limits limits{cfg.image_max_bytes, cfg.image_max_side, cfg.image_max_pixels};
  const int compute = cfg.threads > 0 ? cfg.threads : thread_pool::default_thread_count();
  const int threads = cfg.mmproj_threads > 0 ? static_cast<int>(cfg.mmproj_threads) : std::max(1, compute / 2);
  auto encoder = spawn_image_encoder(sys, p, limits, threads);
  shared.vision.emplace(runtime_shared::vision_parts{std::move(encoder), std::move(p), std::move(layout),
                                                     cfg.limit_mm_per_prompt});
}

// Admission's settings: its own tenant ledger, or the one the server's models share (whose
// tenants must be this config's, in its order: admission names a tenant by its index).
admission_config admission_settings(const runtime_config& cfg, const tenant_accounts* accounts) {
  admission_config ac;
  ac.max_in_flight = cfg.max_in_flight;
  ac.tenants = cfg.tenants;
  if (accounts) {
    bool same = accounts->tenants.size() == cfg.tenants.size();
    for (size_t i = 0; same && i < cfg.tenants.size(); ++i) same = accounts->tenants[i] == cfg.tenants[i].name;
    if (!same) throw std::logic_error("runtime::start: the shared tenant accounts are not this config's tenants");
    ac.ledger = accounts->ledger;
  }
  return ac;
}

}  // namespace

// A cluster's router: the file's vocabulary and template (its weights stay unread), admission
// and the streamers here, every sequence on a node (actors/cluster/router.h).
std::unique_ptr<runtime> runtime::start_router(caf::actor_system& sys, const runtime_config& cfg,
                                               const tenant_accounts* accounts) {
  if (cfg.cluster_secret.empty()) throw std::invalid_argument("a router needs the cluster secret its nodes have");
  if (!cfg.lora_adapters.empty()) throw std::runtime_error("--lora: a cluster's router holds no weights (not yet)");
  if (!cfg.mmproj.empty()) throw std::runtime_error("--mmproj: a cluster's router takes no images (not yet)");
  std::unique_ptr<runtime> rt(new runtime());
  auto& actors = *rt->actors_;
  rt->cfg_ = cfg;
  const auto file = gguf::file::open(resolve_model_path(cfg.model));
  rt->model_cfg_ = std::make_shared<model_config>(read_model_config(file));
  auto shared = load_shared(sys, file, *rt->model_cfg_, cfg);
  rt->shared_ = shared;
  router_config rc;
  rc.nodes = cfg.nodes;
  rc.secret = cfg.cluster_secret;
  rc.policy = cfg.routing_policy;
  rc.model_identity = gguf::model_identity(file);
  rc.warmup_prefixes = cfg.warmup_prefixes;
  rc.warmup_max_tokens = cfg.warmup_max_tokens;
  rc.warmup_timeout_s = cfg.warmup_timeout_s;
  rc.warmup_window_s = cfg.warmup_window_s;
  rc.tls = cfg.cluster_tls;
  actors.router = spawn_router(sys, rc);
  actors.scheduler = caf::actor_cast<scheduler_actor>(actors.router);
  actors.admission = spawn_admission(sys, admission_settings(cfg, accounts), shared, actors.scheduler);
  return rt;
}

std::unique_ptr<runtime> runtime::start(caf::actor_system& sys, const runtime_config& cfg,
                                        const device_factory* device, const tenant_accounts* accounts) {
  check_unique(cfg.tenants);
  if (!cfg.nodes.empty()) return start_router(sys, cfg, accounts);
  // A custom device worker (CUDA) chose its own cache type (gpu/worker/cuda_runtime_config);
  // the CPU worker's is parsed here.
  const kv_cache_dtype kv_dtype = device != nullptr ? kv_cache_dtype::f16 : parse_kv_cache_dtype(cfg.kv_cache_dtype);
  std::unique_ptr<runtime> rt(new runtime());
  auto& actors = *rt->actors_;
  rt->cfg_ = cfg;
  const auto path = resolve_model_path(cfg.model);
  model_options mo;
  mo.n_threads = cfg.threads;
  mo.tiled_cache_dir = cfg.tiled_cache_dir_in_use();
  // A custom device worker (CUDA) uploads the weights in their GGUF layout and never runs
  // this model's forward: no tiled copy for it. Drafters below run on the CPU and keep theirs.
  model_options target_mo = mo;
  target_mo.tiled_weights = device == nullptr;
  std::shared_ptr<tandem::model> m = tandem::model::open(path, target_mo);
  const auto& mc = m->config();
  rt->model_cfg_ = std::make_shared<model_config>(mc);
  rt->weight_bytes_beyond_file_ = m->tiled_bytes_kept_twice();
  (void)kv_pool::row_bytes_for(mc, kv_dtype);  // q8_0 on a head size it cannot split: a clear error now

  auto shared = load_shared(sys, m->file(), mc, cfg);
  set_embedding_kind(*shared, m->file(), mc, cfg, device != nullptr);
  load_adapters(*m, *shared, cfg, device != nullptr);
  load_vision(sys, *shared, mc, cfg, device != nullptr);
  if (shared->vision) actors.image_encoder = shared->vision->encoder;
  shared->scores_prompts = device == nullptr;
  rt->shared_ = shared;

  const uint64_t default_tokens = std::min<uint64_t>(uint64_t{16} * shared->max_model_len, 65536);
  const uint64_t kv_tokens = cfg.kv_cache_tokens > 0 ? cfg.kv_cache_tokens : default_tokens;
  rt->kv_blocks_ = static_cast<uint32_t>(std::max<uint64_t>(1, kv_tokens / cfg.block_size));

  planner_config pc;
  pc.max_num_seqs = cfg.max_num_seqs;
  pc.max_num_batched_tokens = cfg.max_num_batched_tokens;
  pc.prefill_chunk = std::min(cfg.prefill_chunk, cfg.max_num_batched_tokens);
  pc.target_step_ms = cfg.target_itl_ms;
  pc.target_ttft_ms = cfg.target_ttft_ms;
  pc.background_priority = kBatchPriority / 2;  // a batch's, shifted by its tenant's priority or not
  if (cfg.cost_aware_chunks) {
    pc.attention_cost_per_key = attention_cost_per_key(mc);
  }
  if (!cfg.cluster_secret.empty()) pc.cache_salt_key = cluster_salt_key(cfg.cluster_secret);
  pc.model_identity = gguf::model_identity(m->file());
  // Encoders: an input whole in one step (step_planner), so at most a step's tokens.
  pc.whole_prompts = !mc.causal;
  if (!mc.causal) shared->whole_prompt_limit = std::min(shared->max_model_len, pc.max_num_batched_tokens);
  pc.scored_chunk = scored_chunk_tokens(static_cast<uint32_t>(mc.n_vocab));

  // Sliding-window layers in their own pool (kv_block_manager.h): sized by what the running
  // sequences' windows need (kv_window::pool_blocks), and never above the global pool's
  // size, since a sequence holds no more local blocks than global ones.
  kv_local_pool local;
  if (mc.has_swa() && device == nullptr && !cfg.disable_hybrid_kv_cache_manager) {
    local.window.window = mc.n_swa;
    const uint64_t need = local.window.pool_blocks(pc.max_num_seqs, pc.max_num_batched_tokens, cfg.block_size);
    local.n_blocks = static_cast<uint32_t>(std::min<uint64_t>(rt->kv_blocks_, need));
  }

  // The disk tier: its layout names what a block of this model and cache holds; the salt key
  // lives in its directory so a restarted server names its blocks alike (a cluster's nodes
  // keep the key their secret gives).
  kv_disk_actor disk;
  uint64_t block_bytes = 0;
  if (!cfg.kv_cache_dir.empty()) {
    if (device != nullptr) throw std::runtime_error("--kv-cache-dir: the disk tier runs with the CPU device only");
    if (!cfg.enable_prefix_caching) throw std::runtime_error("--kv-cache-dir needs the prefix cache (it is off)");
    if (local.enabled()) {
      throw std::runtime_error(
          "--kv-cache-dir: a sliding-window model's own local pool is not spilled to disk; add "
          "--disable-hybrid-kv-cache-manager to keep every layer in one pool");
    }
    if (cfg.kv_cache_disk_bytes == 0) throw std::runtime_error("--kv-cache-disk-bytes must be positive");
    block_bytes = uint64_t{2} * mc.n_layer * mc.n_head_kv * kv_pool::row_bytes_for(mc, kv_dtype) * cfg.block_size;
    kv_disk_config dc;
    dc.dir = cfg.kv_cache_dir;
    dc.layout = {pc.model_identity, static_cast<uint32_t>(kv_dtype), mc.n_layer, mc.n_head_kv, mc.head_dim,
                 cfg.block_size, block_bytes};
    dc.max_bytes = cfg.kv_cache_disk_bytes;
    if (cfg.cluster_secret.empty()) pc.cache_salt_key = kv_disk::load_or_create_salt_key(cfg.kv_cache_dir);
    disk = spawn_kv_disk(sys, dc);
    actors.kv_disk = disk;
    pc.disk_tier = true;
  }

  // The scheduler supervises the device worker with this (a new one, over the same weights,
  // with a new KV pool); runtime_actors::device_worker names the first.
  std::function<device_worker_actor()> spawn_device =
      [sys = &sys, m, n_blocks = rt->kv_blocks_, block_size = cfg.block_size, kv_dtype, n_local = local.n_blocks,
       disk, factory = device ? std::optional<device_factory>(*device) : std::nullopt]() {
        return factory ? factory->spawn(*sys, m, n_blocks, block_size)
                       : spawn_cpu_device_worker(*sys, m, n_blocks, block_size, kv_dtype, n_local, disk);
      };
  actors.device_worker = spawn_device();
  cache_manager_config cc;
  cc.n_blocks = rt->kv_blocks_;
  cc.block_size = cfg.block_size;
  cc.enable_prefix_caching = cfg.enable_prefix_caching;
  cc.local = local;
  cc.disk = disk;
  cc.block_bytes = block_bytes;
  actors.cache_manager = spawn_cache_manager(sys, cc);
  speculation_setup spec;
  if (cfg.speculative != "none" && !cfg.speculative.empty()) {
    speculation_config sc;
    sc.k = cfg.num_speculative_tokens;
    sc.k_min = cfg.speculative_k_min;
    sc.k_max = cfg.speculative_k_max;
    sc.adaptive = cfg.speculative_adaptive;
    sc.logits_share = mc.head_macs() / (mc.head_macs() + mc.n_layer * mc.block_matrix_macs());
    if (mc.has_experts()) {  // a verification step reads more experts than a decode step
      sc.n_expert = mc.n_expert;
      sc.n_expert_used = mc.n_expert_used;
      sc.expert_share = mc.expert_macs() * mc.n_expert_used / mc.block_matrix_macs();
    }
    const auto draft_kv_tokens = static_cast<uint32_t>(std::min<uint64_t>(kv_tokens, 32768));
    if (cfg.speculative == "ngram") {
      spec.drafter = spawn_ngram_drafter(sys);
      spec.drafts_first = true;
    } else if (cfg.speculative == "layer-skip") {
      // Its own instance over the same file (the mapping shares the pages): a model runs
      // one forward at a time, and the drafter runs beside the device worker.
      auto self_draft = tandem::model::open(path, mo);
      const uint32_t layers = cfg.speculative_layers > 0 ? cfg.speculative_layers : std::max(1u, mc.n_layer / 4);
      spec.drafter = spawn_model_drafter(sys, std::move(self_draft), layers, draft_kv_tokens, cfg.block_size);
    } else if (cfg.speculative == "draft") {
      if (cfg.draft_model.empty()) throw std::runtime_error("--speculative draft needs --draft-model PATH");
      auto draft = tandem::model::open(resolve_model_path(cfg.draft_model), mo);
      if (draft->config().n_vocab != mc.n_vocab) {
        throw std::runtime_error("the draft model's vocabulary (" + std::to_string(draft->config().n_vocab) +
                                 " tokens) differs from the target's (" + std::to_string(mc.n_vocab) + ")");
      }
      spec.drafter = spawn_model_drafter(sys, std::move(draft), 0, draft_kv_tokens, cfg.block_size);
    } else {
      throw std::runtime_error("--speculative: unknown method '" + cfg.speculative +
                               "' (none, ngram, layer-skip, draft)");
    }
    spec.policy = sc;
    actors.drafter = spec.drafter;
  }
  actors.scheduler = spawn_scheduler(sys, pc, cfg.block_size, rt->kv_blocks_ * cfg.block_size, actors.cache_manager,
                                     actors.device_worker, spec, spawn_device);
  actors.admission = spawn_admission(sys, admission_settings(cfg, accounts), shared, actors.scheduler);
  if (!cfg.cluster_secret.empty()) {
    node_config nc;
    nc.secret = cfg.cluster_secret;
    nc.block_size = cfg.block_size;
    nc.capacity = cfg.max_in_flight;
    nc.kv_blocks = rt->kv_blocks_;
    nc.scheduler = actors.scheduler;
    nc.cache_manager = actors.cache_manager;
    nc.grammar_compiler = shared->grammar_compiler;
    actors.node_gate = spawn_node_gate(sys, std::move(nc));
  }
  return rt;
}

caf::actor runtime::node_gate() const { return caf::actor_cast<caf::actor>(actors_->node_gate); }

runtime::~runtime() {
  // start() may throw before the shared parts exist (a model that does not load).
  const auto& x = *actors_;
  for (const caf::actor& a : {caf::actor_cast<caf::actor>(x.admission), caf::actor_cast<caf::actor>(x.scheduler),
                              caf::actor_cast<caf::actor>(x.cache_manager),
                              caf::actor_cast<caf::actor>(x.device_worker), caf::actor_cast<caf::actor>(x.drafter),
                              caf::actor_cast<caf::actor>(x.router), caf::actor_cast<caf::actor>(x.node_gate),
                              caf::actor_cast<caf::actor>(x.kv_disk),
                              shared_ ? caf::actor_cast<caf::actor>(shared_->grammar_compiler) : caf::actor{},
                              shared_ && shared_->vision ? caf::actor_cast<caf::actor>(shared_->vision->encoder)
                                                         : caf::actor{}}) {
    if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
}

admission_actor runtime::admission() const { return actors_->admission; }

void runtime::stop(std::chrono::milliseconds grace) {
  caf::scoped_actor self{actors_->admission->home_system()};
  self->send(actors_->admission, drain_atom::value);
  const auto in_flight = [&] {
    uint32_t n = 0;
    self->request(actors_->admission, std::chrono::seconds(5), stats_atom::value)
        .receive([&](const admission_stats& s) { n = s.in_flight; }, [](const caf::error&) {});
    return n;
  };
  const auto wait_until = [&](std::chrono::steady_clock::time_point deadline) {
    while (in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
      self->receive(caf::after(std::chrono::milliseconds(20)) >> [] {});
    }
  };
  wait_until(std::chrono::steady_clock::now() + grace);
  self->send(actors_->admission, cancel_all_atom::value);
  wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(5));
}
const tokenizer& runtime_access::tok(const runtime& rt) { return rt.shared_->tok; }
std::vector<std::string> runtime_access::adapter_names(const runtime& rt) {
  std::vector<std::string> names;
  for (const auto& a : rt.shared_->adapters) names.push_back(a.name);
  return names;
}
const model_config& runtime_access::model_cfg(const runtime& rt) { return *rt.model_cfg_; }
const chat_template* runtime_access::chat(const runtime& rt) { return rt.shared_->chat ? &*rt.shared_->chat : nullptr; }
const std::string& runtime_access::chat_error(const runtime& rt) { return rt.shared_->chat_error; }
const chat_template* runtime_access::tool_chat(const runtime& rt) {
  return rt.shared_->tool_chat ? &*rt.shared_->tool_chat : nullptr;
}
uint32_t runtime::max_model_len() const { return shared_->max_model_len; }

}  // namespace tandem
