// What every streamer reads and nobody writes after start-up: the tokenizer, the chat
// template, the context limit and where grammars are compiled. Immutable, so sharing it breaks no ownership rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/grammar_compiler.h"
#include "actors/image_encoder.h"
#include "engine/chat/chat_template.h"
#include "engine/lora/adapter_choice.h"
#include "engine/pooling/pooling.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem {

struct runtime_shared {
  tokenizer tok;
  std::optional<chat_template> chat = {};        // absent when the model has no usable template
  std::optional<chat_template> tool_chat = {};   // the file's tool_use variant, for requests with tools
  std::string chat_error = {};                   // why it is absent
  uint32_t max_model_len = 0;                    // prompt + output tokens at most
  grammar_compiler_actor grammar_compiler = {};  // for constrained requests (an actor handle: a value)
  // The server's kind: none = generation; else embeddings with this pooling (rank: rerank).
  pooling_type pooling = pooling_type::none;
  uint32_t n_embd = 0;               // the width of a pooled vector
  std::string rerank_template = {};  // tokenizer.chat_template.rerank: "{query}", "{document}"; "" = none
  // An encoder (bidirectional attention) computes an input whole in one step: the longest
  // it takes, min(context, max_num_batched_tokens); 0 for causal models (prompts chunked).
  uint32_t whole_prompt_limit = 0;
  // Prompt logprobs: the CPU worker scores prompt rows (device_sequences::score); a GPU
  // worker does not yet, so such requests are refused there.
  bool scores_prompts = true;
  // The LoRA adapters (runtime_config::lora_adapters, in order: llama-server's ids), each with
  // its default scale and the identity of its file (gguf::model_identity), which keys the
  // prefix cache so one adapter's KV never serves another, in memory or on disk.
  std::vector<lora::adapter_option> adapters = {};
  std::vector<uint64_t> adapter_identities = {};  // parallel
  // Images (runtime_config::mmproj): where they are encoded and how an encoded one is laid
  // out in the prompt. Absent without a projector.
  struct vision_parts {
    image_encoder_actor encoder;
    std::shared_ptr<const vision::projector> projector;
    vision::image_layout layout;
    uint32_t max_images = 0;  // per request
  };
  std::optional<vision_parts> vision = {};
};

}  // namespace tandem
