// gpt-oss's "harmony" replies, read as the text streams in. The generation prompt ends with
// "<|start|>assistant", so the reply is a run of messages, each a header up to <|message|>
// and a body:
//
//   <|channel|>analysis<|message|>User asks the weather.<|end|>            -> reasoning_content
//   <|start|>assistant<|channel|>final<|message|>It is sunny.              -> content
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//                                                                          -> a tool call
//
// Headers (llama.cpp's parser takes the same): the recipient `to=functions.NAME` in the
// channel part or after the role (`<|start|>assistant to=functions.NAME<|channel|>commentary
// json<|message|>`), on the commentary or analysis channel; a content type (`<|constrain|>json`
// or a bare `json`) is read past; a stray `<|channel|>commentary` or ` to=assistant` before the
// real channel is ignored. Bodies:
//   analysis                          reasoning_content (with parse_reasoning; otherwise the
//                                     message as it came, markers included, is content)
//   final, commentary without a       content
//   recipient, no channel
//   to=functions.NAME                 a tool call (with parse_tool_calls): the body is its
//                                     arguments, streamed as the JSON arrives
//   any other recipient               dropped (built-in tools, or calls when tools are off)
// A body ends at <|end|>, <|return|> or <|call|> (taken), or where a new header starts
// (<|start|>, <|channel|>); a call's arguments end where their JSON value does. Text that does
// not open with a header is content up to the next marker. Several messages of one field
// concatenate, as in llama.cpp.
//
// Every delta is final: text that may be the start of a marker waits for the next feed, so
// any split of the reply gives the same result. Input is bounded: a message header longer
// than 1 KiB is taken as content, a call longer than 1 MiB fails.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "engine/chat/tool_call_list.h"

namespace tandem {

struct chat_output_delta;

class harmony_parser {
 public:
  harmony_parser(bool parse_reasoning, bool parse_tool_calls, std::function<std::string()> make_id = {});

  void feed(std::string_view text, chat_output_delta& out);
  // The end of the reply: flushes held-back text and closes an open call.
  void finish(chat_output_delta& out);

  // Inside an analysis message's body (a thinking budget counts these tokens).
  bool in_reasoning() const { return state_ == state::body && kind_ == kind::reasoning; }
  // What ends the analysis and opens the final answer (fed to the model when a thinking
  // budget runs out).
  static std::string_view reasoning_close_text();
  const std::vector<chat_tool_call>& calls() const { return list_.calls(); }

 private:
  enum class state { header, body };
  // What the open message's body becomes.
  enum class kind { reasoning, raw_analysis, content, call, dropped };
  // How far a call's arguments are read: as JSON, as text to the next marker (JSON that went
  // wrong), or past their end (waiting for the marker that ends the message).
  enum class args_mode { json, text, after };

  void step(chat_output_delta& out, bool at_end);
  // Returns true when a message header was read (or the text turned out to be none).
  bool read_header(chat_output_delta& out, bool at_end);
  void open_message(std::string_view header, chat_output_delta& out);
  // Returns true when the body ended.
  bool read_body(chat_output_delta& out, bool at_end);
  bool read_arguments(chat_output_delta& out, bool at_end);
  void emit(chat_output_delta& out, std::string_view text);

  bool parse_reasoning_;
  bool parse_tool_calls_;
  tool_call_list list_;
  state state_ = state::header;
  kind kind_ = kind::content;
  args_mode args_ = args_mode::json;
  size_t args_emitted_ = 0;  // bytes of buf_ already sent as arguments
  size_t args_search_ = 0;   // args_mode::text: where the ending marker may start
  std::string buf_;          // text not yet consumed
};

}  // namespace tandem
