// One generation request on an HTTP session (POST /v1/chat/completions, /v1/completions):
// a JSON answer, or an SSE stream. Events arrive as handlers on the session's strand and
// are framed as HTTP chunks right there when the socket takes them; what it cannot take
// waits for the session's coroutine, which owns every asynchronous write (each with its own
// timeout, so a reader that stops reading is dropped instead of growing memory). While it
// runs, a watcher waits for the socket to turn readable: end of stream means the client is
// gone, and the generation is cancelled at once (its KV blocks freed).
#pragma once

#include <memory>

#include "net/openai_request.h"
#include "net/session_io.h"

namespace tandem::net {

// Fills `out` with the response still to write (with streamed set, the stream has been
// written already and `out` only says whether to keep the connection). References, not
// values: GCC 12 can destroy by-value coroutine arguments built in a co_await twice.
asio::awaitable<void> serve_generation(beast::tcp_stream& stream, http_request& req, api_kind kind,
                                       const std::shared_ptr<server_context>& ctx, bool& streamed,
                                       string_response& out);

}  // namespace tandem::net
