// What the AVX-512 tiled kernels (layouts in tiled_weights.h: 16 rows per register, one token
// per FMA) of dot_avx512_tiled.cpp and dot_avx512_tiled_k.cpp share, included after
// dot_avx512.inl inside their anonymous namespace.

inline __m512i broadcast_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The eight lane accumulators of 16 rows folded as hsum folds: (0+4, 2+6, 1+5, 3+7), then pairs.
inline __m512 fold_lanes(const __m512* v) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                       _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
}

// The next tile into L2 (prefetcht1) while the kernel reads this one, spread over its block
// iterations so that only a few lines are in flight at once and the compute runs while they
// arrive (asking for a whole tile at once stalls the core until the miss queue drains).
//
//   tile:       [ this tile ........................ | next tile ...................... ]
//   asked for:                                       [ a step's lines, then the next ... ]
//
// A null `next` asks for nothing (the last tile, and steps the hardware prefetcher serves).
class tile_prefetch {
 public:
  tile_prefetch(const std::byte* next, size_t bytes, int64_t iterations)
      : at_(next),
        end_(next == nullptr ? nullptr : next + bytes),
        lines_per_step_(next == nullptr ? 0 : ((bytes + 63) / 64 + iterations - 1) / iterations) {}
  void step() {
    for (size_t i = 0; i < lines_per_step_ && at_ < end_; ++i, at_ += 64) __builtin_prefetch(at_, 0, 2);
  }

 private:
  const std::byte* at_;
  const std::byte* end_;
  size_t lines_per_step_;
};

// N tokens of a tile in groups that share each unpacked piece: kernel<G>(tokens t..t+G) for
// G = 4, 2, 1, each token's activation row seen as Act. A step of one group reads the tile
// once, forward (these types' records are laid out in reading order, tiled_layout.h), and
// asks for no software prefetch: on a Zen 4 core the hardware prefetcher streams such reads
// 15-25% faster than prefetcht1 4 KiB or a tile ahead does (bench/matmul_bench, streamed;
// and Q8_0, Q5_0 and Q4_1 likewise since 2026-12-06: dot_avx512_tiled.cpp). A step of more
// groups reads the tile again per group and asks for the next tile while it computes:
// `steps` times per record (once per piece each kernel unpacks), so a 2-3 KB K-quant record
// does not ask for its share in one burst.
template <int N, class Act, class Kernel>
void tiled_token_groups(int64_t nb, const std::byte* acts, size_t act_stride, float* y, int64_t y_stride,
                        const std::byte* next_tile, size_t record_bytes, int steps, const Kernel& kernel) {
  const Act* a[N];
  for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const Act*>(acts + t * act_stride);
  constexpr int groups = N / 4 + (N % 4) / 2 + N % 2;
  tile_prefetch prefetch(groups == 1 ? nullptr : next_tile, static_cast<size_t>(nb) * record_bytes,
                         nb * groups * steps);
  int t = 0;
  for (; t + 4 <= N; t += 4) kernel(std::integral_constant<int, 4>{}, a + t, y + t * y_stride, prefetch);
  if (t + 2 <= N) {
    kernel(std::integral_constant<int, 2>{}, a + t, y + t * y_stride, prefetch);
    t += 2;
  }
  if (t < N) kernel(std::integral_constant<int, 1>{}, a + t, y + t * y_stride, prefetch);
}
