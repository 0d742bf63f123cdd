// A host CAF application that embeds Tandem and serves it over HTTP too (Tandem::net): the
// OpenAI-compatible API, SSE and the WebSocket on 127.0.0.1, in the host's own actor system,
// beside whatever else its actors do. SIGINT or SIGTERM stops it gracefully.
//
//   embed_http [MODEL] [PORT]        (MODEL: a GGUF path or "default"; PORT 0 = a free one)
//
// It listens before the model is loaded (/health says 503 until attach), as `tandem serve` does.
#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "tandem/net/server.h"
#include "tandem/runtime.h"
#include "tandem/version.h"

int main(int argc, char** argv) {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};

  tandem::runtime_config rc;
  if (argc > 1) rc.model = argv[1];
  rc.kv_cache_tokens = 8192;
  tandem::net::server_options so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.served_model_name = "embedded";
  try {
    if (argc > 2) so.port = static_cast<uint16_t>(std::stoul(argv[2]));
    std::unique_ptr<tandem::runtime> rt;  // declared first: outlives the server, which serves from it
    tandem::net::http_server server(sys, so);
    server.start();
    rt = tandem::runtime::start(sys, rc);
    server.attach(*rt);
    std::printf("embed_http: Tandem %s serving on http://127.0.0.1:%u\n", TANDEM_VERSION_STRING, server.port());
    std::fflush(stdout);
    server.wait_for_signal();
    // A graceful end, as `tandem serve` does it: no new connections or requests, those
    // running finish within 30 s (then are cancelled), their last events are written.
    server.stop_accepting();
    rt->stop(std::chrono::seconds(30));
    server.wait_for_answers(std::chrono::seconds(5));
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_http: %s\n", e.what());
    return 1;
  }
  std::printf("embed_http: stopped\n");
  return 0;
}
