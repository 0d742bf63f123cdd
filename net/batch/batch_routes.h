// The Batch API's HTTP routes (OpenAI's shapes, so the openai SDK's files and batches clients
// work unchanged); the state is the batch_queue actor's (actors/batch_queue.h):
//
//   POST /v1/files                  multipart: purpose "batch", file (JSONL) -> file object
//   GET  /v1/files                  the caller's files, newest first (?purpose=&limit=&after=)
//   GET  /v1/files/{id}             file object        DELETE /v1/files/{id}: deleted
//   GET  /v1/files/{id}/content     the file's bytes (an input, a batch's output or errors)
//   POST /v1/batches                {input_file_id, endpoint, completion_window "24h", metadata}
//   GET  /v1/batches                the caller's batches, newest first (?limit=1..100&after=id)
//   GET  /v1/batches/{id}           batch object
//   POST /v1/batches/{id}/cancel    batch object (cancelling, then cancelled)
//
// Every route first finds the caller's tenant from its key (admission, as every route does);
// a tenant sees only its own files and batches. An upload is parsed and checked on the work
// pool (ctx->work), never on the network threads. Asio only (no Beast).
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

// What a batch route needs of the HTTP request.
struct batch_http_request {
  std::string method;  // "GET", "POST", "DELETE" (HEAD as GET)
  std::string path;    // without the query
  std::string query;   // after '?', or ""
  std::string content_type;
  std::string key;   // the bearer key
  std::string body;  // moved in: an upload may be large
};

// The body limit of an upload to POST /v1/files: the file's bound plus room for the form.
uint64_t batch_upload_body_limit(const runtime& rt);
bool is_batch_upload(std::string_view method, std::string_view path);

// Spawns the batch queue once, with the first request after the model has loaded (it then
// resumes the unfinished batches in --batch-dir); later calls return at once.
void ensure_batch_queue(const std::shared_ptr<server_context>& ctx, const runtime& rt);

// Answers one of the routes above into `out`; throws api_error for the error reply.
boost::asio::awaitable<void> serve_batch_route(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                               batch_http_request& req, http_reply& out);

}  // namespace tandem::net
