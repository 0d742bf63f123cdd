#include "net/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <stdexcept>
#include <string>

namespace tandem::net {
namespace asio = boost::asio;
namespace {

// OpenSSL's error queue as one line (and emptied), or what Asio said.
std::string openssl_reason(const boost::system::error_code& ec) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? ec.message() : out;
}

void check(const boost::system::error_code& ec, const std::string& flag, const std::string& path) {
  if (ec) throw std::runtime_error(flag + " " + path + ": " + openssl_reason(ec));
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const server_options& o) {
  if (!o.tls()) {
    if (!o.ssl_ca_certs.empty() || o.ssl_cert_reqs != 0) {
      throw std::runtime_error("--ssl-ca-certs and --ssl-cert-reqs need TLS: give --ssl-certfile and --ssl-keyfile");
    }
    return nullptr;
  }
  if (o.ssl_certfile.empty() || o.ssl_keyfile.empty()) {
    throw std::runtime_error("TLS needs both --ssl-certfile and --ssl-keyfile (" +
                             std::string(o.ssl_certfile.empty() ? "--ssl-certfile" : "--ssl-keyfile") + " is missing)");
  }
  if (o.ssl_cert_reqs < 0 || o.ssl_cert_reqs > 2) {
    throw std::runtime_error("--ssl-cert-reqs must be 0 (none), 1 (optional) or 2 (required), got " +
                             std::to_string(o.ssl_cert_reqs));
  }
  if (o.ssl_cert_reqs != 0 && o.ssl_ca_certs.empty()) {
    throw std::runtime_error("--ssl-cert-reqs " + std::to_string(o.ssl_cert_reqs) +
                             " needs --ssl-ca-certs: the CAs client certificates are verified against");
  }
  ERR_clear_error();
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                       asio::ssl::context::single_dh_use | asio::ssl::context::no_compression,
                   ec);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  // Renegotiation costs the server a handshake each time the client asks (a cheap flood).
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  ctx->use_certificate_chain_file(o.ssl_certfile, ec);
  check(ec, "--ssl-certfile", o.ssl_certfile);
  ctx->use_private_key_file(o.ssl_keyfile, asio::ssl::context::pem, ec);
  if (ec && ec.category() == asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    ERR_clear_error();
    throw std::runtime_error("--ssl-keyfile " + o.ssl_keyfile + " is not the key of --ssl-certfile " + o.ssl_certfile);
  }
  check(ec, "--ssl-keyfile", o.ssl_keyfile);
  if (SSL_CTX_check_private_key(native) != 1) {
    throw std::runtime_error("--ssl-keyfile " + o.ssl_keyfile + " is not the key of --ssl-certfile " + o.ssl_certfile +
                             ": " + openssl_reason({}));
  }
  if (!o.ssl_ca_certs.empty()) {
    ctx->load_verify_file(o.ssl_ca_certs, ec);
    check(ec, "--ssl-ca-certs", o.ssl_ca_certs);
    // The CA names go out in the CertificateRequest, so a client with several certificates
    // can pick the right one.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ssl_ca_certs.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
    ERR_clear_error();
  }
  switch (o.ssl_cert_reqs) {
    case 0:
      ctx->set_verify_mode(asio::ssl::verify_none);
      break;
    case 1:
      ctx->set_verify_mode(asio::ssl::verify_peer);
      break;
    default:
      ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
      break;
  }
  // Resumed sessions must know which context verified them (OpenSSL refuses them otherwise
  // once client certificates are verified).
  static constexpr unsigned char kSessionContext[] = "tandem";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  return ctx;
}

}  // namespace tandem::net
