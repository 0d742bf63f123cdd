// One generation request on an HTTP session (POST /v1/chat/completions, /v1/completions,
// /v1/responses), read by generation_request.h, answered here: a JSON answer once it is
// finished (routes.h: generation_reply), or an SSE stream. Events arrive as handlers on the
// session's strand and are framed as HTTP chunks right there when the socket takes them; what
// it cannot take waits for the session's coroutine, which owns every asynchronous write (each
// with its own timeout, so a reader that stops reading is dropped instead of growing memory).
// While it runs, a watcher reads what the client sends: a read error means the client is gone,
// and the generation is cancelled at once (its KV blocks freed); end of stream is a
// half-close, which is legal: the answer is still written (a client that closed altogether is
// found by the failed writes of a stream).
#pragma once

#include <memory>

#include "net/openai/openai_request.h"
#include "net/http/session_io.h"

namespace tandem::net {

// Fills `out` with the response still to write (with streamed set, the stream has been
// written already and `out` only says whether to keep the connection). References, not
// values: GCC 12 can destroy by-value coroutine arguments built in a co_await twice.
// `pipelined` is the session's read buffer: bytes that arrive while the generation runs (the
// next request of a pipelining client) are kept there, up to its limit.
// Compiled for both streams (session_io.h).
template <class Stream>
asio::awaitable<void> serve_generation(Stream& stream, beast::flat_buffer& pipelined, http_request& req, api_kind kind,
                                       const std::shared_ptr<server_context>& ctx, bool& streamed,
                                       string_response& out);
extern template asio::awaitable<void> serve_generation<plain_stream>(plain_stream&, beast::flat_buffer&, http_request&,
                                                                     api_kind, const std::shared_ptr<server_context>&,
                                                                     bool&, string_response&);
extern template asio::awaitable<void> serve_generation<tls_stream>(tls_stream&, beast::flat_buffer&, http_request&,
                                                                   api_kind, const std::shared_ptr<server_context>&,
                                                                   bool&, string_response&);

}  // namespace tandem::net
