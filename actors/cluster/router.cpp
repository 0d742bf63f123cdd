#include "actors/cluster/router.h"

#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>  // its middleman handle only (inline): no link to libcaf_openssl
#include <chrono>
#include <deque>
#include <limits>
#include <span>
#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "actors/atoms.h"
#include "actors/clock.h"
#include "engine/cluster/hot_prefixes.h"
#include "engine/cluster/prefix_index.h"
#include "engine/cluster/routing_policy.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/cache_salt.h"

namespace tandem {
namespace {

constexpr auto kReconnectPeriod = std::chrono::seconds(1);
constexpr auto kJoinTimeout = std::chrono::seconds(5);
constexpr size_t kMaxSessions = 65536;

constexpr size_t kMaxHotPrefixes = 256;  // the hot-prefix table's bound (x warmup_max_tokens tokens)

struct node_slot {
  std::string host;
  uint16_t port = 0;
  node_actor handle;  // null while down
  bool connecting = false;
  uint32_t warm_pending = 0;  // its warm-up sequences not finished yet
  clock_type::time_point warm_start;
  node_figures fig;
};

// A sequence on a node. The request is kept until its first token: until then it can move.
struct placement {
  uint32_t node = 0;
  uint64_t group = 0;  // generate_request::prompt_group (0: none)
  streamer_actor streamer;
  bool started = false;
  sequence_request req;
};

struct router_state {
  std::string secret;
  bool tls = false;  // connect through CAF's OpenSSL module (router_config::tls)
  cluster::routing_policy policy = cluster::routing_policy::kv_aware;
  uint64_t salt_key = 0;
  uint64_t model_identity = 0;
  std::vector<node_slot> nodes;
  cluster::prefix_index index;
  std::unordered_map<seq_id, placement> seqs;
  // The choices of one request (n > 1) go where the first went: that node computes the
  // prompt once and forks its blocks for the others. group -> (node, live choices).
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> groups;
  // Sessions (generate_request::session, per tenant) -> the node they stay on while it is up;
  // the oldest are forgotten past kMaxSessions.
  std::unordered_map<std::string, uint32_t> sessions;
  std::deque<std::string> session_order;
  uint32_t cursor = 0;
  uint32_t block_size = 16;  // the nodes' (from their updates)
  cluster_stats counters;
  // Warm-up (router_config): prefixes by heat, and the warm-up sequences in flight -> node.
  router_config warmup;
  cluster::hot_prefixes hot{kMaxHotPrefixes, 0, 300};
  std::unordered_map<seq_id, uint32_t> warming;
  uint64_t next_warm_id = 0;
  clock_type::time_point started = clock_type::now();
  static inline const char* name = "tandem.router";
};

using self_ptr = router_actor::stateful_pointer<router_state>;

void end_with_error(self_ptr self, const streamer_actor& to, seq_id seq, std::string error, uint16_t status) {
  token_batch b;
  b.seq = seq;
  b.finished = true;
  b.reason = finish_reason::error;
  b.error = std::move(error);
  b.status = status;
  self->send(to, tokens_atom::value, std::move(b));
}

double seconds_since_start(const router_state& st) { return ms_since(st.started) / 1000.0; }

// The prompt's longest run of blocks some node holds is a hit for that prefix (cut to the
// warm-up's token bound: its key is then the cut prefix's last block).
void note_hit(router_state& st, const sequence_request& sr, const std::vector<uint64_t>& hashes,
              const std::vector<uint32_t>& held) {
  if (st.warmup.warmup_prefixes == 0 || held.empty()) return;
  const uint32_t most = *std::max_element(held.begin(), held.end());
  const uint32_t blocks = std::min<uint32_t>(most, st.warmup.warmup_max_tokens / st.block_size);
  if (blocks == 0 || blocks > hashes.size()) return;
  const std::span<const token_id> prefix(sr.prompt.data(), size_t{blocks} * st.block_size);
  st.hot.hit(hashes[blocks - 1], {sr.tenant, sr.cache_group, sr.adapter, sr.input_hash}, prefix,
             seconds_since_start(st));
}

// Picks a node for the sequence and sends it there; none can take it: a 503.
void place(self_ptr self, sequence_request sr) {
  auto& st = self->state;
  const auto t0 = clock_type::now();
  const auto n = static_cast<uint32_t>(st.nodes.size());
  std::vector<cluster::node_load> loads(n);
  std::vector<uint32_t> cached(n, 0);
  const bool kv_aware = st.policy == cluster::routing_policy::kv_aware;
  if (kv_aware || st.warmup.warmup_prefixes > 0) {
    const uint64_t salt = cache_salt({sr.cache_group, st.model_identity, sr.adapter, sr.input_hash}, st.salt_key);
    const auto hashes = block_pool::chain_hashes(sr.prompt, st.block_size, salt);
    auto held = st.index.cached_blocks(hashes, n);
    note_hit(st, sr, hashes, held);
    if (kv_aware) cached = std::move(held);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const auto& slot = st.nodes[i];
    loads[i].up = slot.handle && !slot.fig.warming;  // a warming node takes nothing yet
    loads[i].outstanding = slot.fig.outstanding;
    loads[i].capacity = slot.fig.last.capacity > 0 ? slot.fig.last.capacity : std::numeric_limits<uint32_t>::max();
    loads[i].cached_blocks = cached[i];
  }
  int pick = cluster::choose_node(st.policy, loads, static_cast<uint32_t>(sr.prompt.size()), st.block_size, st.cursor);
  bool by_session = false;
  const std::string session_key = sr.session.empty() ? std::string() : sr.tenant + '\n' + sr.session;
  if (!session_key.empty()) {
    const auto s = st.sessions.find(session_key);
    if (s != st.sessions.end() && cluster::can_take(loads[s->second])) {
      by_session = static_cast<int>(s->second) != pick;
      pick = static_cast<int>(s->second);
    } else if (pick >= 0) {
      if (s == st.sessions.end()) {
        st.session_order.push_back(session_key);
        if (st.session_order.size() > kMaxSessions) {
          st.sessions.erase(st.session_order.front());
          st.session_order.pop_front();
        }
      }
      st.sessions[session_key] = static_cast<uint32_t>(pick);  // (re)homed: its node was down or full
    }
  }
  const auto group = sr.prompt_group != 0 ? st.groups.find(sr.prompt_group) : st.groups.end();
  if (group != st.groups.end() && st.nodes[group->second.first].handle) pick = static_cast<int>(group->second.first);
  st.counters.decisions++;
  st.counters.decision_us_total += ms_since(t0) * 1000.0;
  if (pick < 0) {
    st.counters.unroutable++;
    return end_with_error(self, sr.streamer, sr.id, "no engine node can take the request now (all are full or down)",
                          503);
  }
  auto& slot = st.nodes[static_cast<uint32_t>(pick)];
  slot.fig.routed++;
  if (by_session) {
    slot.fig.session_routed++;
  } else if (cached[static_cast<uint32_t>(pick)] > 0) {
    slot.fig.prefix_routed++;
  }
  slot.fig.outstanding++;
  const seq_id id = sr.id;
  auto& p = st.seqs[id];
  p.node = static_cast<uint32_t>(pick);
  p.group = sr.prompt_group;
  if (p.group != 0) {
    auto& g = st.groups[p.group];
    g.first = p.node;
    g.second++;
  }
  p.streamer = sr.streamer;
  p.started = false;
  sr.streamer = caf::actor_cast<streamer_actor>(self);
  p.req = sr;
  self->send(slot.handle, enqueue_atom::value, std::move(sr));
}

void leave_group(router_state& st, const placement& p) {
  if (p.group == 0) return;
  const auto g = st.groups.find(p.group);
  if (g != st.groups.end() && --g->second.second == 0) st.groups.erase(g);
}

void finish(router_state& st, std::unordered_map<seq_id, placement>::iterator it) {
  auto& fig = st.nodes[it->second.node].fig;
  if (fig.outstanding > 0) fig.outstanding--;
  leave_group(st, it->second);
  st.seqs.erase(it);
}

// The node is gone: what it had not started moves elsewhere, the rest ends with an error.
void node_down(self_ptr self, uint32_t node) {
  auto& st = self->state;
  auto& slot = st.nodes[node];
  slot.handle = nullptr;
  slot.fig.up = false;
  slot.fig.outstanding = 0;
  slot.fig.warming = false;
  slot.warm_pending = 0;
  std::erase_if(st.warming, [node](const auto& w) { return w.second == node; });
  st.index.forget(node);
  std::vector<sequence_request> retry;
  for (auto it = st.seqs.begin(); it != st.seqs.end();) {
    if (it->second.node != node) {
      ++it;
      continue;
    }
    if (!it->second.started) {
      auto req = std::move(it->second.req);
      req.streamer = it->second.streamer;
      retry.push_back(std::move(req));
      slot.fig.retried++;
    } else {
      end_with_error(self, it->second.streamer, it->first, "the engine node running this request was lost", 500);
      slot.fig.lost++;
    }
    leave_group(st, it->second);
    it = st.seqs.erase(it);
  }
  for (auto& req : retry) place(self, std::move(req));
}

// The node may take sequences now: it is told (its readiness probe turns ready).
void end_warmup(self_ptr self, uint32_t node, bool timed_out) {
  auto& st = self->state;
  auto& slot = st.nodes[node];
  if (slot.fig.warming) {
    slot.fig.warming = false;
    slot.fig.warmup_seconds = ms_since(slot.warm_start) / 1000.0;
    if (timed_out) {
      slot.fig.warmup_timeouts++;
      for (auto it = st.warming.begin(); it != st.warming.end();) {  // nobody waits for them now
        if (it->second != node) {
          ++it;
          continue;
        }
        if (slot.handle) self->send(slot.handle, abort_atom::value, it->first);
        it = st.warming.erase(it);
      }
    }
    slot.warm_pending = 0;
  }
  if (slot.handle) self->send(caf::actor_cast<warm_node_actor>(slot.handle), warm_atom::value);
}

// A node joined: it prefills the hottest prefixes first, as one-token sequences whose tokens
// come back here; until they are done (or the timeout) it takes no sequence.
void begin_warmup(self_ptr self, uint32_t node) {
  auto& st = self->state;
  auto& slot = st.nodes[node];
  auto picks = st.warmup.warmup_prefixes == 0
                   ? std::vector<cluster::hot_prefix>{}
                   : st.hot.hottest(st.warmup.warmup_prefixes, st.warmup.warmup_max_tokens, seconds_since_start(st));
  if (picks.empty()) return end_warmup(self, node, false);
  slot.fig.warming = true;
  slot.fig.warmups++;
  slot.warm_start = clock_type::now();
  slot.warm_pending = static_cast<uint32_t>(picks.size());
  for (auto& p : picks) {
    sequence_request sr;
    sr.id = kWarmupSeqBit | ++st.next_warm_id;
    sr.tenant = std::move(p.origin.tenant);
    sr.cache_group = std::move(p.origin.cache_group);
    sr.adapter = std::move(p.origin.adapter);
    sr.input_hash = p.origin.input_hash;
    sr.prompt = std::move(p.tokens);
    sr.max_new_tokens = 1;
    sr.speculative = false;
    sr.streamer = caf::actor_cast<streamer_actor>(self);
    slot.fig.warmup_tokens += sr.prompt.size();
    st.warming[sr.id] = node;
    self->send(slot.handle, enqueue_atom::value, std::move(sr));
  }
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(st.warmup.warmup_timeout_s));
  self->delayed_send(self, timeout, warm_atom::value, node, slot.fig.joins);
}

// A warm-up sequence's tokens: its end counts down its node's warm-up.
void warmup_tokens(self_ptr self, const token_batch& b) {
  auto& st = self->state;
  if (!b.finished) return;
  const auto it = st.warming.find(b.seq);
  if (it == st.warming.end()) return;  // its node went down, or the warm-up timed out
  const uint32_t node = it->second;
  st.warming.erase(it);
  auto& slot = st.nodes[node];
  if (slot.warm_pending > 0 && --slot.warm_pending == 0) end_warmup(self, node, false);
}

void connect(self_ptr self, uint32_t node) {
  auto& slot = self->state.nodes[node];
  if (slot.handle || slot.connecting) return;
  slot.connecting = true;
  auto mm = self->state.tls ? self->system().openssl_manager().actor_handle() : self->system().middleman().actor_handle();
  self->request(mm, kJoinTimeout, caf::connect_atom::value, slot.host, slot.port)
      .then(
          [self, node](const caf::node_id&, caf::strong_actor_ptr& gate_ptr, const std::set<std::string>&) {
            auto gate = caf::actor_cast<node_gate_actor>(gate_ptr);
            if (!gate) {
              self->state.nodes[node].connecting = false;
              return;
            }
            self->request(gate, kJoinTimeout, join_atom::value, self->state.secret, caf::actor_cast<caf::actor>(self))
                .then(
                    [self, node](const caf::actor& handle) {
                      auto& joined = self->state.nodes[node];  // looked up again: the handler runs later
                      joined.connecting = false;
                      joined.handle = caf::actor_cast<node_actor>(handle);
                      joined.fig.up = true;
                      joined.fig.joins++;
                      self->monitor(handle);
                      begin_warmup(self, node);
                    },
                    [self, node](const caf::error& err) {
                      self->state.nodes[node].connecting = false;
                      CAF_LOG_WARNING("join refused" << CAF_ARG(err));
                      (void)err;
                    });
          },
          [self, node](const caf::error&) { self->state.nodes[node].connecting = false; });
}

int node_of(const router_state& st, const caf::actor_addr& addr) {
  for (uint32_t i = 0; i < st.nodes.size(); ++i) {
    if (st.nodes[i].handle && st.nodes[i].handle.address() == addr) return static_cast<int>(i);
  }
  return -1;
}

router_actor::behavior_type router(self_ptr self, router_config cfg, std::vector<node_slot> slots) {
  auto& init = self->state;
  init.nodes = std::move(slots);
  init.secret = cfg.secret;
  init.tls = cfg.tls;
  init.policy = cluster::parse_routing_policy(cfg.policy);
  init.salt_key = cluster_salt_key(cfg.secret);
  init.model_identity = cfg.model_identity;
  init.counters.policy = cluster::to_string(init.policy);
  init.warmup = cfg;
  init.hot = cluster::hot_prefixes(kMaxHotPrefixes, cfg.warmup_max_tokens, cfg.warmup_window_s);
  // A node that does not know a message (warm, to an older or a simulated node) answers with an
  // error message. CAF's default would end the router on it; the router ignores it instead.
  self->set_error_handler([](caf::error&) {});
  self->set_down_handler([self](const caf::down_msg& dm) {
    const int node = node_of(self->state, dm.source);
    if (node >= 0) node_down(self, static_cast<uint32_t>(node));
  });
  self->send(self, tick_atom::value);
  return {
      [self](enqueue_atom, sequence_request& sr) { place(self, std::move(sr)); },
      [self](abort_atom, seq_id seq) {
        auto& st = self->state;
        const auto it = st.seqs.find(seq);
        if (it == st.seqs.end()) return;
        if (auto& h = st.nodes[it->second.node].handle) self->send(h, abort_atom::value, seq);
        finish(st, it);
      },
      [self](force_atom, seq_id seq, std::vector<token_id>& tokens) {
        auto& st = self->state;
        const auto it = st.seqs.find(seq);
        if (it == st.seqs.end()) return;
        if (auto& h = st.nodes[it->second.node].handle) self->send(h, force_atom::value, seq, std::move(tokens));
      },
      [self](tokens_atom, token_batch& b) {
        if (b.seq & kWarmupSeqBit) return warmup_tokens(self, b);
        auto& st = self->state;
        const auto it = st.seqs.find(b.seq);
        if (it == st.seqs.end()) return;  // aborted, or moved off a node that came back
        auto& p = it->second;
        if (!p.started) {
          p.started = true;
          p.req = {};  // it cannot move any more
        }
        const bool last = b.finished;
        self->send(p.streamer, tokens_atom::value, std::move(b));
        if (last) finish(st, it);
      },
      [self](update_atom, node_update& u) {
        auto& st = self->state;
        const int node = node_of(
            st, self->current_sender() ? caf::actor_cast<caf::actor_addr>(self->current_sender()) : caf::actor_addr{});
        if (node < 0) return;
        auto& fig = st.nodes[static_cast<uint32_t>(node)].fig;
        if (u.block_size > 0) st.block_size = u.block_size;
        st.index.apply(static_cast<uint32_t>(node), u.kv.snapshot, u.kv.entered, u.kv.left);
        u.kv = {};
        fig.last = std::move(u);
        fig.index_blocks = st.index.blocks(static_cast<uint32_t>(node));
      },
      [self](tick_atom) {
        for (uint32_t i = 0; i < self->state.nodes.size(); ++i) connect(self, i);
        self->delayed_send(self, kReconnectPeriod, tick_atom::value);
      },
      [self](stats_atom) -> scheduler_stats {
        // The cluster as one scheduler: the sums of the nodes' latest reports.
        scheduler_stats sum;
        for (const auto& slot : self->state.nodes) {
          if (!slot.handle) continue;
          const auto& s = slot.fig.last.sched;
          sum.running += s.running;
          sum.waiting += s.waiting;
          sum.steps += s.steps;
          sum.prompt_tokens += s.prompt_tokens;
          sum.generated_tokens += s.generated_tokens;
          sum.preemptions += s.preemptions;
          sum.aborted += s.aborted;
          sum.device_restarts += s.device_restarts;
          sum.device_ms += s.device_ms;
          sum.plan_ms += s.plan_ms;
        }
        return sum;
      },
      [](spec_stats_atom) -> speculation_stats { return {}; },  // the nodes speculate, each alone
      [self](warm_atom, uint32_t node, uint64_t joins) {
        // The warm-up of this join is still going after warmup_timeout_s: route to it anyway.
        if (node < self->state.nodes.size() && self->state.nodes[node].fig.joins == joins &&
            self->state.nodes[node].fig.warming) {
          end_warmup(self, node, true);
        }
      },
      [self](nodes_atom) -> cluster_stats {
        auto out = self->state.counters;
        for (const auto& slot : self->state.nodes) out.nodes.push_back(slot.fig);
        return out;
      },
  };
}

}  // namespace

