// Sampling on the device: greedy argmax, Gumbel-max categorical draws (temperature, min-p)
// and repetition/frequency/presence penalties. One block per row; CUB's BlockReduce merges
// the threads' candidates. Only token ids leave the device.
#include <cuda_runtime.h>

#include <cfloat>
#include <cub/block/block_reduce.cuh>

#include "gpu/kernels.h"

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

__global__ void sample_kernel(const float* logits, const sample_params* params, int32_t n_vocab, int32_t* out) {
  using reduce_c = cub::BlockReduce<candidate, kThreads>;
  using reduce_f = cub::BlockReduce<float, kThreads>;
  __shared__ typename reduce_c::TempStorage tmp_c;
  __shared__ typename reduce_f::TempStorage tmp_f;
  __shared__ float s_max;
  const sample_params p = params[blockIdx.x];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  const bool greedy = !(p.temperature > 0.0f);
  // min-p: p_i >= min_p * p_max  <=>  logit_i >= max_logit + T * log(min_p).
  float cut = -FLT_MAX;
  if (!greedy && p.min_p > 0.0f) {
    float mx = -FLT_MAX;
    for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) mx = fmaxf(mx, row[i]);
    mx = reduce_f(tmp_f).Reduce(mx, max_op{});
    if (threadIdx.x == 0) s_max = mx;
    __syncthreads();
    cut = s_max + p.temperature * logf(p.min_p);
  }
  const float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  candidate best{-FLT_MAX, INT32_MAX};
  for (int32_t i = threadIdx.x; i < n_vocab; i += kThreads) {
    const float x = row[i];
    if (x < cut) continue;
    // Gumbel(0,1) noise: -log(-log(u)); argmax of logit/T + noise ~ softmax(logit/T).
    const float score = greedy ? x : x * inv_t - logf(-logf(uniform01(p.seed, p.counter, i)));
    best = better_candidate{}(best, {score, i});
  }
  const candidate r = reduce_c(tmp_c).Reduce(best, better_candidate{});
  if (threadIdx.x == 0) out[blockIdx.x] = r.id;
}

__global__ void penalties_kernel(float* logits, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                                 const int32_t* counts, const penalty_params* params) {
  const penalty_params p = params[blockIdx.x];
  float* row = logits + static_cast<int64_t>(blockIdx.x) * n_vocab;
  for (int32_t j = offsets[blockIdx.x] + threadIdx.x; j < offsets[blockIdx.x + 1]; j += blockDim.x) {
    const int32_t tok = tokens[j];
    if (tok < 0 || tok >= n_vocab || counts[j] <= 0) continue;
    float x = row[tok];
    x = x > 0.0f ? x / p.repetition : x * p.repetition;
    x -= static_cast<float>(counts[j]) * p.frequency + p.presence;
    row[tok] = x;  // each token appears once per row, so no two threads write one logit
  }
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
  sample_kernel<<<n_rows, kThreads, 0, s>>>(logits, params, n_vocab, out);
  check_launch("sample");
}

void launch_penalties(float* logits, int32_t n_rows, int32_t n_vocab, const int32_t* offsets, const int32_t* tokens,
                      const int32_t* counts, const penalty_params* params, stream_handle s) {
  if (n_rows <= 0) return;
  penalties_kernel<<<n_rows, 128, 0, s>>>(logits, n_vocab, offsets, tokens, counts, params);
  check_launch("penalties");
}

}  // namespace tandem::gpu
