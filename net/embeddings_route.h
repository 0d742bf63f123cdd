// POST /v1/embeddings, /v1/rerank and /rerank on a session's strand: the body is checked
// (embeddings_request.h), submitted to admission through a request sink (request_sink.h),
// and the vectors are gathered as the sink's events are posted back to the strand; then the
// JSON answer. The session never blocks: it sleeps on a strand signal between events.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "net/routes.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

// Fills `out` with the answer (an error reply for a refused or failed request). `key`: the
// caller's API key. Throws api_error 400 for a body that does not parse or check.
boost::asio::awaitable<void> serve_embeddings(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                              const std::string& body, const std::string& key, bool rerank,
                                              http_reply& out);

}  // namespace tandem::net
