// The API's sampling_options as the engine sampler's sampling_params (both device workers).
#pragma once

#include "engine/sampling/sampler.h"
#include "tandem/api.h"

namespace tandem {

inline sampling_params sampling_params_from(const sampling_options& o) {
  sampling_params p;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.min_p = o.min_p;
  p.repetition_penalty = o.repetition_penalty;
  p.presence_penalty = o.presence_penalty;
  p.frequency_penalty = o.frequency_penalty;
  for (size_t i = 0; i < o.logit_bias_ids.size() && i < o.logit_bias_values.size(); ++i) {
    p.logit_bias[o.logit_bias_ids[i]] = o.logit_bias_values[i];
  }
  if (o.seed >= 0) p.seed = static_cast<uint64_t>(o.seed);
  p.logprobs = o.logprobs;
  p.top_logprobs = o.logprobs ? o.top_logprobs : 0;
  return p;
}

}  // namespace tandem
