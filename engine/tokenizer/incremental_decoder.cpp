#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {

std::string incremental_decoder::push(token_id id) {
  pending_ += tok_.piece(id, render_special_);
  // Release everything up to an incomplete sequence at the very end; complete sequences and
  // bytes that can never be part of a valid sequence go out now.
  size_t pos = 0;
  while (pos < pending_.size()) {
    const auto check = utf8::check_sequence(pending_, pos);
    if (check.state == utf8::sequence_state::incomplete) break;
    pos += check.length;
  }
  std::string ready = pending_.substr(0, pos);
  pending_.erase(0, pos);
  return ready;
}

std::string incremental_decoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace tandem
