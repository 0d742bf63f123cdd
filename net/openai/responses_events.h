// The Responses API's output, fed by the same deltas as a chat completion's stream: the
// Response object, and its typed event stream (SSE on POST /v1/responses with stream: true,
// one text frame per event on the WebSocket mode). Plain C++: generation_job drives it.
//
//   start   -> response.created, response.in_progress          (with the first output, or at finish)
//   text    -> [response.output_item.added (message), response.content_part.added]
//              response.output_text.delta
//   a call  -> [response.output_item.added (function_call)] response.function_call_arguments.delta
//   finish  -> per open item: response.output_text.done, response.content_part.done,
//              response.function_call_arguments.done, response.output_item.done;
//              then response.completed | response.incomplete (max_output_tokens; cancelled)
//   fail    -> response.failed (with the error)
//
// Every event has "type" and "sequence_number" (0, 1, 2... in order); item ids derive from
// the response id (resp_X -> msg_X, fc_X_<n>).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "net/api_error.h"
#include "tandem/api.h"

namespace tandem::net {

enum class responses_framing {
  none,       // no events (a non-streamed response): only the state is kept
  sse,        // "event: <type>\ndata: <json>\n\n"
  websocket,  // "<json>"
};

struct responses_usage {
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  uint32_t cached_tokens = 0;
};

class responses_events {
 public:
  // echo: the request's fields the Response object repeats (responses_request::echo);
  // stream_id: a WebSocket lane, echoed on every event ("" = none).
  responses_events(std::string id, std::string model, int64_t created_at, boost::json::object echo,
                   responses_framing framing, std::string stream_id = "");

  void start(std::vector<std::string>& out);
  void delta(const std::string& text, const std::vector<tool_call_chunk>& calls, std::vector<std::string>& out);
  // cancelled: the client asked for the stop (a WebSocket response.cancel); otherwise an abort
  // is a stop string's cut and reads as completed.
  void finish(finish_reason reason, bool cancelled, const responses_usage& usage, std::vector<std::string>& out);
  void fail(const api_error& e, std::vector<std::string>& out);

  const std::string& id() const { return id_; }
  bool started() const { return started_; }
  // The Response object as it stands (status in_progress until finish or fail).
  boost::json::object response() const;
  // The output items, as a continuation's conversation holds them (responses_request's form).
  boost::json::array conversation_items() const;

 private:
  struct item {
    bool is_call = false;
    std::string id;
    uint32_t output_index = 0;
    std::string text;  // message: the text; call: the arguments
    std::string call_id;
    std::string name;
    bool done = false;
  };
  void emit(boost::json::object event, std::vector<std::string>& out);
  item& message(std::vector<std::string>& out);
  boost::json::object item_json(const item& it) const;
  void close(item& it, std::vector<std::string>& out);

  std::string id_;
  std::string model_;
  int64_t created_at_;
  boost::json::object echo_;
  responses_framing framing_;
  std::string stream_id_;
  bool started_ = false;
  uint64_t sequence_ = 0;
  std::string status_ = "in_progress";
  std::string item_status_ = "in_progress";
  boost::json::value error_;
  boost::json::value incomplete_;
  boost::json::value usage_;
  int64_t completed_at_ = 0;
  std::vector<item> items_;
  int message_ = -1;        // index of the message item in items_, -1 = none yet
  std::vector<int> calls_;  // tool-call index -> index in items_ (-1 = not seen)
};

// The WebSocket mode's error event, for a response.create refused before its response
// started (bad input, an unknown previous_response_id, a busy lane, a rate limit):
//   {"type": "error", "status": 400, "error": {"type", "code", "message", "param"}}
std::string responses_error_event(const api_error& e, const std::string& stream_id = "");

}  // namespace tandem::net
