#include "engine/sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "engine/sampling/row_kernels.h"
#include "engine/sampling/truncation.h"

namespace tandem {
namespace {

using sampling::kept_tokens;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool usable(float x) { return x > kNegInf; }  // false for NaN too

// One thread's scratch space: every buffer a prepared distribution points into, and the
// penalty counts (zero between calls, so only the history's tokens are touched).
struct workspace {
  std::vector<float> row;  // the processed logits, when bias or penalties changed any
  std::vector<float> bmax;
  std::vector<float> block_sums;
  std::vector<int32_t> ids;
  std::vector<float> kept_w;
  std::vector<uint32_t> counts;  // [n] occurrences in the history
  std::vector<int32_t> touched;  // tokens with counts > 0
  sampling::truncation_scratch trunc;
  std::span<const float> processed;  // the row the last prepare() ranked
  kept_tokens kept;

  static workspace& of_this_thread() {
    thread_local workspace ws;
    return ws;
  }

  // Block maxima and block sums of the row's weights, rescaled to the row's maximum
  // (row_kernels.h); returns the maximum and the usable count, and the mass in *mass.
  sampling::row_max weigh(const sampling::row_kernels& rk, std::span<const float> x, float inv_t, double* mass) {
    const size_t nb = sampling::blocks_for(x.size());
    bmax.resize(nb);
    block_sums.resize(nb);
    const auto top = rk.block_weights(x.data(), x.size(), inv_t, bmax.data(), block_sums.data());
    float running = -std::numeric_limits<float>::infinity();
    *mass = 0.0;
    for (size_t g = 0; g < nb; g += sampling::kGroupBlocks) {  // kept_tokens' grouping
      double s = 0.0;
      for (size_t b = g; b < std::min(nb, g + sampling::kGroupBlocks); ++b) {
        running = bmax[b] > running ? bmax[b] : running;
        if (running < top.max && block_sums[b] > 0.0f) {
          block_sums[b] *= rk.weight((running - top.max) * inv_t);
        }
        s += block_sums[b];
      }
      *mass += s;
    }
    return top;
  }
  sampling::row_max block_maxima(const sampling::row_kernels& rk, std::span<const float> x) {
    bmax.resize(sampling::blocks_for(x.size()));
    return rk.block_max(x.data(), x.size(), bmax.data());
  }
};

}  // namespace

int32_t first_max(std::span<const float> x) { return sampling::best_row_kernels().argmax(x.data(), x.size()).index; }

sampler::sampler(sampling_params params) : params_(std::move(params)) {
  state_ =
      params_.seed ? *params_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

double sampler::uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

bool sampler::is_stop(int32_t token) const {
  return std::find(params_.stop_tokens.begin(), params_.stop_tokens.end(), token) != params_.stop_tokens.end();
}

const kept_tokens& sampler::prepare(std::span<const float> logits, std::span<const int32_t> history) {
  auto& ws = workspace::of_this_thread();
  const auto& rk = sampling::best_row_kernels();
  auto& kept = ws.kept;
  const size_t n = logits.size();
  const bool penalties =
      (params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) &&
      !history.empty();

  // 1-2. Bias and penalties on a copy, touching only their tokens (NaN stays unusable).
  std::span<const float> row = logits;
  if (!params_.logit_bias.empty() || penalties) {
    ws.row.assign(logits.begin(), logits.end());
    for (const auto& [tok, bias] : params_.logit_bias) {
      if (tok >= 0 && static_cast<size_t>(tok) < n) ws.row[static_cast<size_t>(tok)] += bias;
    }
    if (penalties) {
      if (ws.counts.size() < n) ws.counts.resize(n, 0);
      ws.touched.clear();
      for (int32_t tok : history) {
        if (tok >= 0 && static_cast<size_t>(tok) < n && ws.counts[static_cast<size_t>(tok)]++ == 0) {
          ws.touched.push_back(tok);
        }
      }
      const float rep = params_.repetition_penalty;
      for (int32_t tok : ws.touched) {
        float& x = ws.row[static_cast<size_t>(tok)];
        if (rep > 0.0f && rep != 1.0f) x = x > 0.0f ? x / rep : x * rep;
        x -= params_.presence_penalty +
             params_.frequency_penalty * static_cast<float>(ws.counts[static_cast<size_t>(tok)]);
        ws.counts[static_cast<size_t>(tok)] = 0;
      }
    }
    row = ws.row;
  }
  ws.processed = row;

  // 3. Greedy: a point mass on the first maximum (also for a temperature so small that
  // 1 / T overflows, greedy's limit).
  const float inv_t = params_.temperature > 0.0f ? 1.0f / params_.temperature : kInf;
  if (!(inv_t < FLT_MAX)) {
    const int32_t chosen = rk.argmax(row.data(), n).index;
    chosen >= 0 ? kept.set_point(chosen) : kept.set_empty();
    return kept;
  }
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n;
  const bool top_p = params_.top_p < 1.0f;
  const bool min_p = params_.min_p > 0.0f;
  // One pass over the row: block maxima, and the weights' block sums where the mass is needed.
  double mass = 0.0;
  const auto top = top_p || (!top_k && !min_p) ? ws.weigh(rk, row, inv_t, &mass) : ws.block_maxima(rk, row);
  if (top.usable == 0) {
    kept.set_empty();
    return kept;
  }
  if (top.usable == 1 || top.max == kInf) {  // one token, or +inf logits sharing all the mass
    ws.ids.clear();
    for (size_t b = 0; b < ws.bmax.size(); ++b) {
      if (ws.bmax[b] >= top.max)
        rk.collect_at_least(row.data(), b * sampling::kBlock, std::min(n, (b + 1) * sampling::kBlock), top.max, ws.ids);
    }
    ws.kept_w.assign(ws.ids.size(), 1.0f);
    top.usable == 1 || ws.ids.size() == 1 ? kept.set_point(ws.ids[0]) : kept.set_sparse(ws.ids, ws.kept_w);
    return kept;
  }
  const float max = top.max;

  // 4. No truncation: the whole row, drawn from its block sums.
  if (!top_k && !top_p && !min_p) {
    kept.set_dense(row, max, inv_t, ws.block_sums);
    return kept;
  }
  // Truncation: the kept ids with their weights.
  auto weigh_ids = [&] {
    ws.kept_w.resize(ws.ids.size());
    rk.weights_at(row.data(), ws.ids.data(), ws.ids.size(), max, inv_t, ws.kept_w.data());
  };
  ws.kept_w.clear();
  if (top_k && static_cast<int64_t>(params_.top_k) < top.usable) {
    sampling::select_top_k(row, ws.bmax, static_cast<size_t>(params_.top_k), rk, ws.trunc, ws.ids);  // best first
    weigh_ids();
    size_t keep = ws.ids.size();
    if (top_p) {
      const double target = static_cast<double>(params_.top_p) * mass;
      double cumulative = 0.0;
      keep = 0;
      while (keep < ws.ids.size()) {
        cumulative += ws.kept_w[keep++];
        if (cumulative >= target) break;
      }
    }
    if (min_p) {
      size_t i = 1;
      while (i < keep && ws.kept_w[i] >= params_.min_p) ++i;
      keep = i;
    }
    ws.ids.resize(keep);
    ws.kept_w.resize(keep);
    // The draw walks ids in increasing order.
    ws.trunc.keys.clear();
    for (size_t i = 0; i < ws.ids.size(); ++i) {
      ws.trunc.keys.push_back(static_cast<uint64_t>(ws.ids[i]) << 32 | std::bit_cast<uint32_t>(ws.kept_w[i]));
    }
    std::sort(ws.trunc.keys.begin(), ws.trunc.keys.end());
    for (size_t i = 0; i < ws.ids.size(); ++i) {
      ws.ids[i] = static_cast<int32_t>(ws.trunc.keys[i] >> 32);
      ws.kept_w[i] = std::bit_cast<float>(static_cast<uint32_t>(ws.trunc.keys[i]));
    }
  } else {
    if (top_p) {
      sampling::nucleus(row, ws.bmax, ws.block_sums, max, inv_t, mass, params_.top_p, rk, ws.trunc, ws.ids, ws.kept_w);
    } else {
      // min-p alone: w >= min_p <=> z >= log(min_p); candidates by logit with a margin for
      // the exp's rounding, then the exact test below.
      const float z_floor = std::min(0.0f, std::log(params_.min_p)) * 1.0001f - 1e-4f;
      const float x_min = std::max(-FLT_MAX, max + z_floor / inv_t);
      ws.ids.clear();
      for (size_t b = 0; b < ws.bmax.size(); ++b) {
        if (ws.bmax[b] >= x_min) {
          rk.collect_at_least(row.data(), b * sampling::kBlock, std::min(n, (b + 1) * sampling::kBlock), x_min, ws.ids);
        }
      }
      weigh_ids();
    }
    if (min_p) {
      // The best-ranked token always stays (it weighs 1, unless min_p > 1).
      uint64_t best = 0;
      int32_t best_id = ws.ids.front();
      for (int32_t id : ws.ids) {
        if (const uint64_t key = sampling::rank_key(row[static_cast<size_t>(id)], id); key > best) {
          best = key;
          best_id = id;
        }
      }
      size_t m = 0;
      for (size_t i = 0; i < ws.ids.size(); ++i) {
        if (ws.kept_w[i] >= params_.min_p || ws.ids[i] == best_id) {
          ws.ids[m] = ws.ids[i];
          ws.kept_w[m++] = ws.kept_w[i];
        }
      }
      ws.ids.resize(m);
      ws.kept_w.resize(m);
    }
  }
  ws.ids.size() == 1 ? kept.set_point(ws.ids[0]) : kept.set_sparse(ws.ids, ws.kept_w);
  return kept;
}

int32_t sampler::draw(const kept_tokens& kept) {
  if (kept.empty()) return -1;
  if (kept.is_point()) return kept.point_token();
  return kept.draw(uniform());
}

const std::vector<token_prob>& sampler::distribution(std::span<const float> logits, std::span<const int32_t> history) {
  const kept_tokens& kept = prepare(logits, history);
  const auto row = workspace::of_this_thread().processed;
  dist_.clear();
  if (kept.empty()) return dist_;
  if (kept.is_point()) {
    dist_.push_back({kept.point_token(), 1.0f});
    return dist_;
  }
  std::vector<uint64_t> keys;
  auto add = [&](int32_t id) { keys.push_back(sampling::rank_key(row[static_cast<size_t>(id)], id)); };
  if (kept.shape() == kept_tokens::form::dense) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (usable(row[i])) add(static_cast<int32_t>(i));
    }
  } else {
    for (int32_t id : kept.sparse_ids()) add(id);
  }
  std::sort(keys.begin(), keys.end(), std::greater<uint64_t>());
  for (uint64_t key : keys) {
    const int32_t id = sampling::rank_key_id(key);
    dist_.push_back({id, static_cast<float>(kept.prob(id))});
  }
  return dist_;
}

