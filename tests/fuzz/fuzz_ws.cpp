// libFuzzer target: WebSocket frames as a session reads them. A Beast websocket stream over
// an in-memory stream accepts a fixed upgrade, then reads the fuzzer's bytes as client
// frames (masking, fragmentation, control frames, close) with the session's message limit,
// until the stream ends or fails. Any outcome but messages or a protocol error is a bug.
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace beast = boost::beast;
namespace websocket = beast::websocket;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  boost::asio::io_context ioc;
  beast::test::stream server(ioc), client(ioc);
  server.connect(client);
  static constexpr std::string_view kUpgrade =
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  server.append(kUpgrade);  // the server's pending input: the upgrade, then the fuzzer's frames
  server.append(std::string_view(reinterpret_cast<const char*>(data), size));
  server.close_remote();  // and after them the end of the stream (the server's writes still land)
  websocket::stream<beast::test::stream&> ws(server);
  ws.read_message_max(1 << 20);  // --max-body-bytes' default
  boost::system::error_code ec;
  ws.accept(ec);
  if (ec) return 0;
  beast::flat_buffer buffer;
  for (int i = 0; i < 64; ++i) {
    buffer.clear();
    ws.read(buffer, ec);
    if (ec) break;
  }
  return 0;
}
