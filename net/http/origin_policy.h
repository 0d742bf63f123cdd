// Which requests a web page in a browser may not make (docs/security.md, threat 3), as plain
// C++ over the few headers it reads; the sessions apply it to every route and every
// WebSocket upgrade.
//
//   rule                                         applies                    refusal
//   a POST body must be application/json         always                     415 (a cross-site form
//                                                                           needs no preflight)
//   the Host must be this server's address:      open mode (no keys)        403 (DNS rebinding)
//     127.0.0.1, localhost, [::1] or --host, on
//     the bound port or none; or http://HOST
//     (https://HOST with TLS) is in
//     --allowed-origins ("*": any)
//   an upgrade's Origin must be the server's     WebSocket upgrades with    403
//     own (its authority is the Host) or in      an Origin header
//     --allowed-origins ("*": any)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "net/api_error.h"

namespace tandem::net {

// What the policy reads of a request ("" for a header it does not have).
struct browser_request {
  bool post = false;
  std::string_view content_type;
  std::string_view host;    // the Host header
  std::string_view origin;  // the Origin header
};

// What it knows of the server: views into the server's options, valid while they live.
struct origin_policy {
  std::string_view server_host;                  // --host
  uint16_t port = 0;                             // the bound port
  std::span<const std::string> allowed_origins;  // --allowed-origins
  bool open_mode = false;                        // no tenants: nothing else stands between a page and the API
  bool tls = false;                              // the server speaks HTTPS: its pages' origins are https://
};

// The refusal of a request to a route (415 or 403), or none.
std::optional<api_error> refuse_request(const browser_request& r, const origin_policy& p);

// The refusal of a WebSocket upgrade (403: a foreign Host in open mode, a foreign Origin), or none.
std::optional<api_error> refuse_upgrade(const browser_request& r, const origin_policy& p);

// The host part of a Host header or of an origin's authority, and its port ("" if none):
// "[::1]:8080" -> {"[::1]", "8080"}.
std::pair<std::string_view, std::string_view> split_host(std::string_view authority);

}  // namespace tandem::net
