#include "cli/cmd_cluster_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/all.hpp>
#include <memory>
#include <stdexcept>

#ifdef TANDEM_HAVE_CAF_OPENSSL
#include <caf/openssl/all.hpp>
#endif

namespace tandem::cli {
namespace {

std::string openssl_error() {
  char buf[256] = "";
  if (const unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

// The same calls CAF's session makes for each connection, once, here.
void check_files(const cluster_tls_options& o) {
  if (o.certfile.empty() || o.keyfile.empty() || o.cafile.empty()) {
    throw std::runtime_error(
        "--cluster-tls-certfile, --cluster-tls-keyfile and --cluster-tls-ca go together (mutual TLS needs all three)");
  }
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx) throw std::runtime_error("--cluster-tls-*: cannot create an OpenSSL context");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.certfile.c_str()) != 1) {
    throw std::runtime_error("--cluster-tls-certfile " + o.certfile + ": " + openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.keyfile.c_str(), SSL_FILETYPE_PEM) != 1) {
    throw std::runtime_error("--cluster-tls-keyfile " + o.keyfile + ": " + openssl_error());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw std::runtime_error("--cluster-tls-keyfile " + o.keyfile + " does not match --cluster-tls-certfile");
  }
  if (SSL_CTX_load_verify_locations(ctx.get(), o.cafile.c_str(), nullptr) != 1) {
    throw std::runtime_error("--cluster-tls-ca " + o.cafile + ": " + openssl_error());
  }
}

}  // namespace

#ifdef TANDEM_HAVE_CAF_OPENSSL

void enable_cluster_tls(caf::actor_system_config& cfg, const cluster_tls_options& o) {
  check_files(o);
  cfg.openssl_certificate = o.certfile;
  cfg.openssl_key = o.keyfile;
  cfg.openssl_cafile = o.cafile;  // set: CAF requires and verifies a certificate on both sides
  cfg.load<caf::openssl::manager>();
}

#else

void enable_cluster_tls(caf::actor_system_config&, const cluster_tls_options& o) {
  check_files(o);
  throw std::runtime_error("--cluster-tls-*: this build has no CAF OpenSSL module (libcaf_openssl)");
}

#endif

}  // namespace tandem::cli
