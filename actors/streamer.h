// streamer actor: one per request. It turns the request into prompt tokens, hands the
// sequence to the scheduler, and turns the token ids that come back into text for the sink:
// incremental UTF-8-safe detokenization, stop strings held back until they can no longer
// match and cut from the output, the finish reason and the request's timings.
//
//   spawn: render chat template + tokenize --enqueue--> scheduler
//   scheduler --tokens(batch)--> streamer --generation_delta--> sink
//                                (every batch, or every stream_interval tokens; the first at once)
//   last batch (or a stop string) --> generation_done --> sink; finished --> admission; quit
//   admission --cancel--> streamer --abort--> scheduler; generation_done(abort) --> sink
#pragma once

#include <caf/all.hpp>
#include <memory>

#include "actors/atoms.h"
#include "engine/ids.h"
#include "tandem/api.h"

namespace tandem {

class tokenizer;
class chat_template;

// One scheduler -> streamer message: the tokens a sequence produced in one step.
struct token_batch {
  seq_id seq = 0;
  std::vector<token_id> tokens;
  std::vector<output_logprob> logprobs;         // parallel to tokens when requested
  std::vector<output_logprob> prompt_logprobs;  // first batch: the prompt's scores (when requested)
  bool finished = false;
  finish_reason reason = finish_reason::stop;  // with finished
  std::string error;                           // with finish_reason::error: what went wrong
  uint16_t status = 500;                       // with finish_reason::error: as HTTP says it (503: no
                                               // engine node of a cluster could take the sequence)
  uint32_t cached_tokens = 0;                  // prompt tokens found in the prefix cache (first batch)
  double queue_ms = 0;                         // first batch: time waiting before the first step
  std::vector<float> embedding;                // an embedding sequence's pooled vector (its one batch)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_batch& x) {
  return f(caf::meta::type_name("token_batch"), x.seq, x.tokens, x.logprobs, x.prompt_logprobs, x.finished, x.reason,
           x.error, x.status, x.cached_tokens, x.queue_ms, x.embedding);
}

using streamer_actor = caf::typed_actor<caf::reacts_to<tokens_atom, token_batch>, caf::reacts_to<cancel_atom>>;

}  // namespace tandem
