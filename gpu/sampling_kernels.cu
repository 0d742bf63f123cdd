// Sampling on the device: greedy argmax, Gumbel-max categorical draws (temperature, top-k,
// top-p, min-p), logit bias with repetition/frequency/presence penalties, and the raw
// row's log-probabilities (sampled token and top-N). One block per row; CUB's
// BlockReduce merges the threads' candidates; top-k and top-p find their cut by a radix
// select on the logits' bits (weighted by count or by probability), without sorting the
// row. Only token ids (and asked-for log-probabilities) leave the device.
#include <cuda_runtime.h>

#include <cfloat>
#include <cub/block/block_reduce.cuh>

#include "gpu/kernels.h"
#include "gpu/plan/sampling_cut.h"

namespace tandem::gpu {
namespace {

constexpr int kThreads = 256;

struct candidate {
  float score;
  int32_t id;
};

// Higher score wins; the lower id on ties (as a sequential argmax scanning upwards).
struct better_candidate {
  __device__ candidate operator()(const candidate& a, const candidate& b) const {
    if (a.score != b.score) return a.score > b.score ? a : b;
    return a.id <= b.id ? a : b;
  }
};

struct max_op {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// splitmix64 finalizer: a counter-based generator (no state to carry between steps).
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1) from seed, counter and token id.
__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t counter, int32_t id) {
  const uint64_t h = mix64(seed ^ mix64(counter * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(id) + 1));
  return (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

__global__ void argmax_kernel(const float* logits, int32_t n_vocab, int32_t* out) {
  using reduce = cub::BlockReduce<candidate, kThreads>;
  __shared__ typename reduce::TempStorage tmp;
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  candidate best{-FLT_MAX, INT32_MAX};
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) best = better_candidate{}(best, {row[i], i});
  const candidate r = reduce(tmp).Reduce(best, better_candidate{});
  if (threadIdx.x == 0) out[blockIdx.x] = r.id;
}

constexpr int kWarps = kThreads / 32;
constexpr int kBins = kCutBins;

// Shared state of radix_select: one private histogram per warp (no atomics between warps),
// the lanes' weights for the warp-aggregated add, and the result.
struct select_shared {
  double hist[kWarps][kBins];
  double lane_w[kWarps][32];
  uint32_t prefix;  // the result K once all four digits are chosen
  double above;     // weight of keys > K
  double at;        // weight of keys == K
  bool reached;     // false: the total weight is below the target
};

// Among the tokens for which key_of(i, key) is true, finds the largest key K such that the
// weight of the tokens with key >= K reaches `target`, 8 bits of the key at a time from the
// top (four passes over the row, no sort). Every thread of the block calls it; the result is
// in sh when it returns.
template <class KeyOf, class WeightOf>
__device__ void radix_select(int32_t n, KeyOf key_of, WeightOf weight_of, double target, select_shared& sh) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the previous call's result has been read
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.above = 0.0;
    sh.reached = true;
  }
  for (int level = 0; level < kCutLevels; ++level) {
    for (int b = threadIdx.x; b < kWarps * kBins; b += kThreads) sh.hist[b / kBins][b % kBins] = 0.0;
    __syncthreads();
    const uint32_t prefix = sh.prefix;
    // Uniform trip count across the warp: __match_any_sync needs every lane.
    for (int32_t base = 0; base < n; base += kThreads) {
      const int32_t i = base + static_cast<int32_t>(threadIdx.x);
      uint32_t key = 0;
      int bin = kBins;  // not counted
      double w = 0.0;
      if (i < n && key_of(i, key) && matches_prefix(key, prefix, level)) {
        bin = key_digit(key, level);
        w = weight_of(i);
      }
      // Lanes with the same bin add once, through their lowest lane.
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
      sh.lane_w[warp][lane] = w;
      __syncwarp();
      if (bin < kBins && lane == __ffs(peers) - 1) {
        double sum = 0.0;
        for (unsigned m = peers; m != 0; m &= m - 1) sum += sh.lane_w[warp][__ffs(m) - 1];
        sh.hist[warp][bin] += sum;
      }
      __syncwarp();
    }
    __syncthreads();
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      double total = 0.0;
      for (int w = 0; w < kWarps; ++w) total += sh.hist[w][b];
      sh.hist[0][b] = total;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const digit_choice c = choose_digit(sh.hist[0], sh.above, target);
      sh.reached = sh.reached && c.reached;
      sh.above = c.above;
      sh.at = c.at;
      sh.prefix = prefix | (static_cast<uint32_t>(c.bin) << (24 - 8 * level));
    }
    __syncthreads();
  }
}

