// How the batch queue (actors/batch_queue.h) runs one input line: the line's body is read as
// the endpoint's OpenAI request (net/openai_request.h), forced to stream: false and
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

// `rt` outlives the runner's calls (the server's runtime); `ctx` is held weakly: a call after
// the server is gone answers retry.
batch_runner make_batch_runner(std::weak_ptr<server_context> ctx, const runtime& rt);

}  // namespace tandem::net
