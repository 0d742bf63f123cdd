// embedder actor: one per embeddings or rerank request (generate_request::embed), spawned by
// admission where a generation gets its streamer, and speaking the streamer's protocol to the
// scheduler and admission (streamer_actor: tokens, cancel).
//
//   spawn: each input -> prompt tokens (text with the model's special tokens, as
//          llama-server reads /v1/embeddings; token ids as given; rerank: the file's rerank
//          template with the query and one document, else BOS query EOS doc EOS)
//          --enqueue (sequence k = request id + k, pooling set)--> scheduler
//   scheduler --tokens(final batch with the pooled vector)--> embedder
//          --generation_delta(index k, embedding L2-normalised [and truncated]; rerank: {score})--> sink
//   every input done --> generation_done(prompt tokens) --> sink; finished --> admission; quit
//   an input that fails ends the request: the others are aborted, one error goes out
//   admission --cancel--> embedder --abort(each unfinished)--> scheduler
//
// Admission reserves the ids request id .. request id + inputs - 1 for the sequences. Each
// sequence gets a prefix-cache salt of its own (sequence_request::input_hash): a pooled
// sequence must compute every position's hidden state, so it never adopts cached blocks.
#pragma once

#include "actors/streamer.h"

namespace tandem {

using embedder_actor = streamer_actor;

// The inputs of an embeddings request (texts, or token-id lists, or rerank documents).
size_t embedding_inputs(const generate_request& req);

}  // namespace tandem
