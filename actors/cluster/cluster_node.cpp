#include "actors/cluster/cluster_node.h"
#include "actors/atoms.h"
#include "actors/cluster/router.h"

#include <xxhash.h>
#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tenants/tenant_limits.h"

namespace tandem {
namespace {

constexpr auto kUpdatePeriod = std::chrono::milliseconds(50);

constexpr uint32_t kMaxReadyWait_s = 3600;
constexpr size_t kRememberedNodes = 64;  // the gate's newest node actors (whose warm it believes)

struct node_state {
  node_config cfg;
  warm_gate_actor gate;
  router_actor router;
  std::unordered_map<seq_id, streamer_actor> seqs;  // running here for the router: its stand-in streamer
  static inline const char* name = "tandem.cluster_node";
};

using node_ptr = warm_node_actor::stateful_pointer<node_state>;

// Prefix-index changes, then the scheduler's figures, then one update to the router.
void send_update(node_ptr self) {
  auto& cfg = self->state.cfg;
  self->request(cfg.cache_manager, std::chrono::seconds(5), kv_events_atom::value).then([self](index_events& ev) {
    auto u = std::make_shared<node_update>();
    u->kv = std::move(ev);
    self->request(self->state.cfg.cache_manager, std::chrono::seconds(5), stats_atom::value)
        .then([self, u](const kv_cache_stats& k) {
          u->kv_blocks_total = k.pool.total;
          u->kv_blocks_used = k.pool.used;
          u->prefix_queries = k.prefix_queries;
          u->prefix_hits = k.prefix_hits;
          self->request(self->state.cfg.scheduler, std::chrono::seconds(5), stats_atom::value)
              .then([self, u](const scheduler_stats& s) {
                auto& st = self->state;
                u->sched = s;
                u->block_size = st.cfg.block_size;
                u->capacity = st.cfg.capacity;
                self->send(st.router, update_atom::value, std::move(*u));
              });
        });
  });
}

// A constrained sequence arrives without its compiled grammar (that stays in the router's
// process): the node's own compiler builds it from the text before the scheduler sees it.
void compile_then_enqueue(node_ptr self, sequence_request sr) {
  auto pending = std::make_shared<sequence_request>(std::move(sr));
  self->request(self->state.cfg.grammar_compiler, caf::infinite, compile_atom::value, pending->grammar_kind,
                pending->grammar_text)
      .then([self, pending](grammar_reply& r) {
        auto& st = self->state;
        const auto it = st.seqs.find(pending->id);
        if (it == st.seqs.end()) return;  // aborted meanwhile
        if (!r.grammar) {
          token_batch b;
          b.seq = pending->id;
          b.finished = true;
          b.reason = finish_reason::error;
          b.error = "the node could not compile the request's grammar: " + r.error;
          self->send(it->second, tokens_atom::value, std::move(b));
          st.seqs.erase(it);
          return;
        }
        pending->grammar = std::move(r.grammar);
        self->send(st.cfg.scheduler, enqueue_atom::value, std::move(*pending));
      });
}

warm_node_actor::behavior_type cluster_node(node_ptr self, node_config cfg, warm_gate_actor gate, caf::actor router) {
  self->state.cfg = std::move(cfg);
  self->state.gate = std::move(gate);
  self->state.router = caf::actor_cast<router_actor>(router);
  // The router's connection is gone: nobody reads these sequences' tokens any more.
  self->monitor(router);
  self->set_down_handler([self](const caf::down_msg&) {
    for (const auto& [seq, streamer] : self->state.seqs) self->send(self->state.cfg.scheduler, abort_atom::value, seq);
    self->state.seqs.clear();
    self->quit();
  });
  self->send(self, tick_atom::value);
  return {
      [self](enqueue_atom, sequence_request& sr) {
        auto& st = self->state;
        st.seqs[sr.id] = sr.streamer;
        sr.streamer = caf::actor_cast<streamer_actor>(self);
        if (sr.constrained && !sr.grammar) return compile_then_enqueue(self, std::move(sr));
        self->send(st.cfg.scheduler, enqueue_atom::value, std::move(sr));
      },
      [self](abort_atom, seq_id seq) {
        self->state.seqs.erase(seq);
        self->send(self->state.cfg.scheduler, abort_atom::value, seq);
      },
      [self](force_atom, seq_id seq, std::vector<token_id>& tokens) {
        self->send(self->state.cfg.scheduler, force_atom::value, seq, std::move(tokens));
      },
      [self](tokens_atom, token_batch& b) {
        auto& st = self->state;
        const auto it = st.seqs.find(b.seq);
        if (it == st.seqs.end()) return;  // aborted by the router
        const bool last = b.finished;
        self->send(it->second, tokens_atom::value, std::move(b));
        if (last) st.seqs.erase(it);
      },
      [](cancel_atom) {},
      [self](warm_atom) { self->send(self->state.gate, warm_atom::value); },
      [self](tick_atom) {
        send_update(self);
        self->delayed_send(self, kUpdatePeriod, tick_atom::value);
      },
  };
}

// The gate: joins, and the node's readiness. warm stays true once a router warmed the node
// (a later join's warm-up gates that router's routing, not the probe).
struct gate_state {
  node_config cfg;
  bool warm = false;
  uint64_t next_waiter = 0;
  std::vector<std::pair<uint64_t, caf::typed_response_promise<bool>>> waiters;  // at most kMaxReadyWaiters
  std::deque<caf::actor_addr> nodes;  // its newest node actors: only they may say warm
  static inline const char* name = "tandem.cluster_gate";
};

warm_gate_actor::behavior_type node_gate(warm_gate_actor::stateful_pointer<gate_state> self, node_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
      [self](join_atom, const std::string& secret, const caf::actor& router) -> caf::result<caf::actor> {
        if (!constant_time_equal(secret, self->state.cfg.secret) || !router) {
          return caf::make_error(caf::sec::invalid_argument, "join refused: wrong cluster secret");
        }
        auto node = self->spawn(cluster_node, self->state.cfg, caf::actor_cast<warm_gate_actor>(self), router);
        auto& nodes = self->state.nodes;
        nodes.push_back(node.address());
        if (nodes.size() > kRememberedNodes) nodes.pop_front();
        return caf::actor_cast<caf::actor>(node);
      },
      [self](ready_atom, uint32_t timeout_s) -> caf::result<bool> {
        auto& st = self->state;
        if (st.warm) return true;
        if (st.waiters.size() >= kMaxReadyWaiters) return false;
        const uint64_t id = ++st.next_waiter;
        auto rp = self->make_response_promise<bool>();
        st.waiters.emplace_back(id, rp);
        self->delayed_send(self, std::chrono::seconds(std::min(timeout_s, kMaxReadyWait_s)), tick_atom::value, id);
        return rp;
      },
      [self](tick_atom, uint64_t id) {
        auto& w = self->state.waiters;
        const auto it = std::find_if(w.begin(), w.end(), [id](const auto& x) { return x.first == id; });
        if (it == w.end()) return;
        it->second.deliver(false);
        w.erase(it);
      },
      [self](warm_atom) {
        auto& st = self->state;
        const auto from = self->current_sender() ? caf::actor_cast<caf::actor_addr>(self->current_sender())
                                                 : caf::actor_addr{};
        if (std::find(st.nodes.begin(), st.nodes.end(), from) == st.nodes.end()) return;
        st.warm = true;
        for (auto& [id, rp] : st.waiters) rp.deliver(true);
        st.waiters.clear();
      },
  };
}

}  // namespace

node_gate_actor spawn_node_gate(caf::actor_system& sys, node_config cfg) {
  return caf::actor_cast<node_gate_actor>(sys.spawn(node_gate, std::move(cfg)));
}

uint64_t cluster_salt_key(const std::string& secret) {
  return XXH64(secret.data(), secret.size(), 0x636c7573746572ull) | 1;  // never 0: 0 means "draw one"
}

void add_cluster_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<sequence_request>("tandem::sequence_request");
  cfg.add_message_type<token_batch>("tandem::token_batch");
  cfg.add_message_type<node_update>("tandem::node_update");
  cfg.add_message_type<scheduler_stats>("tandem::scheduler_stats");
  cfg.add_message_type<std::vector<token_id>>("std::vector<int32_t>");
}

}  // namespace tandem
