// A Responses API request made ready to run: translated into the chat request
// (responses_request.h), continued from its stored predecessor, with the id, the echo fields
// and the store's keep hook the job's events need (generation_job.h, responses_events.h).
// Shared by POST /v1/responses and the WebSocket mode.
#pragma once

#include <functional>

#include "actors/responses/response_shelf.h"
#include "net/generation_job.h"
#include "net/openai/responses_request.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

struct prepared_response {
  api_request req;
  job_context ctx;
};

// `previous`: the stored response named by previous_response_id (id "" when none was named).
// keep_local (the WebSocket mode): also gets the finished response, stored or not (store:
// false included), for the connection's own continuation.
prepared_response prepare_response(const responses_request& r, const stored_response& previous, server_context& ctx,
                                   const runtime& rt, std::function<void(stored_response)> keep_local = {});

}  // namespace tandem::net
