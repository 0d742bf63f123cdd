// A cluster node's port over TLS (--cluster-tls-*): Tandem terminates the TLS itself and hands
// each verified connection's bytes to the node gate's plain BASP port on loopback.
//
//   router (CAF's OpenSSL client) --TLS, mutual certificates--> node_tls_front (--node-port)
//       --plain BASP, 127.0.0.1--> the gate CAF publishes on loopback only
//
// Why not CAF 0.17's OpenSSL acceptor: while a connection's handshake is unfinished, CAF polls
// it for writing (its BASP greeting is queued) and OpenSSL answers "want read" as success, so
// a single silent TCP connection spins a core for as long as it stays open; and a refused
// handshake's error stays on OpenSSL's queue (cli/openssl_error_queue.cpp). Here a handshake
// has a deadline, handshakes in progress are capped (in all and per address), and no byte
// reaches CAF before the peer's certificate chained to the cluster's CA. The shared secret is
// still checked by the gate behind it.
//
// One thread of its own; every socket and counter is touched on it only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace tandem::net {

struct node_tls_options {
  std::string host;                       // where the front listens (--node-host)
  uint16_t port = 0;                      // --node-port; 0 picks a free one
  std::string certfile, keyfile, cafile;  // --cluster-tls-certfile, -keyfile, -ca
  uint16_t backend_port = 0;              // the gate's plain BASP port on 127.0.0.1
  std::chrono::seconds handshake_timeout{10};
  uint32_t max_handshakes = 32;  // in progress at once; more are closed unanswered
  uint32_t max_handshakes_per_address = 4;
  uint32_t max_links = 64;  // established links (routers reconnect; a cluster has few)
};

class node_tls_front {
 public:
  // Listens before it returns. Throws std::runtime_error naming the flag at fault (a bad
  // certificate, key or CA file; a port in use).
  explicit node_tls_front(node_tls_options o);
  ~node_tls_front();  // closes the port and every link, then joins its thread
  node_tls_front(const node_tls_front&) = delete;
  node_tls_front& operator=(const node_tls_front&) = delete;

  uint16_t port() const;

  struct impl;  // opaque: the Asio state, in the .cpp

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace tandem::net