// The m-th smallest id (m >= 1) among the usable tokens whose key is k: ties in the sorted
// order go to the lower id, as in the CPU sampler.
__device__ int32_t tie_limit(const float* row, int32_t n, uint32_t k, double m, select_shared& sh) {
  radix_select(
      n,
      [&](int32_t i, uint32_t& key) {
        const float x = row[i];
        if (!usable_logit(x) || order_key(x) != k) return false;
        key = ~static_cast<uint32_t>(i);  // larger key = smaller id
        return true;
      },
      [](int32_t) { return 1.0; }, m, sh);
  return static_cast<int32_t>(~sh.prefix);
}

// One row's sampling, as engine/sampling/sampler.h's distribution() then a draw: greedy; or top-k,
// then top-p over the tempered probabilities, then min-p, then a Gumbel-max draw among the
// survivors (the renormalised distribution the CPU sampler draws from).
// With drafts (speculative verification, drafts non-null) and drafts[row] = x >= 0: p(x) of
// that distribution, the verdict (accept with probability p(x)), and the draw made among the
// survivors other than x (the residual norm(max(0, p - q)) of a point-mass draft q); a row
// with drafts[row] < 0 draws as without drafts. verdicts[row]: 1 accepted (or drawn), 0
// rejected, -1 nothing to sample.
__global__ void sample_kernel(const float* logits, const sample_params* params, int32_t n_vocab, int32_t* out,
                              const int32_t* drafts, draft_verdict* verdicts) {
  using reduce_c = cub::BlockReduce<candidate, kThreads>;
  using reduce_f = cub::BlockReduce<float, kThreads>;
  using reduce_d = cub::BlockReduce<double, kThreads>;
  __shared__ typename reduce_c::TempStorage tmp_c;
  __shared__ typename reduce_f::TempStorage tmp_f;
  __shared__ typename reduce_d::TempStorage tmp_d;
  __shared__ select_shared sel;
  __shared__ float s_max;
  __shared__ double s_sum;
  const sample_params p = params[blockIdx.x];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  const int32_t draft = drafts != nullptr ? drafts[blockIdx.x] : -1;
  // The verdict of a drawn token `id` (-1: nothing to sample) given p(draft).
  auto give_verdict = [&](int32_t id, float p_draft) {
    if (drafts == nullptr) return;
    int32_t v = id >= 0 ? 1 : -1;
    if (draft >= 0 && id >= 0) {
      const float u = uniform01(p.seed, p.counter, -1);  // an id no token's noise uses
      v = p_draft >= 1.0f || u < p_draft ? 1 : 0;
    } else if (draft >= 0 && p_draft > 0.0f) {
      v = 1;  // the draft is the only survivor: nothing else to draw, and it is accepted
    }
    verdicts[blockIdx.x] = draft_verdict{v, p_draft};
  };
  if (!(p.temperature > 0.0f)) {  // greedy: the first maximum, NaN and -inf never chosen
    candidate best{-FLT_MAX, INT32_MAX};
    for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
      if (usable_logit(row[i])) best = better_candidate{}(best, {row[i], i});
    }
    const candidate r = reduce_c(tmp_c).Reduce(best, better_candidate{});
    if (threadIdx.x == 0) {
      const int32_t id = r.id < n_vocab ? r.id : -1;
      out[blockIdx.x] = id;  // a point mass: accepted exactly when the draft is the argmax
      if (drafts != nullptr) {
        verdicts[blockIdx.x] =
            draft_verdict{id < 0 ? -1 : (draft < 0 || id == draft ? 1 : 0), id == draft ? 1.0f : 0.0f};
      }
    }
    return;
  }
  float mx = -INFINITY;
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    if (usable_logit(row[i])) mx = fmaxf(mx, row[i]);
  }
  mx = reduce_f(tmp_f).Reduce(mx, max_op{});
  if (threadIdx.x == 0) s_max = mx;
  __syncthreads();
  mx = s_max;
  if (mx == -INFINITY) {  // every token masked: nothing to sample (the CPU sampler's -1)
    if (threadIdx.x == 0) {
      out[blockIdx.x] = -1;
      give_verdict(-1, 0.0f);
    }
    return;
  }
  const float inv_t = 1.0f / p.temperature;
  auto usable_key = [&](int32_t i, uint32_t& key) {
    const float x = row[i];
    if (!usable_logit(x)) return false;
    key = order_key(x);
    return true;
  };
  prefix_cut cut;
  if (p.top_k > 0 && p.top_k < n_vocab) {
    radix_select(
        n_vocab, usable_key, [](int32_t) { return 1.0; }, static_cast<double>(p.top_k), sel);
    if (sel.reached) {                                // else fewer usable tokens than k: all stay
      const prefix_cut k_cut{sel.prefix, INT32_MAX};  // decisions: gpu/plan/sampling_cut.h
      const double need = p.top_k - sel.above, ties = sel.at;
      cut = k_cut;
      if (need < ties) cut.id = tie_limit(row, n_vocab, k_cut.key, need, sel);
    }
  }
  if (p.top_p < 1.0f) {
    // Unnormalised tempered probabilities w_i = exp((x_i - max) / T); the nucleus is the
    // shortest sorted prefix whose weight reaches top_p * sum(w).
    auto weight = [&](int32_t i) { return static_cast<double>(expf((row[i] - mx) * inv_t)); };
    double z = 0.0;
    for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
      if (usable_logit(row[i])) z += weight(i);
    }
    z = reduce_d(tmp_d).Sum(z);
    if (threadIdx.x == 0) s_sum = z;
    __syncthreads();
    // At least the top token (top_p <= 0 keeps one, as the CPU sampler does).
    const double target = fmax(static_cast<double>(p.top_p) * s_sum, DBL_MIN);
    radix_select(n_vocab, usable_key, weight, target, sel);
    if (sel.reached) {  // else rounding left the total below the target: all stay
      prefix_cut p_cut{sel.prefix, INT32_MAX};
      // Ties at the threshold have equal weight; keep the fewest (lowest ids) that reach it.
      const double w = static_cast<double>(expf((key_value(p_cut.key) - mx) * inv_t));
      double ties = 0.0;
      const double need = top_p_ties_needed(target, sel.above, sel.at, w, &ties);
      if (need < ties) p_cut.id = tie_limit(row, n_vocab, p_cut.key, need, sel);
      if (p_cut.shorter_than(cut)) cut = p_cut;
    }
  }
  const float floor = min_p_floor(mx, p.temperature, p.min_p);
  auto kept = [&](int32_t i) {
    const float x = row[i];
    return usable_logit(x) && x >= floor && cut.keeps(order_key(x), i);
  };
  candidate best{-FLT_MAX, INT32_MAX};
  double kept_mass = 0.0;  // with a draft: the survivors' weight, p(x)'s denominator
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    if (!kept(i)) continue;
    if (draft >= 0) kept_mass += static_cast<double>(expf((row[i] - mx) * inv_t));
    if (i == draft) continue;  // a rejected draft is redrawn from the survivors without it
    // Gumbel(0,1) noise: -log(-log(u)); argmax of logit/T + noise ~ softmax(logit/T).
    const float score = row[i] * inv_t - logf(-logf(uniform01(p.seed, p.counter, i)));
    best = better_candidate{}(best, {score, i});
  }
  const candidate r = reduce_c(tmp_c).Reduce(best, better_candidate{});
  if (draft >= 0) kept_mass = reduce_d(tmp_d).Sum(kept_mass);  // uniform: draft is per row
  if (threadIdx.x == 0) {
    const int32_t id = r.id < n_vocab ? r.id : -1;
    out[blockIdx.x] = id;
    float p_draft = 0.0f;
    if (draft >= 0 && draft < n_vocab && kept(draft)) {
      p_draft = static_cast<float>(static_cast<double>(expf((row[draft] - mx) * inv_t)) / kept_mass);
    }
    give_verdict(id, p_draft);
  }
}

