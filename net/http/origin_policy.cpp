#include "net/http/origin_policy.h"

namespace tandem::net {
namespace {

bool listed(std::span<const std::string> allowed, std::string_view origin) {
  for (const auto& a : allowed) {
    if (a == "*" || a == origin) return true;
  }
  return false;
}

// Open mode has no keys, so any web page the user opens could talk to this server through
// the browser; a name that resolves here (DNS rebinding) arrives with its own Host.
bool our_host(std::string_view host_header, const origin_policy& p) {
  const auto [host, port] = split_host(host_header);
  const bool ours = host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == p.server_host;
  const bool our_port = port.empty() || port == std::to_string(p.port);
  return (ours && our_port) || listed(p.allowed_origins, (p.tls ? "https://" : "http://") + std::string(host_header));
}

}  // namespace

std::pair<std::string_view, std::string_view> split_host(std::string_view authority) {
  if (authority.starts_with("[")) {  // [::1]:8080
    const auto end = authority.find(']');
    if (end == std::string_view::npos) return {authority, ""};
    const auto rest = authority.substr(end + 1);
    return {authority.substr(0, end + 1), rest.starts_with(":") ? rest.substr(1) : ""};
  }
  const auto colon = authority.rfind(':');
  if (colon == std::string_view::npos) return {authority, ""};
  return {authority.substr(0, colon), authority.substr(colon + 1)};
}

std::optional<api_error> refuse_request(const browser_request& r, const origin_policy& p) {
  if (r.post && !r.content_type.starts_with("application/json")) {
    return api_error(415, "POST bodies must be application/json (got '" + std::string(r.content_type) + "')");
  }
  if (p.open_mode && !our_host(r.host, p)) {
    return api_error(403, "Host '" + std::string(r.host) + "' is not this server's address (see --allowed-origins)");
  }
  return std::nullopt;
}

std::optional<api_error> refuse_upgrade(const browser_request& r, const origin_policy& p) {
  if (auto refused = refuse_request(r, p)) return refused;
  if (r.origin.empty() || listed(p.allowed_origins, r.origin)) return std::nullopt;
  // Same origin (the chat page at /) passes: the origin's authority is the Host.
  const auto scheme_end = r.origin.find("://");
  const std::string_view authority = scheme_end == std::string_view::npos ? r.origin : r.origin.substr(scheme_end + 3);
  if (authority == r.host) return std::nullopt;
  return api_error(403, "cross-origin WebSocket upgrade from " + std::string(r.origin) + " (see --allowed-origins)");
}

}  // namespace tandem::net
