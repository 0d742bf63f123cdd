// libFuzzer target: the HTTP request parser as a session drives it (Beast's request_parser
// with the session's header and body limits, fed through a buffer with the session's read
// limit), on arbitrary bytes, split where the fuzzer says. Any outcome but a parsed request
// or a parse error is a bug.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <cstdint>

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t split = data[0];  // the first byte says how to cut the rest into reads
  data += 1;
  size -= 1;
  boost::beast::flat_buffer buffer((16 << 10) + (16 << 10));  // the session's read limit
  for (int request = 0; request < 4 && size > 0; ++request) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(16 << 10);
    parser.body_limit(1 << 20);
    boost::system::error_code ec;
    while (!parser.is_done()) {
      const size_t n = std::min(size, std::max<size_t>(1, split * 7 + 1));
      if (n == 0 && buffer.size() == 0) return 0;
      if (n > 0) {
        if (buffer.max_size() - buffer.size() < n) return 0;  // the session answers 431 here
        auto space = buffer.prepare(n);
        std::memcpy(space.data(), data, n);
        buffer.commit(n);
        data += n;
        size -= n;
      }
      const size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        if (size == 0) return 0;
        continue;
      }
      if (ec) return 0;
      if (used == 0 && size == 0) return 0;
    }
    auto req = parser.release();
    volatile size_t sink = req.body().size() + req.target().size();
    for (const auto& f : req) sink = sink + f.value().size();
    (void)sink;
  }
  return 0;
}
