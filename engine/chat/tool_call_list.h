// The tool calls of one reply, built as the reply streams, in OpenAI's stream form: the first
// delta of call i carries its index, id and name; later deltas of the call carry only
// argument text. Every parser of calls (tool_call_parser, harmony_parser) builds them here.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"

namespace tandem {

// One piece of a streamed call (OpenAI's choices[].delta.tool_calls[]): the first piece of a
// call has its id and name (arguments possibly ""); later pieces append argument text.
struct tool_call_delta {
  size_t index = 0;
  std::string id;    // first piece only
  std::string name;  // first piece only
  std::string arguments;
};

class tool_call_list {
 public:
  // `make_id` gives each call its id (default: random_id).
  explicit tool_call_list(std::function<std::string()> make_id = {});

  // "call_" and 24 random letters and digits.
  static std::string random_id();

  // Opens call number calls().size(), with `id` or else a new one; its first delta goes to `out`.
  void begin(std::vector<tool_call_delta>& out, std::string name, std::string id = {});
  // Appends argument text to the open call (joined to the last delta of `out` when that is
  // the same call's).
  void append(std::vector<tool_call_delta>& out, std::string_view text);
  // Closes the open call, if any; a call that got no arguments gets "{}".
  void end(std::vector<tool_call_delta>& out);

  bool open() const { return open_; }
  const std::vector<chat_tool_call>& calls() const { return calls_; }

 private:
  std::function<std::string()> make_id_;
  std::vector<chat_tool_call> calls_;
  bool open_ = false;
};

}  // namespace tandem
