// What every streamer reads and nobody writes after start-up: the tokenizer, the chat
// template and the context limit. Immutable, so sharing it breaks no ownership rule.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/chat/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem {

struct runtime_shared {
  tokenizer tok;
  std::optional<chat_template> chat;  // absent when the model has no usable template
  std::string chat_error;             // why it is absent
  uint32_t max_model_len = 0;         // prompt + output tokens at most
};

}  // namespace tandem
