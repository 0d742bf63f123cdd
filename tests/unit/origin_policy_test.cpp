// The browser policy (net/http/origin_policy.h) without sockets: every rule it applies, on the
// headers it reads. tests/python/test_hardening.py checks the same against a real server.
#include "net/http/origin_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace tandem::net;

namespace {

const std::vector<std::string> kNoOrigins;

origin_policy open_server(const std::vector<std::string>& allowed = kNoOrigins) {
  return origin_policy{"127.0.0.1", 8080, allowed, true};
}

origin_policy keyed_server(const std::vector<std::string>& allowed = kNoOrigins) {
  return origin_policy{"127.0.0.1", 8080, allowed, false};
}

browser_request get(std::string_view host, std::string_view origin = "") {
  return browser_request{false, "", host, origin};
}

browser_request post(std::string_view content_type, std::string_view host = "127.0.0.1:8080") {
  return browser_request{true, content_type, host, ""};
}

int status(const std::optional<tandem::net::api_error>& e) { return e ? e->status : 0; }

}  // namespace

TEST(OriginPolicy, SplitHostTakesThePortOffNamesAndBracketedAddresses) {
  EXPECT_EQ(split_host("127.0.0.1:8080"), std::make_pair(std::string_view("127.0.0.1"), std::string_view("8080")));
  EXPECT_EQ(split_host("localhost"), std::make_pair(std::string_view("localhost"), std::string_view("")));
  EXPECT_EQ(split_host("[::1]:8080"), std::make_pair(std::string_view("[::1]"), std::string_view("8080")));
  EXPECT_EQ(split_host("[::1]"), std::make_pair(std::string_view("[::1]"), std::string_view("")));
  EXPECT_EQ(split_host("[::1"), std::make_pair(std::string_view("[::1"), std::string_view(""))) << "unclosed: all host";
}

TEST(OriginPolicy, PostBodiesMustBeJsonInEveryMode) {
  EXPECT_EQ(status(refuse_request(post("application/json"), open_server())), 0);
  EXPECT_EQ(status(refuse_request(post("application/json; charset=utf-8"), open_server())), 0);
  for (const auto& p : {open_server(), keyed_server()}) {
    const auto refused = refuse_request(post("text/plain"), p);
    ASSERT_EQ(status(refused), 415) << "a cross-site form needs no preflight";
    EXPECT_EQ(std::string(refused->what()), "POST bodies must be application/json (got 'text/plain')");
    EXPECT_EQ(status(refuse_request(post(""), p)), 415) << "no Content-Type";
  }
  EXPECT_EQ(status(refuse_request(get("127.0.0.1:8080"), keyed_server())), 0) << "a GET has no body to check";
}

TEST(OriginPolicy, OpenModeTakesOnlyThisServersHost) {
  const auto p = open_server();
  for (std::string_view host : {"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.1", "localhost", "[::1]"}) {
    EXPECT_EQ(status(refuse_request(get(host), p)), 0) << host;
  }
  const origin_policy on_all{"0.0.0.0", 8080, kNoOrigins, true};
  EXPECT_EQ(status(refuse_request(get("0.0.0.0:8080"), on_all)), 0) << "--host itself";

  const auto rebound = refuse_request(get("evil.example:8080"), p);
  ASSERT_EQ(status(rebound), 403) << "DNS rebinding: a foreign name resolving here";
  EXPECT_EQ(std::string(rebound->what()),
            "Host 'evil.example:8080' is not this server's address (see --allowed-origins)");
  EXPECT_EQ(status(refuse_request(get("127.0.0.1:9090"), p)), 403) << "another port";
  EXPECT_EQ(status(refuse_request(get(""), p)), 403) << "no Host";
  EXPECT_EQ(status(refuse_request(post("application/json", "evil.example"), p)), 403);
}

TEST(OriginPolicy, AllowedOriginsAdmitTheirHosts) {
  const std::vector<std::string> chat = {"http://chat.example"};
  EXPECT_EQ(status(refuse_request(get("chat.example"), open_server(chat))), 0);
  EXPECT_EQ(status(refuse_request(get("other.example"), open_server(chat))), 403);
  const std::vector<std::string> any = {"*"};
  EXPECT_EQ(status(refuse_request(get("evil.example:8080"), open_server(any))), 0);
}

TEST(OriginPolicy, UnderTlsAllowedOriginsAreHttpsOnes) {
  const std::vector<std::string> chat = {"https://chat.example"};
  origin_policy p = open_server(chat);
  EXPECT_EQ(status(refuse_request(get("chat.example"), p)), 403) << "a plain server's pages are http://";
  p.tls = true;
  EXPECT_EQ(status(refuse_request(get("chat.example"), p)), 0);
  const std::vector<std::string> plain = {"http://chat.example"};
  origin_policy q = open_server(plain);
  q.tls = true;
  EXPECT_EQ(status(refuse_request(get("chat.example"), q)), 403) << "http:// names another origin";
}

TEST(OriginPolicy, WithKeysAnyHostMayAsk) {
  EXPECT_EQ(status(refuse_request(get("evil.example:8080"), keyed_server())), 0) << "the key stands in the way";
}

TEST(OriginPolicy, UpgradesComeFromThisServersPagesOrListedOrigins) {
  const auto p = open_server();
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080"), p)), 0) << "no Origin: not a browser page";
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://127.0.0.1:8080"), p)), 0) << "the chat page's own";
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "https://127.0.0.1:8080"), p)), 0) << "any scheme";

  const auto cross = refuse_upgrade(get("127.0.0.1:8080", "http://evil.example"), p);
  ASSERT_EQ(status(cross), 403);
  EXPECT_EQ(std::string(cross->what()),
            "cross-origin WebSocket upgrade from http://evil.example (see --allowed-origins)");
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://127.0.0.1:9090"), p)), 403) << "another port";
  EXPECT_EQ(status(refuse_upgrade(get("evil.example:8080", "http://evil.example:8080"), p)), 403)
      << "same origin, but a rebound Host";

  const std::vector<std::string> chat = {"http://chat.example"};
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://chat.example"), open_server(chat))), 0);
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://other.example"), open_server(chat))), 403);
  const std::vector<std::string> any = {"*"};
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://other.example"), open_server(any))), 0);
}

TEST(OriginPolicy, WithKeysUpgradesStillNeedTheirOrigin) {
  const auto p = keyed_server();
  EXPECT_EQ(status(refuse_upgrade(get("evil.example:8080", "http://evil.example:8080"), p)), 0)
      << "a foreign Host passes with keys; its own origin then matches it";
  EXPECT_EQ(status(refuse_upgrade(get("127.0.0.1:8080", "http://evil.example"), p)), 403)
      << "the Origin rule holds with keys too";
}
