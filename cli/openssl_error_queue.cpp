// OpenSSL's I/O calls, each with the calling thread's error queue emptied first.
//
// OpenSSL reads SSL_get_error() from the thread's error queue: an entry left there by an
// earlier failure turns the next call's "would block" into SSL_ERROR_SSL, so the caller must
// empty the queue before each SSL_read, SSL_write, SSL_accept or SSL_connect. CAF 0.17's
// OpenSSL module (the router-node link) does not: a refused handshake (a peer of another CA,
// a plain client, junk on the node port) leaves its error on the one thread that runs every
// connection of the process, and the next healthy read that has to wait is taken for a failure,
// which closes a healthy link. Asio (the HTTP front) already empties the queue itself.
//
// The process therefore defines these four symbols: the dynamic linker resolves libcaf_openssl's
// calls to the executable's definitions first, and each one empties the queue and calls
// libssl's own function (dlsym RTLD_NEXT). The queue holds only what the call just made, which
// is what SSL_get_error() expects. This file is linked into the `tandem` executable; a host
// that embeds a router or node with its own OpenSSL manager links it into its executable too
// (docs/cluster.md). tests/python/test_cluster.py floods a node's TLS port with refused
// handshakes while a stream runs over the link and checks the link is never dropped.
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <typename Fn>
Fn libssl(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    // Only possible if libssl is not loaded at all, in which case nothing could have called us.
    std::fprintf(stderr, "tandem: %s not found in libssl\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto real = libssl<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto real = libssl<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static const auto real = libssl<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static const auto real = libssl<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

}  // extern "C"
