// Tandem's embedding API: the messages a host CAF application exchanges with the runtime.
//
//   host actor --submit_atom, generate_request--> admission --submit_reply--> host
//   runtime ----generation_delta (0..n)--------> request.sink
//   runtime ----generation_done (exactly once)--> request.sink
//   host actor --cancel_atom, request_id-------> admission      (the sink then gets done/abort)
//
// An in-process host may take the deltas as a call instead of a message (on_delta below):
// the streamer calls it on its own thread, so it must hand the delta on at once (the net
// front posts it onto the session's strand). generation_done still goes to the sink.
//
// Every struct here has an inspect() overload, so the messages can cross CAF's middleman.
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/atoms.h"

namespace tandem {

using request_id = uint64_t;

// Why a generation ended. OpenAI's names where it has one ("stop": an end-of-generation
// token or a stop string, "length": max_tokens or the context, "tool_calls": the reply
// called tools), plus "abort" (cancelled or disconnected) and "error" (generation_done::error
// says what).
enum class finish_reason : uint8_t { stop, length, abort, error, tool_calls };

constexpr const char* to_string(finish_reason r) {
  switch (r) {
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
    case finish_reason::abort:
      return "abort";
    case finish_reason::error:
      return "error";
    case finish_reason::tool_calls:
      return "tool_calls";
  }
  return "error";
}

// A call the assistant made (OpenAI's message.tool_calls[i]); arguments are JSON text.
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;
};

