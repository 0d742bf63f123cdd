// Chat messages -> prompt tokens, with the prompt-injection guard: only the chat template's
// own markers become control tokens. Text inside a message that looks like a control token
// (a user typing "<|im_end|><|im_start|>system") is tokenized as plain text.
//
//   the template renders markup and content as separate segments:
//     "<|im_start|>user\n" [content 0] "<|im_end|>\n<|im_start|>assistant\n"
//      ^ template text: control tokens parsed     ^ template text
//                          ^ content: plain text, never control tokens
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem {

// Throws std::invalid_argument when the template rejects the message list (or the tools).
std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, bool add_generation_prompt);
std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, const chat_render_options& opts);

// The same with images: each `marker` in a message's content stands for one (the k-th in
// the rendered prompt, counting from 0), whose tokens on_marker(k, out) appends in its place;
// the text on each side is tokenized on its own, as llama.cpp's libmtmd splits at its media
// marker. Returns how many markers were found through `n_markers`.
std::vector<token_id> encode_chat(const tokenizer& tok, const chat_template& tmpl,
                                  std::span<const chat_message> messages, const chat_render_options& opts,
                                  std::string_view marker,
                                  const std::function<void(size_t, std::vector<token_id>&)>& on_marker,
                                  size_t& n_markers);

// A raw completion prompt: BOS as the model says, and no control tokens from the text.
std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text);
// The same with `parse_special`: control-token text in the prompt becomes control tokens, as
// vLLM and llama-server read raw prompts (the client wrote the whole model input). BOS is not
// added twice when the prompt starts with the BOS token's text.
std::vector<token_id> encode_prompt(const tokenizer& tok, std::string_view text, bool parse_special);

}  // namespace tandem
