// How the batch queue (actors/batch_queue.h) runs one input line: the model the body's `model`
// names is acquired as a chat request's is (net/await_actor.h acquire_model: in a server of
// several, loaded on first use and held until the line is answered; an unknown model is the
// line's 404 naming the models, a model still loading past the bound a 503, run again later),
// and the body is read as the endpoint's OpenAI request (net/openai/openai_request.h), forced to stream: false and
// priority kBatchPriority, and submitted to admission with the batch tenant's key, as the
// HTTP path submits a request (so it counts against the tenant's limits). The answer is the
// status and JSON body that endpoint would have given; a refusal admission may lift later
// (429, 503) is answered as retry. Parsing and the job's events run on the server's work
// pool (a strand of it), never on the network threads.
#pragma once

#include <memory>

#include "actors/batch_queue.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

// `rt` outlives the runner's calls (the server's runtime; with several models the default
// one's), whose tenants give each batch's key; `ctx` is held weakly: a call after the server
// is gone answers retry.
batch_runner make_batch_runner(std::weak_ptr<server_context> ctx, const runtime& rt);

}  // namespace tandem::net
