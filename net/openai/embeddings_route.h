// POST /v1/embeddings, /v1/rerank and /rerank on a session's strand: the body is checked
// (embeddings_request.h), the runtime its `model` names is acquired (await_actor.h), the
// request is submitted to admission through a request sink (request_sink.h), and the vectors
// are gathered as the sink's events are posted back to the strand; then the JSON answer. The
// session never blocks: it sleeps on a strand signal between events.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "net/routes.h"

namespace tandem::net {

struct server_context;

// Fills `out` with the answer (an error reply for a refused or failed request). `key`: the
// caller's API key. The body's `model` picks the runtime in a server of several models
// (acquire_model, held until the vectors are in; a server of one serves every name). Throws
// api_error 400 for a body that does not parse or check, and acquire_model's errors (404 for
// an unknown model, 503 while it loads, ...).
boost::asio::awaitable<void> serve_embeddings(const std::shared_ptr<server_context>& ctx, const std::string& body,
                                              const std::string& key, bool rerank, http_reply& out);

}  // namespace tandem::net