router_actor spawn_router(caf::actor_system& sys, const router_config& cfg) {
  (void)cluster::parse_routing_policy(cfg.policy);  // a bad name fails here, not in the actor
  if (cfg.nodes.empty()) throw std::invalid_argument("--nodes: a router needs at least one node (host:port)");
  if (cfg.tls && !sys.has_openssl_manager()) {
    throw std::invalid_argument("a TLS router needs CAF's OpenSSL module loaded (caf::openssl::manager)");
  }
  if (cfg.warmup_prefixes > 0 && cfg.warmup_max_tokens == 0) {
    throw std::invalid_argument("--warmup-max-tokens must be positive when --warmup-prefixes is");
  }
  if (!(cfg.warmup_timeout_s >= 0 && cfg.warmup_timeout_s <= 3600)) {
    throw std::invalid_argument("--warmup-timeout-s: 0 to 3600 seconds");
  }
  if (cfg.nodes.size() > cluster::prefix_index::kMaxNodes) {
    throw std::invalid_argument("--nodes: at most 64 nodes per router");
  }
  std::vector<node_slot> slots;
  for (const auto& address : cfg.nodes) {
    const auto colon = address.rfind(':');
    node_slot slot;
    int port = 0;
    try {
      if (colon == std::string::npos || colon == 0) throw std::invalid_argument("");
      size_t used = 0;
      port = std::stoi(address.substr(colon + 1), &used);
      if (used != address.size() - colon - 1 || port <= 0 || port > 65535) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("--nodes: '" + address + "' is not host:port");
    }
    slot.host = address.substr(0, colon);
    slot.port = static_cast<uint16_t>(port);
    slot.fig.address = address;
    slots.push_back(std::move(slot));
  }
  return sys.spawn(router, cfg, std::move(slots));
}

}  // namespace tandem
