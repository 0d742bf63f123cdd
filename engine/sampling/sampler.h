// Picks the next token from a row of logits. Runs where the logits are (inside the device
// worker's step), so only token ids and a few log-probabilities leave it.
//
// Order of operations, as in vLLM / the OpenAI API:
//   1. logit bias (added; -inf bans a token)
//   2. penalties over the history: repetition (divide positive logits, multiply negative
//      ones), presence (subtract once if the token occurred), frequency (subtract per count)
//   3. temperature <= 0: greedy argmax (lowest id on ties); otherwise logits / temperature
//   4. top-k, then top-p (smallest set whose probability reaches p), then min-p (drop tokens
//      below min_p * the top probability), all on the tempered distribution: each keeps a
//      prefix of the order (logit descending, id ascending), and the shortest one stays
//   5. draw from the renormalised survivors with the sampler's own generator (seeded:
//      the same seed and inputs give the same tokens on every machine): the inverse CDF
//      over the survivors in id order, one uniform number per draw
// Log-probabilities (of the chosen token and the top-N) are those of the raw logits, the
// model's own distribution, like vLLM's default.
//
// Cost: bias and penalties touch only their tokens (a copy of the row is made when there
// are any); temperature sampling reads the row twice (maximum, then weights and their block
// sums, vectorised: engine/sampling/row_kernels.h) and draws by walking block sums;
// top-k and top-p sort only a few candidates (engine/sampling/truncation.h). Scratch space
// is per thread, so the sequences of a batch can be sampled in parallel, each sampler with
// its own random stream: the tokens do not depend on which thread samples which sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampling/kept_tokens.h"

namespace tandem {

struct sampling_params {
  float temperature = 1.0f;         // <= 0: greedy
  int32_t top_k = 0;                // <= 0 or >= vocabulary: off
  float top_p = 1.0f;               // >= 1: off
  float min_p = 0.0f;               // <= 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::unordered_map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;      // none: seeded from std::random_device
  std::vector<int32_t> stop_tokens;  // e.g. end-of-generation ids
  bool logprobs = false;             // report the chosen token's logprob (a log-softmax pass)
  int32_t top_logprobs = 0;          // how many alternatives to report (0: none)
};

struct token_logprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// One surviving candidate of the distribution a sampler draws from.
struct token_prob {
  int32_t token = -1;
  float prob = 0.0f;
};

// The index of the first maximum of x (greedy decoding's token), -1 when every entry is -inf
// or NaN (NaN never compares greater). Vectorised: it runs over the whole vocabulary.
int32_t first_max(std::span<const float> x);

struct sample_result {
  int32_t token = -1;              // -1 when every token was masked out (see sample())
  float logprob = 0.0f;            // of `token` under the raw logits (with logprobs/top_logprobs)
  bool is_stop = false;            // token is one of the stop tokens
  std::vector<token_logprob> top;  // top_logprobs entries, most likely first
};

// Log-probabilities as OpenAI and vLLM report them: the log-softmax of the raw row
// (temperature 1, before bias, penalties and truncation) at `token`; with want_rank its rank
// (1 + the tokens ranked above it: larger logit, then smaller id); and the row's top_n tokens
// with theirs, most likely first (unusable tokens last, by id). A row with no usable value
// gives -inf. Uses this thread's sampling scratch space.
struct row_logprobs {
  float logprob = 0.0f;
  int32_t rank = 0;  // 0 unless asked for
  std::vector<token_logprob> top;
};
row_logprobs logprobs_of(std::span<const float> logits, int32_t token, int32_t top_n, bool want_rank = false);

class sampler {
 public:
  explicit sampler(sampling_params params);

  const sampling_params& params() const { return params_; }

  // history: the sequence's tokens so far (prompt and generated) for the penalties.
  // If bias makes every logit -inf (or the logits are all NaN / -inf), returns token -1:
  // nothing can be sampled, and the caller ends the sequence.
  sample_result sample(std::span<const float> logits, std::span<const int32_t> history = {});

  bool is_stop(int32_t token) const;

  // The distribution sample() draws from: steps 1-4 above (bias, penalties, temperature,
  // top-k, top-p, min-p), as the surviving tokens with renormalised probabilities, most
  // likely first. Greedy gives a point mass on the argmax; everything masked gives an empty
  // list. Speculative decoding compares this with the drafter's distribution. The result is
  // valid until the next call on this sampler.
  const std::vector<token_prob>& distribution(std::span<const float> logits, std::span<const int32_t> history = {});
  // Draws one token of `dist` (-1 if empty) with this sampler's random stream; a point mass
  // draws nothing from the stream.
  int32_t draw(std::span<const token_prob> dist);
  // The next number of the sampler's stream, uniform in [0, 1), 53 random bits.
  double uniform();

  // Steps 1-4 without listing the survivors: distribution() as weights in this thread's
  // scratch space, valid until this thread prepares again (with any sampler). sample() is
  // prepare() then one draw; speculative acceptance queries and draws from it directly.
  const sampling::kept_tokens& prepare(std::span<const float> logits, std::span<const int32_t> history = {});
  // One draw from a prepared distribution with this sampler's stream (none for a point).
  int32_t draw(const sampling::kept_tokens& kept);

 private:
  sampling_params params_;
  uint64_t state_;                // splitmix64 state: tiny, portable, reproducible
  std::vector<token_prob> dist_;  // distribution()'s result
};

}  // namespace tandem
