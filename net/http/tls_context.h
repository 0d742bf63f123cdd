// The server's TLS settings as an Asio SSL context (OpenSSL), built once before the listener
// opens: the certificate chain and its key, TLS 1.2 at least, no renegotiation, and for client
// certificates the CA bundle and how strictly they are asked for. Every mistake in the files or
// the flags is a std::runtime_error naming the flag, so `serve` fails before it listens.
#pragma once

#include <memory>

#include "net/server.h"

namespace boost::asio::ssl {
class context;
}

namespace tandem::net {

// Null when the options ask for no TLS (no --ssl-certfile / --ssl-keyfile).
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const server_options& o);

}  // namespace tandem::net
