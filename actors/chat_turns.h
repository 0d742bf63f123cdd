// A request's chat turns (the public generate_request's) as the chat template renders them:
// one conversion for the streamer and for what renders a prompt without running it
// (net/anthropic/anthropic_job's count_tokens).
#pragma once

#include <utility>
#include <vector>

#include "engine/chat/chat_template.h"
#include "tandem/api.h"

namespace tandem {

inline std::vector<chat_message> chat_messages(const std::vector<chat_turn>& turns) {
  std::vector<chat_message> out;
  out.reserve(turns.size());
  for (const auto& t : turns) {
    chat_message m(t.role, t.content);
    m.content_is_null = t.content_is_null;
    for (const auto& c : t.tool_calls) m.tool_calls.push_back({c.id, c.name, c.arguments});
    m.tool_call_id = t.tool_call_id;
    m.name = t.name;
    m.reasoning_content = t.reasoning_content;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tandem
