// libFuzzer target: the OpenAI request parser (net/openai/openai_request.h) on arbitrary bytes, as
// a chat body, a completion body and a WebSocket start frame take it. Any outcome but a
// parsed request or an api_error (a 400 naming the field) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/openai/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::net;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  api_limits limits;
  limits.vocab_size = 49152;
  limits.max_model_len = 8192;
  for (api_kind kind : {api_kind::chat, api_kind::completion}) {
    try {
      const auto body = parse_json_body(text);
      const api_request r = parse_api_request(body, kind, limits);
      volatile size_t sink = r.gen.prompt.size() + r.gen.messages.size() + r.gen.stop.size() + r.n;
      (void)sink;
    } catch (const api_error& e) {
      if (e.status != 400) __builtin_trap();
    }
  }
  return 0;
}
