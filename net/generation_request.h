// A generation request read into what runs it (POST /v1/chat/completions, /v1/completions and
// /v1/responses; the WebSocket's start frames share the context): the chat or completion
// request, the format its answer is written in, and the job's context (id, model name, time).
// Parsing only: what runs the job and writes its answer is sse_stream.h.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "net/generation_job.h"
#include "net/openai/openai_request.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

struct generation_plan {
  api_request req;
  job_format format = job_format::chat_json;
  job_context ctx;
  // The runtime that serves it, held until the job is gone (a server of several models
  // unloads none that a request holds; net/await_actor.h's acquire_model).
  std::shared_ptr<const runtime> rt;
};

// The context of a chat or completion request answered under `id`; a request that names no
// model gets the served model's name.
job_context completion_context(api_request& req, server_context& ctx, const runtime& rt, std::string id);

// An HTTP generation request's body (throws api_error 400 naming the field), and the runtime
// its `model` names (throws acquire_model's errors: 401, 404, 503, ...). A Responses API
// continuation first finds its predecessor, which only the caller's tenant (`key`'s) can
// see (throws api_error 401 or 404). References: GCC 12 can destroy by-value coroutine
// arguments built in a co_await twice.
boost::asio::awaitable<void> read_generation_request(const std::string& body, const std::string& key, api_kind kind,
                                                     const std::shared_ptr<server_context>& ctx, generation_plan& out);

}  // namespace tandem::net
