#include "actors/tenant_ledger.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <unordered_map>

#include "engine/tenants/tenant_limits.h"

namespace tandem {
namespace {

using clock_type = std::chrono::steady_clock;

struct tenant_account {
  tenant_config cfg;
  token_bucket requests;
  token_bucket tokens;
  uint32_t in_flight = 0;  // with the slots held for choices still to come
};

// A request of several choices, judged at the first; its verdict waits for the others.
struct group_verdict {
  submit_reply reply;
  int tenant = -1;
  double reserved_each = 0;
  uint32_t left = 0;  // choices still to come
  clock_type::time_point at;
};

struct ledger_state {
  tenant_ledger_config cfg;
  std::vector<tenant_account> tenants;
  uint32_t in_flight = 0;  // every model's accepted requests, with the slots held for choices to come
  std::unordered_map<uint64_t, group_verdict> groups;
  static inline const char* name = "tandem.tenant_ledger";
};

void fill_limits(submit_reply& r, tenant_account& t, clock_type::time_point now) {
  r.tenant = t.cfg.name;
  if (t.requests.limited()) {
    r.limit_requests = static_cast<int64_t>(t.requests.capacity());
    r.remaining_requests = std::max<int64_t>(0, static_cast<int64_t>(std::floor(t.requests.level(now))));
  }
  if (t.tokens.limited()) {
    r.limit_tokens = static_cast<int64_t>(t.tokens.capacity());
    r.remaining_tokens = std::max<int64_t>(0, static_cast<int64_t>(std::floor(t.tokens.level(now))));
  }
}

// Why the tenant refuses a request of n choices costing `cost` tokens (429, or 400 when no
// retry could ever pass), or nothing; nothing is taken yet.
void check_tenant(tenant_account& t, uint32_t n, double cost, clock_type::time_point now, submit_reply& r) {
  if (t.cfg.max_concurrent > 0 && n > t.cfg.max_concurrent) {
    r.status = 400;
    r.error = "this request has " + std::to_string(n) + " choices, more than tenant '" + t.cfg.name +
              "' may run at once (max_concurrent_requests: " + std::to_string(t.cfg.max_concurrent) + ")";
  } else if (t.cfg.max_concurrent > 0 && t.in_flight + n > t.cfg.max_concurrent) {
    r.status = 429;
    r.error = "tenant '" + t.cfg.name + "' has " + std::to_string(t.in_flight) +
              " requests in flight, its limit; retry when one finishes";
    r.retry_after_s = 1;
  } else if (t.requests.limited() && t.requests.level(now) < 1) {
    r.status = 429;
    r.error =
        "tenant '" + t.cfg.name + "' is over its limit of " + std::to_string(r.limit_requests) + " requests per minute";
    r.retry_after_s = t.requests.seconds_until(1, now);
  } else if (t.tokens.limited() && t.tokens.level(now) < cost) {
    r.status = 429;
    r.error = "tenant '" + t.cfg.name + "' is over its limit of " + std::to_string(r.limit_tokens) +
              " tokens per minute (this request may use " + std::to_string(static_cast<int64_t>(cost)) + ")";
    r.retry_after_s = t.tokens.seconds_until(cost, now);
  }
}

// Slots held for choices that never came (a client that sent one of n) come back after a minute.
void expire_groups(ledger_state& st, clock_type::time_point now) {
  for (auto it = st.groups.begin(); it != st.groups.end();) {
    if (now - it->second.at <= std::chrono::minutes(1)) {
      ++it;
      continue;
    }
    if (it->second.reply.accepted) {
      st.in_flight -= it->second.left;
      if (it->second.tenant >= 0) st.tenants[it->second.tenant].in_flight -= it->second.left;
    }
    it = st.groups.erase(it);
  }
}

ledger_verdict judge(ledger_state& st, const ledger_ask& ask, clock_type::time_point now) {
  ledger_verdict v;
  submit_reply& r = v.reply;
  const uint32_t n = std::max<uint32_t>(1, ask.choices);
  tenant_account* t = ask.tenant >= 0 && static_cast<size_t>(ask.tenant) < st.tenants.size()
                          ? &st.tenants[ask.tenant]
                          : nullptr;
  // A request larger than the whole bucket waits for a full one: it would never fit otherwise.
  const double cost = t && t->tokens.limited() ? std::min(ask.cost, t->tokens.capacity()) : ask.cost;
  // The tenant's limits first (a tenant at its limit is told so, whatever the server's load),
  // then the server's; a request is charged only once it is accepted.
  if (t) {
    fill_limits(r, *t, now);
    check_tenant(*t, n, cost, now, r);
  }
  if (r.error.empty() && n > st.cfg.max_in_flight) {
    r.status = 400;
    r.error = "this request has " + std::to_string(n) + " choices, more than the server runs at once (" +
              std::to_string(st.cfg.max_in_flight) + ")";
  } else if (r.error.empty() && st.in_flight + n > st.cfg.max_in_flight) {
    r.status = 503;
    r.error = "the server is at capacity (" + std::to_string(st.in_flight) + " requests in flight); retry later";
    r.retry_after_s = 1;
  }
  r.accepted = r.error.empty();
  if (r.accepted) {
    if (t) {
      t->requests.try_take(1, now);
      t->tokens.try_take(cost, now);
      fill_limits(r, *t, now);
      t->in_flight += n;
    }
    st.in_flight += n;
  }
  v.reserved_each = cost / n;
  return v;
}

tenant_ledger_actor::behavior_type ledger(tenant_ledger_actor::stateful_pointer<ledger_state> self,
                                          tenant_ledger_config cfg) {
  auto& init = self->state;
  init.cfg = std::move(cfg);
  const auto now = clock_type::now();
  for (const auto& t : init.cfg.tenants) {
    init.tenants.push_back({t, token_bucket(t.requests_per_minute, now), token_bucket(t.tokens_per_minute, now), 0});
  }
  return {
      [self](ledger_admit_atom, const ledger_ask& ask) -> ledger_verdict {
        auto& st = self->state;
        const auto at = clock_type::now();
        expire_groups(st, at);
        const bool grouped = ask.prompt_group != 0 && ask.choices > 1;
        if (const auto g = grouped ? st.groups.find(ask.prompt_group) : st.groups.end(); g != st.groups.end()) {
          // A later choice: the verdict holds and its slot was taken with the first.
          ledger_verdict v{g->second.reply, g->second.reserved_each, false};
          if (--g->second.left == 0) st.groups.erase(g);
          return v;
        }
        ledger_verdict v = judge(st, ask, at);
        if (grouped) st.groups[ask.prompt_group] = {v.reply, ask.tenant, v.reserved_each, ask.choices - 1, at};
        return v;
      },
      [self](ledger_settle_atom, int tenant, double reserved, uint32_t used) {
        auto& st = self->state;
        if (st.in_flight > 0) --st.in_flight;
        if (tenant < 0 || static_cast<size_t>(tenant) >= st.tenants.size()) return;
        auto& t = st.tenants[tenant];
        if (t.in_flight > 0) --t.in_flight;
        t.tokens.adjust(static_cast<double>(used) - reserved, clock_type::now());
      },
  };
}

}  // namespace

tenant_ledger_actor spawn_tenant_ledger(caf::actor_system& sys, tenant_ledger_config cfg) {
  return sys.spawn(ledger, std::move(cfg));
}

}  // namespace tandem