// Logit bias then penalties, entry by entry (each token once per row, so no two threads
// write one logit), the raw value saved first. The rounding is the CPU sampler's: x + bias,
// then x / r or x * r, then x - (presence + frequency * count), each rounded on its own.
__global__ void adjust_kernel(float* logits, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                              const int32_t* counts, const float* bias, const penalty_params* params, float* saved) {
  const penalty_params p = params[blockIdx.x];
  float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  for (int32_t j = offsets[blockIdx.x] + threadIdx.x; j < offsets[blockIdx.x + 1]; j += blockDim.x) {
    const int32_t tok = tokens[j];
    if (tok < 0 || tok >= n_vocab) continue;
    const float raw = row[tok];
    saved[j] = raw;
    float x = __fadd_rn(raw, bias[j]);
    if (counts[j] > 0) {
      x = x > 0.0f ? __fdiv_rn(x, p.repetition) : __fmul_rn(x, p.repetition);
      x = __fsub_rn(x, __fadd_rn(p.presence, __fmul_rn(p.frequency, static_cast<float>(counts[j]))));
    }
    row[tok] = x;
  }
}

// Log-probabilities of one row's raw logits, as engine/sampling/sampler.h's sample(): the
// log-sum-exp over the usable logits (NaN and -inf excluded), logprob(x) = x - max - log sum
// in double; with a +inf logit, 0 for the +inf ones and -inf for the rest.
__global__ void logprobs_kernel(float* logits, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                                const float* saved, const int32_t* sampled, const int32_t* top_n, row_logprobs* out) {
  using reduce_f = cub::BlockReduce<float, kThreads>;
  using reduce_i = cub::BlockReduce<int32_t, kThreads>;
  using reduce_d = cub::BlockReduce<double, kThreads>;
  __shared__ typename reduce_f::TempStorage tmp_f;
  __shared__ typename reduce_i::TempStorage tmp_i;
  __shared__ typename reduce_d::TempStorage tmp_d;
  __shared__ select_shared sel;
  __shared__ float s_max;
  __shared__ int32_t s_usable;
  __shared__ double s_log_sum;
  __shared__ int32_t s_n;
  __shared__ int32_t s_ids[kMaxTopLogprobs];
  const int32_t asked = top_n[blockIdx.x];
  if (asked < 0) return;  // the whole block leaves: no logprobs for this row
  float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  if (offsets != nullptr) {  // the raw logits back where bias and penalties changed them
    for (int32_t j = offsets[blockIdx.x] + threadIdx.x; j < offsets[blockIdx.x + 1]; j += kThreads) {
      if (tokens[j] >= 0 && tokens[j] < n_vocab) row[tokens[j]] = saved[j];
    }
  }
  __syncthreads();
  float mx = -INFINITY;
  int32_t usable = 0;
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    if (usable_logit(row[i])) {
      mx = fmaxf(mx, row[i]);
      ++usable;
    }
  }
  mx = reduce_f(tmp_f).Reduce(mx, max_op{});
  usable = reduce_i(tmp_i).Sum(usable);
  if (threadIdx.x == 0) {
    s_max = mx;
    s_usable = usable;
  }
  __syncthreads();
  mx = s_max;
  usable = s_usable;
  const bool finite_max = usable > 0 && mx < INFINITY;
  double mass = 0.0;
  if (finite_max) {
    for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
      if (usable_logit(row[i])) mass += static_cast<double>(expf(row[i] - mx));
    }
  }
  mass = reduce_d(tmp_d).Sum(mass);
  if (threadIdx.x == 0) s_log_sum = finite_max ? log(mass) : 0.0;
  __syncthreads();
  const double log_sum = s_log_sum;
  auto log_prob = [&](float x) -> float {
    if (!usable_logit(x)) return -INFINITY;
    if (mx == INFINITY) return x == INFINITY ? 0.0f : -INFINITY;
    return static_cast<float>(static_cast<double>(x) - static_cast<double>(mx) - log_sum);
  };
  row_logprobs& o = out[blockIdx.x];
  if (threadIdx.x == 0) {
    const int32_t t = sampled[blockIdx.x];
    o.logprob = t >= 0 && t < n_vocab ? log_prob(row[t]) : 0.0f;
  }
  const int32_t want = min(min(asked, kMaxTopLogprobs), n_vocab);
  // The best `want` usable tokens as a cut of the (logit descending, id ascending) order, or
  // every usable token when there are no more than that.
  prefix_cut cut;
  if (want > 0 && want < usable) {
    auto usable_key = [&](int32_t i, uint32_t& key) {
      const float x = row[i];
      if (!usable_logit(x)) return false;
      key = order_key(x);
      return true;
    };
    radix_select(
        n_vocab, usable_key, [](int32_t) { return 1.0; }, static_cast<double>(want), sel);
    cut = prefix_cut{sel.prefix, INT32_MAX};
    const double need = want - sel.above, ties = sel.at;
    if (need < ties) cut.id = tie_limit(row, n_vocab, cut.key, need, sel);
  }
  if (threadIdx.x == 0) s_n = 0;
  __syncthreads();
  if (want > 0) {
    for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
      const float x = row[i];
      if (!usable_logit(x) || !cut.keeps(order_key(x), i)) continue;
      const int32_t k = atomicAdd(&s_n, 1);
      if (k < want) s_ids[k] = i;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // at most kMaxTopLogprobs: insertion sort, best first
    const int32_t n = min(s_n, want);
    for (int32_t a = 1; a < n; ++a) {
      const int32_t id = s_ids[a];
      const uint32_t k = order_key(row[id]);
      int32_t b = a;
      for (; b > 0; --b) {
        const uint32_t kb = order_key(row[s_ids[b - 1]]);
        if (kb > k || (kb == k && s_ids[b - 1] < id)) break;
        s_ids[b] = s_ids[b - 1];
      }
      s_ids[b] = id;
    }
    s_n = n;
  }
  __syncthreads();
  if (threadIdx.x < 32 && s_n < want) {  // fewer usable than asked: the unusable ones by id
    int32_t n = s_n;
    for (int32_t base = 0; base < n_vocab && n < want; base += 32) {
      const int32_t i = base + static_cast<int32_t>(threadIdx.x);
      unsigned bad = __ballot_sync(0xFFFFFFFFu, i < n_vocab && !usable_logit(row[i]));
      for (; bad != 0 && n < want; bad &= bad - 1) {
        if (threadIdx.x == 0) s_ids[n] = base + __ffs(bad) - 1;
        ++n;
      }
    }
    __syncwarp();
    if (threadIdx.x == 0) s_n = n;
  }
  __syncthreads();
  if (threadIdx.x < s_n) {
    o.top_ids[threadIdx.x] = s_ids[threadIdx.x];
    o.top_logprobs[threadIdx.x] = log_prob(row[s_ids[threadIdx.x]]);
  }
  if (threadIdx.x == 0) o.n_top = s_n;
}

}  // namespace

