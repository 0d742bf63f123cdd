// Tandem's network front: an HTTP/1.1 server (OpenAI-compatible API with SSE streaming,
// /tokenize, /detokenize, /health, /metrics, the chat page) and a WebSocket endpoint, on
// Boost.Beast and Asio. It can listen before the model is loaded: /health answers 503 and
// the API 503 until attach() hands it the runtime.
//
//   http_server srv(sys, opts);
//   srv.start();                 // binds (port 0 = a free port), starts the io threads
//   srv.attach(*rt);             // the model is ready
//   srv.wait_for_signal();       // SIGINT / SIGTERM
//   srv.stop_accepting(); rt->stop(grace); srv.wait_for_answers(limit);  // a graceful end
//   srv.stop();
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/response_store_limits.h"

namespace tandem {
class runtime;
class model_catalog;  // models/model_catalog.h (in-tree: `tandem serve` with several models)
}

namespace tandem::net {

struct server_options {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  int io_threads = 1;
  std::string served_model_name = "default";
  std::string chat_page_path;                 // examples/chat/index.html; empty = no page at /
  size_t max_body_bytes = 1 << 20;            // larger bodies: 413
  size_t max_header_bytes = 16 << 10;         // larger headers: 431
  uint32_t max_connections = 1024;            // more are closed at once
  std::chrono::seconds request_timeout{30};   // to receive one whole request (idle keep-alive included)
  std::chrono::seconds write_timeout{30};     // for one write to drain to a slow reader
  int send_buffer_bytes = 0;                  // SO_SNDBUF per connection; 0 = the kernel's (autotuned)
  size_t max_pending_output_bytes = 1 << 20;  // per WebSocket: reads pause above this
  uint32_t max_generations_per_socket = 64;   // concurrent choices of generations on one WebSocket
  uint32_t max_connections_per_address = 0;   // 0 = min(max_connections, max(8, max_connections / 4))
  std::chrono::seconds ws_idle_timeout{60};   // a WebSocket with nothing running closes after this
  std::chrono::seconds ws_auth_timeout{5};    // with tenants: the first frame must authenticate by then
  // Web origins allowed to use the server from a browser (WebSocket upgrades with an Origin
  // header, and in open mode the Host header): "*" = any. Same-origin and clients that send
  // no Origin always pass.
  std::vector<std::string> allowed_origins;
  std::string metrics_api_key;   // set: GET /metrics needs "Authorization: Bearer KEY"
  uint32_t stream_interval = 1;  // tokens per streamed event (generate_request)
  // How requests are read (generate_request's fields of the same names):
  bool prompt_special_tokens = true;  // raw prompts may hold control tokens (--plain-text-prompts: no)
  bool parse_reasoning = true;        // thinking sections -> reasoning_content (--reasoning-parser none: no)
  std::string tool_call_parser;       // the tool-call syntax ("" = the template's; --tool-call-parser)
  // The Responses API's stored responses, per tenant (--responses-store-*; actors/responses/response_store.h).
  response_store_limits responses_store;
  // TLS (net/http/tls_context.h; vLLM's flag names): with a certificate and its key every connection
  // speaks HTTPS / WSS; without, plain HTTP. Client certificates: ssl_cert_reqs 0 none, 1 asked
  // for and verified when given, 2 required; both 1 and 2 verify against ssl_ca_certs.
  std::string ssl_keyfile;   // PEM private key
  std::string ssl_certfile;  // PEM certificate chain, the server's first
  std::string ssl_ca_certs;  // PEM CA bundle that client certificates must chain to
  int ssl_cert_reqs = 0;
  std::chrono::seconds ssl_handshake_timeout{10};  // a handshake not done by then: closed
  bool tls() const { return !ssl_certfile.empty() || !ssl_keyfile.empty(); }
};

struct server_context;

class http_server {
 public:
  http_server(caf::actor_system& sys, server_options opts);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  void start();                    // throws std::runtime_error when it cannot bind
  uint16_t port() const;           // the bound port
  void attach(const runtime& rt);  // from now on requests are served
  // Before start(): a server of several models. Generation requests acquire the runtime their
  // `model` names from `catalog`; attach() then gives the default model's runtime, which must
  // stay loaded (the routes that name no model use it).
  void set_model_catalog(std::shared_ptr<model_catalog> catalog);
  void wait_for_signal();          // blocks until SIGINT or SIGTERM
  void stop_accepting();           // closes the listener; sessions go on
  // Waits until no generation is being answered (the last events written), at most `limit`.
  void wait_for_answers(std::chrono::milliseconds limit);
  void stop();  // stops accepting and the io threads

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tandem::net
