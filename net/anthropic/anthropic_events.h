// Anthropic's Messages output, fed by the same deltas as a chat completion's stream: the
// Message object (POST /v1/messages) and its SSE event stream (stream: true). Plain C++:
// generation_job drives it.
//
//   first output  -> message_start (content [], usage so far), ping
//   reasoning     -> [content_block_start thinking]  content_block_delta thinking_delta
//   text          -> [content_block_start text]      content_block_delta text_delta
//   a call        -> [content_block_start tool_use]  content_block_delta input_json_delta
//   finish        -> content_block_stop (the open block), message_delta (stop_reason,
//                    stop_sequence, usage), message_stop
//   fail          -> error (after message_start; before it the session answers an error status)
//
// Invariants: at most one block is open; a block opens when output of another kind arrives
// (or a new call starts) and the open one is stopped first, so block indexes rise by one and
// every content_block_start has its content_block_stop before the next start. Reasoning,
// text and calls within one delta go out in that order (the chat parser's order).
//
// stop_reason: length -> max_tokens; tool_calls -> tool_use; stop -> stop_sequence when a stop
// sequence cut the output, else end_turn. The streamer hands on every token it was given in
// deltas, including those whose text a stop sequence cut, while an end-of-generation token is
// counted in completion_tokens but never delivered: so a stop with every counted token
// delivered was a stop sequence's. Which one: the earliest found in the decoded output.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "net/api_error.h"
#include "tandem/api.h"

namespace tandem {
class tokenizer;
}

namespace tandem::net {

// Anthropic's error type for an HTTP status (invalid_request_error, authentication_error...).
const char* anthropic_error_type(int status);
// {"type": "error", "error": {"type", "message"}}
std::string anthropic_error_body(const api_error& e);

class anthropic_events {
 public:
  // streamed: SSE events go out; otherwise only the Message object is kept. `tok` names the
  // stop sequence that matched when several were given (may be null: the first is named).
  anthropic_events(std::string id, std::string model, std::vector<std::string> stop_sequences, const tokenizer* tok,
                   bool streamed);

  void delta(const generation_delta& d, std::vector<std::string>& out);
  void finish(const generation_done& d, std::vector<std::string>& out);
  void fail(const api_error& e, std::vector<std::string>& out);

  bool started() const { return started_; }
  // The Message object as it stands (stop_reason null until finish).
  boost::json::object message() const;

 private:
  enum class kind { text, thinking, tool_use };
  struct block {
    kind k = kind::text;
    std::string text;  // text, thinking, or a call's input JSON text
    std::string id;    // tool_use
    std::string name;  // tool_use
  };
  void emit(const char* type, boost::json::object event, std::vector<std::string>& out);
  void start(std::vector<std::string>& out);
  block& open(kind k, std::vector<std::string>& out, std::string id = "", std::string name = "");
  void close_open(std::vector<std::string>& out);
  void add(kind k, const std::string& piece, std::vector<std::string>& out);
  boost::json::object block_json(const block& b, bool at_start) const;
  boost::json::object usage_json() const;
  std::string matched_stop_sequence() const;

  std::string id_;
  std::string model_;
  std::vector<std::string> stop_sequences_;
  const tokenizer* tok_;
  bool streamed_;
  bool started_ = false;
  std::vector<block> blocks_;
  int open_ = -1;           // index in blocks_ of the open block, -1 = none
  std::vector<int> calls_;  // tool-call index -> index in blocks_ (-1 = not seen)
  std::vector<int32_t> tokens_;
  std::string stop_reason_;  // "" until finish
  std::string stop_sequence_;
  uint32_t input_tokens_ = 0;
  uint32_t output_tokens_ = 0;
  uint32_t cached_tokens_ = 0;
};

}  // namespace tandem::net