void launch_argmax(const float* logits, int32_t n_rows, int32_t n_vocab, int32_t* out, stream_handle s) {
  if (n_rows <= 0) return;
  argmax_kernel<<<n_rows, kThreads, 0, s>>>(logits, n_vocab, out);
  check_launch("argmax");
}

void launch_sample(const float* logits, const sample_params* params, int32_t n_rows, int32_t n_vocab, int32_t* out,
                   stream_handle s) {
  if (n_rows <= 0) return;
  sample_kernel<<<n_rows, kThreads, 0, s>>>(logits, params, n_vocab, out, nullptr, nullptr);
  check_launch("sample");
}

void launch_verify(const float* logits, const sample_params* params, const int32_t* drafts, int32_t n_rows,
                   int32_t n_vocab, int32_t* out, draft_verdict* verdicts, stream_handle s) {
  if (n_rows <= 0) return;
  sample_kernel<<<n_rows, kThreads, 0, s>>>(logits, params, n_vocab, out, drafts, verdicts);
  check_launch("verify");
}

void launch_adjust_logits(float* logits, int32_t n_rows, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                          const int32_t* counts, const float* bias, const penalty_params* params, float* saved,
                          stream_handle s) {
  if (n_rows <= 0) return;
  adjust_kernel<<<n_rows, 128, 0, s>>>(logits, n_vocab, offsets, tokens, counts, bias, params, saved);
  check_launch("adjust_logits");
}

void launch_logprobs(float* logits, int32_t n_rows, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                     const float* saved, const int32_t* sampled, const int32_t* top_n, row_logprobs* out,
                     stream_handle s) {
  if (n_rows <= 0) return;
  logprobs_kernel<<<n_rows, kThreads, 0, s>>>(logits, n_vocab, offsets, tokens, saved, sampled, top_n, out);
  check_launch("logprobs");
}

}  // namespace tandem::gpu
