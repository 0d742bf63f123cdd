// row_kernels.h's passes, one body for AVX2 and AVX-512: included by row_kernels_x86.cpp
// inside each instruction set's namespace, under that set's `#pragma GCC target`, after it
// defines `ops`, the set's vector operations:
//
//   vec, mask                 a vector of `lanes` floats (8 or 16); which of its lanes are usable
//   load(p), store(p, v), set1(x)
//   add, sub, mul, max(a, b)  max keeps b where a is NaN, so NaN never wins
//   usable(v)                 the lanes above -inf (NaN is not)
//   keep(m, v)                v with the lanes outside m set to 0
//   count(m)                  how many lanes m holds
//   at_least(v, t)            bit j set where lane j >= t; NaN never
//   exp(v)                    weight_of in every lane (row_kernels.h)
//   half_sum(p)               the 16 lanes of a block sum, p[16 / lanes] vectors, folded to 8
//   reduce_max(v)             the largest lane
//   gather(x, ids)            x[ids[j]] in lane j
//   argmax_step               the running per-lane argmax: take(v) each vector, store(values,
//                             indices) at the end
//
// Every sum keeps row_kernels.h's order, lane for lane, so both sets give the generic bits.

constexpr int kLanes = ops::lanes;
constexpr int kPerBlock = static_cast<int>(kBlock) / kLanes;  // vectors in a block
constexpr int kPerSixteen = 16 / kLanes;                      // vectors in 16 lanes

// Rows come from memory (a step's logits far exceed the caches), and the hardware prefetcher
// stops at each 4 KiB page: the loads ask for the row a page ahead themselves.
constexpr size_t kPrefetchAhead = 4096 / sizeof(float);

// One block: its 64 values (past n: -inf) and which are usable.
struct block_values {
  ops::vec v[kPerBlock];
  ops::mask ok[kPerBlock];
};

inline void load_block(const float* x, size_t b, size_t n, block_values& k) {
  if ((b + 1) * kBlock + kPrefetchAhead <= n) {
    for (int r = 0; r < 4; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(x + b * kBlock + kPrefetchAhead + 16 * r), _MM_HINT_T0);
  }
  if ((b + 1) * kBlock <= n) {
    for (int r = 0; r < kPerBlock; ++r) k.v[r] = ops::load(x + b * kBlock + kLanes * r);
  } else {
    alignas(64) float tail[kBlock];
    for (size_t j = 0; j < kBlock; ++j) tail[j] = b * kBlock + j < n ? x[b * kBlock + j] : kNegInf;
    for (int r = 0; r < kPerBlock; ++r) k.v[r] = ops::load(tail + kLanes * r);
  }
  for (int r = 0; r < kPerBlock; ++r) k.ok[r] = ops::usable(k.v[r]);
}

inline float max_of(const block_values& k) {
  ops::vec m = ops::set1(kNegInf);
  for (int r = 0; r < kPerBlock; ++r) m = ops::max(k.v[r], m);
  return ops::reduce_max(m);
}

inline int64_t usable_of(const block_values& k) {
  int64_t u = 0;
  for (int r = 0; r < kPerBlock; ++r) u += ops::count(k.ok[r]);
  return u;
}

row_max block_max(const float* x, size_t n, float* bmax) {
  row_max r{kNegInf, 0};
  block_values k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load_block(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
  }
  return r;
}

row_max block_weights(const float* x, size_t n, float inv_t, float* bmax, float* sums) {
  row_max r{kNegInf, 0};
  const ops::vec vt = ops::set1(inv_t);
  float running = kNegInf;
  block_values k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load_block(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
    running = m > running ? m : running;
    const ops::vec ref = ops::set1(running);
    // Lane j of the 16: ((w[j] + w[16 + j]) + w[32 + j]) + w[48 + j], one vector per kLanes of them.
    ops::vec part[kPerSixteen];
    for (int q = 0; q < kPerBlock; ++q) {
      const ops::vec w = ops::keep(k.ok[q], ops::exp(ops::mul(ops::sub(k.v[q], ref), vt)));
      part[q % kPerSixteen] = q < kPerSixteen ? w : ops::add(part[q % kPerSixteen], w);
    }
    const __m256 h8 = ops::half_sum(part);
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    sums[b] = _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
  }
  return r;
}

row_argmax argmax(const float* x, size_t n) {
  // Per lane: the largest value and the first index holding it (a later index only on >).
  ops::argmax_step s;
  int64_t usable = 0;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    if (i % 16 == 0 && i + kPrefetchAhead < n) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i + kPrefetchAhead), _MM_HINT_T0);
    }
    const ops::vec v = ops::load(x + i);
    s.take(v);
    usable += ops::count(ops::usable(v));
  }
  alignas(64) float bv[kLanes];
  alignas(64) int32_t bi[kLanes];
  s.store(bv, bi);
  row_argmax r{-1, usable};
  float m = kNegInf;
  for (int l = 0; l < kLanes; ++l) {
    if (bi[l] >= 0 && (bv[l] > m || (bv[l] == m && bi[l] < r.index))) {
      m = bv[l];
      r.index = bi[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > m) {
      m = x[i];
      r.index = static_cast<int32_t>(i);
    }
    r.usable += x[i] > kNegInf ? 1 : 0;
  }
  return r;
}

void collect_at_least(const float* x, size_t begin, size_t end, float t, std::vector<int32_t>& out) {
  const ops::vec vt = ops::set1(t);
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (uint32_t k = ops::at_least(ops::load(x + i), vt); k != 0; k &= k - 1) {
      out.push_back(static_cast<int32_t>(i) + __builtin_ctz(k));
    }
  }
  for (; i < end; ++i) {
    if (x[i] >= t) out.push_back(static_cast<int32_t>(i));
  }
}

void weights_at(const float* x, const int32_t* ids, size_t m, float max, float inv_t, float* out) {
  const ops::vec vmax = ops::set1(max), vt = ops::set1(inv_t);
  size_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    ops::store(out + i, ops::exp(ops::mul(ops::sub(ops::gather(x, ids + i), vmax), vt)));
  }
  for (; i < m; ++i) out[i] = weight_fma((x[ids[i]] - max) * inv_t);
}