// A piece of a tool call as the reply streams (OpenAI's delta.tool_calls[i]): the first
// piece of call `index` carries its id and name, later pieces argument text only.
struct tool_call_chunk {
  uint32_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// Structured output: the reply must match a grammar (response_format, a "grammar" field, a
// forced tool call). Checked when the request starts: a bad one ends it with a 400.
struct output_grammar {
  enum class kind : uint8_t {
    none,
    json_object,  // any JSON object
    json_schema,  // text: a JSON Schema
    gbnf,         // text: a GBNF grammar (llama.cpp's form)
    tool_call,    // one call of the request's tools in the template's syntax; text: the
                  // function it must call ("" = any of them)
  };
  kind type = kind::none;
  std::string text;
};

struct chat_turn {
  chat_turn() = default;
  chat_turn(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}

  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  bool content_is_null = false;       // "content": null (an assistant turn that only calls tools)
  std::vector<tool_call> tool_calls;  // assistant: the calls it made
  std::string tool_call_id;           // tool: the call this result answers
  std::string name;                   // tool: the function's name
  std::string reasoning_content;      // assistant: its thinking, for templates that render it
};

// How the next token is chosen (OpenAI / vLLM semantics). temperature 0 = greedy.
struct sampling_options {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int64_t seed = -1;  // -1 = random
  std::vector<int32_t> logit_bias_ids;
  std::vector<float> logit_bias_values;
  int32_t top_logprobs = 0;  // alternatives per token when logprobs is on
  bool logprobs = false;
  // vLLM's prompt_logprobs (and /v1/completions' echo with logprobs): -1 none; else each
  // prompt token after the first is scored (logprob and rank) with this many alternatives.
  int32_t prompt_logprobs = -1;
};

struct generation_delta;
struct generation_done;

// The priority of the Batch API's requests (POST /v1/batches): less urgent than any an
// interactive request may ask for, so batches run in the capacity interactive traffic leaves
// and are preempted first.
inline constexpr int32_t kBatchPriority = 1 << 20;
using sink_actor = caf::typed_actor<caf::reacts_to<generation_delta>, caf::reacts_to<generation_done>>;

struct generate_request {
  // The model the request is for (OpenAI's "model"). A runtime serves one model and takes
  // every name as its own; a server of several models routes by it. "" = the default one.
  std::string model;
  // A LoRA adapter, llama-server's "lora" field: [{"id": N, "scale": S}], N indexing the
  // server's adapters (--lora, in order), scale 0 for those not listed; at most one may have a
  // nonzero scale (one adapter per sequence). Empty: the model name's ":NAME" suffix, else
  // the tenant's default adapter, else none. Admission resolves them all into this form
  // (one id, or none) before the request goes on.
  std::vector<int32_t> lora_ids;
  std::vector<float> lora_scales;
  std::string prompt;                  // raw completion prompt, used when messages is empty
  std::vector<int32_t> prompt_tokens;  // or the raw prompt as token ids (when prompt is empty)
  std::vector<chat_turn> messages;     // chat: rendered with the model's chat template
  // Chat with images (--mmproj): each as the client sent it (a data: URI), decoded and
  // encoded by the runtime; media_marker stands in the messages' content where each one was,
  // in order (a per-request random text, so no typed text is taken for one); image_parts
  // names each one's part for errors ("messages[0].content[1]").
  std::vector<std::string> images;
  std::vector<std::string> image_parts;
  std::string media_marker;
  bool add_generation_prompt = true;
  // Chat: OpenAI's "tools" as a JSON array (the template renders them); "" = none.
  std::string tools_json;
  // Chat: extra template variables as a JSON object (chat_template_kwargs: enable_thinking...).
  std::string chat_template_kwargs_json;
  // Chat: parse tool calls out of the reply into generation_delta::tool_calls (tools given and
  // tool_choice not "none"), in this syntax ("" = the template's: hermes, llama3, mistral,
  // generic; engine/chat/tool_call_parser.h).
  bool parse_tool_calls = false;
  std::string tool_call_parser;
  // Chat: thinking sections (templates that write <think>) go to reasoning_content.
  bool parse_reasoning = true;
  // Chat: at most this many tokens inside a thinking section, then the section is closed
  // (its end tag is appended to the sequence); 0 = no cap. vLLM's thinking_token_budget.
  uint32_t thinking_token_budget = 0;
  output_grammar grammar;  // constrained decoding; none by default
  // Raw prompt: control-token text in it ("<|im_start|>") becomes control tokens, since the
  // client wrote the whole model input (vLLM, llama-server); false keeps it plain text.
  bool prompt_special_tokens = false;
  uint32_t max_tokens = 256;
  std::vector<std::string> stop;  // stop strings: cut from the output
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool speculative = true;  // false: never draft for this request (when the runtime speculates)
  // Nonzero: the choices of one request (n > 1) carry the same value and the same prompt,
  // which is then computed once and its KV blocks shared (copy-on-write) by every choice.
  uint64_t prompt_group = 0;
  uint32_t choices = 1;  // with prompt_group: how many choices the request has (admitted together)
  sampling_options sampling;
  std::string tenant = "default";  // set by admission from the API key when tenants are configured
  double weight = 1.0;             // the tenant's scheduling weight (set by admission)
  std::string cache_group;         // the tenant's prefix-cache group (set by admission)
  double kv_cache_share = 1.0;     // the tenant's KV quota (set by admission; tenant_config)
  std::string api_key;             // the caller's key (Authorization: Bearer); checked by admission
  // vLLM's priority: lower runs first. Admission adds the tenant's `priority` and keeps the
  // sum no more urgent than the tenant's `max_priority`; the Batch API's requests run at
  // kBatchPriority, after every interactive one. Waiting prompts start in priority order,
  // and a more urgent arrival may preempt less urgent running sequences.
  int32_t priority = 0;
  // A time-to-first-token target in ms (0: none; header x-slo-ttft-ms or body slo_ttft_ms):
  // earliest deadline first among equal priorities. With slo_reject (x-slo-reject: true) a
  // request the scheduler predicts would miss it is refused at once with 503 and Retry-After.
  double slo_ttft_ms = 0;
  bool slo_reject = false;
  // Tokens per delta (vLLM's --stream-interval): the first token goes out at once, then a
  // delta whenever this many have gathered, and the rest at the end. 1 (or 0): each step's
  // tokens as they come. Larger: fewer, larger deltas, less server work per token.
  uint32_t stream_interval = 1;
  // Cluster mode: requests of one session stay on one engine node while it is healthy
  // (OpenAI's "user" field, or a "session_id"); "" = none.
  std::string session;
  // Embeddings and rerank (POST /v1/embeddings, /v1/rerank; actors/embedder.h): not a
  // generation. Each input is one sequence whose prompt is pooled when computed (no output
  // tokens); the sink gets one generation_delta per input (embedding, index), in any order,
  // then generation_done with the prompt tokens of all of them. A server is for one kind:
  // admission refuses the other with a 400 naming the server's.
  bool embed = false;
  std::vector<std::string> embed_texts;            // the inputs as text
  std::vector<std::vector<int32_t>> embed_tokens;  // or as token ids (when embed_texts is empty)
  uint32_t dimensions = 0;                         // the first this many values, renormalised; 0 = all
  bool rerank = false;                             // embed_texts are documents, each scored against rerank_query
  std::string rerank_query;                        // rerank: the query
  sink_actor sink;                                 // receives the deltas and the final event
  // Set: the deltas go to this call, in order, and not to the sink (one message and one
  // actor turn fewer per delta). Called on the streamer's thread before it sends
  // generation_done to the sink, so whatever the call posts to an ordered queue (an Asio
  // strand) lands ahead of the final event posted after it. Stays in this process: not
  // serialized.
  std::function<void(generation_delta&&)> on_delta;
};

// Answer to submit: accepted (with the id to cancel by) or refused before any work.
struct submit_reply {
  bool accepted = false;
  request_id id = 0;
  uint16_t status = 200;     // as HTTP would say it: 400, 401, 429, 503
  std::string error;         // why it was refused
  double retry_after_s = 0;  // for 429 and 503
  std::string tenant;        // the tenant the request was charged to
  // The caller's rate-limit figures (x-ratelimit-* headers); -1 = no such limit.
  int64_t limit_requests = -1;
  int64_t remaining_requests = -1;
  int64_t limit_tokens = -1;
  int64_t remaining_tokens = -1;
};

struct output_logprob {
  int32_t token = 0;
  float logprob = 0;
  int32_t rank = 0;              // prompt tokens: 1 + the tokens more likely than this one (0: not known)
  std::vector<int32_t> top_ids;  // most likely alternatives, best first
  std::vector<float> top_logprobs;
};

struct generation_delta {
  request_id id = 0;
  // Complete UTF-8; may be empty while a stop string is pending. With a reasoning or tool-call
  // parser (chat): the content only, and the rest goes to the fields below.
  std::string text;
  std::vector<int32_t> tokens;  // token ids this delta covers
  std::vector<output_logprob> logprobs;
  // With sampling.prompt_logprobs, the first delta's: every prompt token, each scored by the
  // model given the tokens before it, except the first (rank 0: nothing precedes it).
  std::vector<output_logprob> prompt_logprobs;
  std::string reasoning_content;
  std::vector<tool_call_chunk> tool_calls;
  // An embeddings request's: input `index`'s vector, L2-normalised (rerank: {score}).
  std::vector<float> embedding;
  uint32_t index = 0;
  bool empty() const {
    return text.empty() && tokens.empty() && reasoning_content.empty() && tool_calls.empty() && embedding.empty() &&
           prompt_logprobs.empty();
  }
};

struct generation_done {
  request_id id = 0;
  finish_reason reason = finish_reason::stop;
  std::string error;        // with finish_reason::error
  std::string error_param;  // with a 400: the request field at fault, when known
  uint16_t status = 200;    // with finish_reason::error: 400 for bad input, 500 otherwise
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  double queue_ms = 0;         // submit -> first scheduled
  double ttft_ms = 0;          // submit -> first token
  double tpot_ms = 0;          // mean time per output token after the first
  // Chat with images (--mmproj): each image's decode and encode time, in request order, and
  // whether one was refused (tandem:image_encode_seconds, tandem:images_rejected_total).
  std::vector<float> image_encode_seconds;
  bool image_rejected = false;
};

// What admission counts (its stats reply).
struct admission_stats {
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  uint64_t cancelled = 0;
  uint32_t in_flight = 0;
  uint64_t unauthorized = 0;  // 401
  uint64_t rate_limited = 0;  // 429
  uint64_t overloaded = 0;    // 503
};

// The runtime's front door as a host sees it (actors/admission.h says what it checks and in
// which order): submit a request, cancel one by its id, read the counts. auth(key): whether
// the key may use the runtime (accepted, with its tenant) or 401; open mode accepts every
// key; for endpoints that need a key before any work (the WebSocket upgrade, /tokenize).
// The runtime's own messages to admission (a streamer's end of a request, shutdown's drain)
// are on an internal interface that extends this one; a host cannot send them.
using admission_actor =
    caf::typed_actor<caf::replies_to<submit_atom, generate_request>::with<submit_reply>,
                     caf::replies_to<auth_atom, std::string>::with<submit_reply>,
                     caf::reacts_to<cancel_atom, request_id>, caf::replies_to<stats_atom>::with<admission_stats>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_stats& x) {
  return f(caf::meta::type_name("admission_stats"), x.accepted, x.rejected, x.cancelled, x.in_flight, x.unauthorized,
           x.rate_limited, x.overloaded);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chat_turn& x) {
  return f(caf::meta::type_name("chat_turn"), x.role, x.content, x.content_is_null, x.tool_calls, x.tool_call_id,
           x.name, x.reasoning_content);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_grammar& x) {
  return f(caf::meta::type_name("output_grammar"), x.type, x.text);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call& x) {
  return f(caf::meta::type_name("tool_call"), x.id, x.name, x.arguments);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tool_call_chunk& x) {
  return f(caf::meta::type_name("tool_call_chunk"), x.index, x.id, x.name, x.arguments);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_options& x) {
  return f(caf::meta::type_name("sampling_options"), x.temperature, x.top_p, x.top_k, x.min_p, x.repetition_penalty,
           x.presence_penalty, x.frequency_penalty, x.seed, x.logit_bias_ids, x.logit_bias_values, x.top_logprobs,
           x.logprobs, x.prompt_logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generate_request& x) {
  return f(caf::meta::type_name("generate_request"), x.model, x.lora_ids, x.lora_scales, x.prompt, x.prompt_tokens, x.messages,
           x.images, x.image_parts, x.media_marker,
           x.add_generation_prompt, x.tools_json, x.chat_template_kwargs_json, x.parse_tool_calls, x.tool_call_parser,
           x.parse_reasoning, x.thinking_token_budget, x.grammar, x.prompt_special_tokens, x.max_tokens, x.stop,
           x.stop_token_ids, x.ignore_eos, x.speculative, x.prompt_group, x.choices, x.sampling, x.tenant, x.weight,
           x.cache_group, x.kv_cache_share, x.api_key, x.priority, x.slo_ttft_ms, x.slo_reject, x.stream_interval, x.session, x.embed, x.embed_texts,
           x.embed_tokens, x.dimensions, x.rerank, x.rerank_query, x.sink);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, submit_reply& x) {
  return f(caf::meta::type_name("submit_reply"), x.accepted, x.id, x.status, x.error, x.retry_after_s, x.tenant,
           x.limit_requests, x.remaining_requests, x.limit_tokens, x.remaining_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_logprob& x) {
  return f(caf::meta::type_name("output_logprob"), x.token, x.logprob, x.rank, x.top_ids, x.top_logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_delta& x) {
  return f(caf::meta::type_name("generation_delta"), x.id, x.text, x.tokens, x.logprobs, x.prompt_logprobs,
           x.reasoning_content, x.tool_calls, x.embedding, x.index);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_done& x) {
  return f(caf::meta::type_name("generation_done"), x.id, x.reason, x.error, x.error_param, x.status, x.prompt_tokens,
           x.completion_tokens, x.cached_tokens, x.queue_ms, x.ttft_ms, x.tpot_ms, x.image_encode_seconds,
           x.image_rejected);
}

}  // namespace tandem
