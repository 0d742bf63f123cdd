// The tokens a sampler may draw from after truncation, with their unnormalised weights
// (w = exp((x - max) / T) of the processed logits), in one of three forms:
//
//   point    one token (greedy, or a single usable token): drawing it takes no random number
//   dense    the whole row: w(x) = weight_of((x - max) * inv_t) of each usable logit (0 for
//            the rest), computed when needed; the block sums (engine/sampling/row_kernels.h,
//            rescaled to the row's maximum) are added per group of 64 blocks (4,096 tokens),
//            and the mass is the sum of the group sums
//   sparse   the kept ids in increasing order with their weights
//
// A draw is the inverse CDF in id order: with r = u * mass, the first token whose running
// weight exceeds r. The dense form finds its group, then its block, then its token, so a
// draw reads about 64 + 64 + 64 numbers instead of the row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem::sampling {

inline constexpr size_t kGroupBlocks = 64;

class kept_tokens {
 public:
  enum class form { empty, point, dense, sparse };

  form shape() const { return form_; }
  bool empty() const { return form_ == form::empty; }
  // Exactly one token can be drawn without a random number (the point form).
  bool is_point() const { return form_ == form::point; }
  int32_t point_token() const { return point_; }
  double mass() const { return mass_; }
  // The token's weight (0 for a token not kept); the point form's token weighs 1.
  float weight(int32_t token) const;
  // The token's probability under the renormalised distribution.
  double prob(int32_t token) const { return mass_ > 0.0 ? weight(token) / mass_ : 0.0; }
  // u in [0, 1): the inverse-CDF draw; -1 when empty.
  int32_t draw(double u) const;
  // A draw from the distribution without `token` (renormalised); `token` itself when
  // nothing else has weight.
  int32_t draw_excluding(int32_t token, double u) const;
  // The kept ids (sparse: in increasing order); the dense form lists every id below n.
  size_t size() const;

  // --- filled by the sampler -------------------------------------------------------------
  void set_empty();
  void set_point(int32_t token);
  // The row (kept alive by the caller), its maximum, 1 / T and one sum per block.
  void set_dense(std::span<const float> row, float max, float inv_t, std::span<const float> block_sums);
  // ids increasing; weights[i] belongs to ids[i].
  void set_sparse(std::span<const int32_t> ids, std::span<const float> weights);

  std::span<const int32_t> sparse_ids() const { return ids_; }
  std::span<const float> sparse_weights() const { return w_sparse_; }

 private:
  // The draw at r in [0, mass) (clamped), skipping `skip` (-1: none) whose weight w_skip is
  // already taken out of r's range.
  int32_t walk(double r, int32_t skip) const;

  form form_ = form::empty;
  int32_t point_ = -1;
  double mass_ = 0.0;
  size_t n_ = 0;
  std::span<const float> row_;         // dense
  float max_ = 0.0f, inv_t_ = 1.0f;    // dense
  std::span<const float> block_sums_;  // dense, [blocks]
  std::vector<double> group_sums_;     // [groups of kGroupBlocks blocks]
  std::vector<int32_t> ids_;           // sparse
  std::vector<float> w_sparse_;        // sparse
};

}  // namespace tandem::sampling