int32_t sampler::draw(std::span<const token_prob> dist) {
  if (dist.empty()) return -1;
  if (dist.size() == 1) return dist[0].token;
  double mass = 0.0;
  for (const auto& c : dist) mass += c.prob;
  double r = uniform() * mass;
  for (const auto& c : dist) {
    r -= c.prob;
    if (r < 0.0) return c.token;
  }
  return dist.back().token;
}

row_logprobs logprobs_of(std::span<const float> logits, int32_t token, int32_t top_n, bool want_rank) {
  row_logprobs result;
  // Log-softmax of the raw logits: one weights pass at T = 1 (a sampler's prepared
  // distribution is no longer needed when this runs, so its buffers are reused).
  auto& ws = workspace::of_this_thread();
  const auto& rk = sampling::best_row_kernels();
  double mass = 0.0;
  const auto top = ws.weigh(rk, logits, 1.0f, &mass);
  const double log_sum = top.usable > 0 && top.max < kInf ? std::log(mass) : 0.0;
  auto log_prob = [&](int32_t id) {
    const float x = logits[static_cast<size_t>(id)];
    if (!usable(x)) return kNegInf;
    if (top.max == kInf) return x == kInf ? 0.0f : kNegInf;
    return static_cast<float>(static_cast<double>(x) - top.max - log_sum);
  };
  result.logprob = log_prob(token);
  if (want_rank) {
    const uint64_t key = sampling::rank_key(logits[static_cast<size_t>(token)], token);
    int32_t above = 0;
    for (size_t i = 0; i < logits.size(); ++i) above += sampling::rank_key(logits[i], static_cast<int32_t>(i)) > key;
    result.rank = above + 1;
  }
  if (top_n > 0) {
    const auto want = std::min<size_t>(static_cast<size_t>(top_n), logits.size());
    if (want < static_cast<size_t>(top.usable)) {
      sampling::select_top_k(logits, ws.bmax, want, rk, ws.trunc, ws.ids);
    } else {  // every usable token, best first, then the unusable ones by id
      ws.ids.clear();
      rk.collect_at_least(logits.data(), 0, logits.size(), -FLT_MAX, ws.ids);
      std::sort(ws.ids.begin(), ws.ids.end(), [&](int32_t a, int32_t b) {
        return sampling::rank_key(logits[static_cast<size_t>(a)], a) >
               sampling::rank_key(logits[static_cast<size_t>(b)], b);
      });
      for (size_t i = 0; i < logits.size() && ws.ids.size() < want; ++i) {
        if (!usable(logits[i])) ws.ids.push_back(static_cast<int32_t>(i));
      }
    }
    for (int32_t id : ws.ids) result.top.push_back({id, log_prob(id)});
  }
  return result;
}

sample_result sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  sample_result result;
  const int32_t chosen = draw(prepare(logits, history));
  if (chosen < 0) return result;  // everything masked

  result.token = chosen;
  result.is_stop = is_stop(chosen);
  if (!params_.logprobs && params_.top_logprobs <= 0) return result;
  auto lp = logprobs_of(logits, chosen, params_.top_logprobs);
  result.logprob = lp.logprob;
  result.top = std::move(lp.top);
  return result;
}

}  // namespace tandem
