#include "engine/sampling/speculative.h"

#include <algorithm>

namespace tandem {
namespace {

float prob_of(std::span<const token_prob> dist, int32_t token) {
  for (const auto& c : dist) {
    if (c.token == token) return c.prob;
  }
  return 0.0f;
}

// norm(max(0, p - q)) over the union of both supports.
std::vector<token_prob> residual(std::span<const token_prob> p, std::span<const token_prob> q) {
  std::vector<token_prob> r;
  double mass = 0.0;
  for (const auto& c : p) {
    const float d = c.prob - prob_of(q, c.token);
    if (d > 0.0f) {
      r.push_back({c.token, d});
      mass += d;
    }
  }
  if (mass <= 0.0) return {p.begin(), p.end()};  // p == q: any token of p is exact
  for (auto& c : r) c.prob = static_cast<float>(c.prob / mass);
  return r;
}

}  // namespace

// A point-mass draft (q = 1 at x, every n-gram and model draft the runtime sends) needs no
// listing of p: accept with probability p(x); on rejection norm(max(0, p - q)) is p without
// x, drawn from the prepared distribution directly. A sparse q goes through p's list.
acceptance accept_drafts(sampler& s, std::span<const std::span<const float>> rows, const draft_proposal& draft,
                         std::vector<int32_t> history) {
  acceptance out;
  const size_t k = draft.tokens.size();
  for (size_t i = 0; i < k && i < rows.size(); ++i) {
    const int32_t x = draft.tokens[i];
    const bool point_mass = i >= draft.q.size() || draft.q[i].empty();
    if (point_mass) {
      const auto& p = s.prepare(rows[i], history);
      if (p.empty()) {
        out.ended = true;
        return out;
      }
      const double px = p.prob(x);
      if (px >= 1.0 || s.uniform() < px) {
        out.tokens.push_back(x);
        history.push_back(x);
        ++out.n_accepted;
        continue;
      }
      out.tokens.push_back(p.is_point() ? p.point_token() : p.draw_excluding(x, s.uniform()));
      return out;
    }
    const std::vector<token_prob> p = s.distribution(rows[i], history);  // copy: the next call reuses it
    if (p.empty()) {
      out.ended = true;
      return out;
    }
    const std::vector<token_prob>& q = draft.q[i];
    const float px = prob_of(p, x), qx = prob_of(q, x);
    if (qx > 0.0f && (px >= qx || s.uniform() < static_cast<double>(px) / qx)) {
      out.tokens.push_back(x);
      history.push_back(x);
      ++out.n_accepted;
      continue;
    }
    out.tokens.push_back(s.draw(residual(p, q)));
    return out;
  }
  // Every draft accepted: a bonus token from the row after the last draft.
  if (out.n_accepted < rows.size()) {
    const auto& p = s.prepare(rows[out.n_accepted], history);
    if (p.empty()) {
      out.ended = true;
      return out;
    }
    out.tokens.push_back(s.draw(p));
  }
  return out;
}

}  // namespace tandem
