// The router-node link over TLS with mutual certificates (docs/cluster.md, "TLS on the node
// link"): the router connects through CAF's OpenSSL module, and a node's port is Tandem's own
// TLS front (net/http/node_tls_front.h) before the gate. Both sides present a certificate and
// accept only a peer whose certificate chains to the cluster's CA.
#pragma once

#include <caf/fwd.hpp>
#include <caf/expected.hpp>
#include <cstdint>
#include <string>

namespace tandem::cli {

struct cluster_tls_options {
  std::string certfile;  // this process's certificate chain (PEM)
  std::string keyfile;   // its private key (PEM, unencrypted)
  std::string cafile;    // the CA a peer's certificate must chain to (PEM)
  bool enabled() const { return !certfile.empty() || !keyfile.empty() || !cafile.empty(); }
};

// Checks the three files with OpenSSL now (all three given, readable, the key matching the
// certificate), so a bad one stops `tandem serve` at start instead of failing every join;
// then loads CAF's OpenSSL module with them. Throws std::runtime_error naming the problem.
void enable_cluster_tls(caf::actor_system_config& cfg, const cluster_tls_options& o);

}  // namespace tandem::cli
