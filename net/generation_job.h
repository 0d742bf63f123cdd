// One API request's generations (n choices) seen from the network side, as plain C++: it
// takes the sink events of every choice and produces what goes on the wire, in one of the
// API's formats. The session owns it and touches it only on its strand.
//
//   chat_sse / completion_sse: one "data: {...}\n\n" event per output, "data: [DONE]" last
//   chat_json / completion_json: one response body once every choice is done
//   websocket: one JSON frame per output ({"type": "delta" | "done" | "error", "id": ...})
//   responses_sse / responses_websocket: the Responses API's typed events (responses_events.h)
//   responses_json: the Response object once done
//   anthropic_sse / anthropic_json: Anthropic's Messages events / Message object (anthropic_events.h)
//
// A refusal (submit_reply not accepted) or a failed choice before any output makes the whole
// request fail with that status (failure()); the session then cancels the other choices.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/responses/response_shelf.h"
#include "net/anthropic/anthropic_events.h"
#include "net/api_error.h"
#include "net/metrics.h"
#include "net/openai/openai_request.h"
#include "net/request_sink.h"
#include "net/openai/responses_events.h"

namespace tandem {
class tokenizer;
}

namespace tandem::net {

enum class job_format {
  chat_sse,
  completion_sse,
  chat_json,
  completion_json,
  websocket,
  responses_sse,
  responses_json,
  responses_websocket,
  anthropic_sse,
  anthropic_json
};

// What a Responses API job needs besides the chat request it was translated into.
struct responses_job {
  boost::json::object echo;         // responses_request::echo
  boost::json::array conversation;  // the stored history, then this request's input items
  std::string stream_id;            // WebSocket lane ("" = none)
  // Set (store: true): gets the finished response, before its last event is emitted.
  std::function<void(stored_response)> keep;
};

struct job_context {
  const tokenizer* tok = nullptr;
  server_metrics* metrics = nullptr;
  std::string model_name;
  // The serving model's name in a server of several (the metrics' model label), else "".
  std::string metrics_model;
  std::string response_id;                         // chatcmpl-... / cmpl-...; for websocket the client's id
  int64_t created = 0;                             // unix seconds
  std::shared_ptr<const responses_job> responses;  // with the responses_* formats
};

class generation_job {
 public:
  generation_job(api_request req, job_format format, job_context ctx);

  // The runtime requests, one per choice (seeds differ per choice when a seed is given).
  std::vector<generate_request> requests() const;
  uint32_t choices() const { return static_cast<uint32_t>(choices_.size()); }

  void on_event(uint32_t choice, sink_event ev);

  bool finished() const;  // every choice has ended
  const std::optional<api_error>& failure() const { return failure_; }
  bool output_started() const { return output_started_; }
  // Every choice has admission's answer. Deltas come straight from the streamer and the
  // answer through the sink actor, so a delta may come first; the SSE header, which carries
  // the answer's rate-limit figures, waits for this.
  bool all_replied() const;
  // Wire output produced since the last call (SSE events or WebSocket frames).
  std::vector<std::string> take_output();
  size_t pending_bytes() const { return pending_bytes_; }
  // The response body of a non-streaming request, once finished() and without failure().
  std::string json_body() const;

  // The rate-limit figures of the last admission answer and the tenant charged.
  const submit_reply& limits() const { return limits_; }
  const std::string& tenant() const { return tenant_; }
  // Choices that may still produce events (to cancel when the client goes away).
  std::vector<uint32_t> live_choices() const;
  // Marks a choice as cancelled by the client (WebSocket): its done is still reported.
  void mark_cancelled() { cancelled_ = true; }

  // The guard (net/guard.h): a choice's text so far, the tokens every choice produced so far,
  // and what a flagged reply becomes: a JSON body's choices end with finish_reason
  // content_filter and no text; a stream (chat, completions) drops its unsent output and ends
  // each choice with that finish reason, then [DONE].
  const std::string& choice_text(uint32_t i) const { return choices_[i].text; }
  uint64_t generated_tokens() const { return generated_tokens_; }
  void filter_output();
  bool filtered() const { return filtered_; }

  int final_status() const;  // for the request counter
  bool is_responses() const { return events_.has_value(); }
  bool is_anthropic() const { return anthropic_.has_value(); }

 private:
  struct choice_state {
    bool replied = false;
    bool ended = false;
    bool role_sent = false;
    std::string text;
    std::string reasoning;
    std::vector<tool_call> calls;  // assembled from the chunks
    std::vector<output_logprob> logprobs;
    std::vector<output_logprob> prompt;  // the prompt's scores, when asked for
    bool echoed = false;                 // a stream's prompt part (echo, prompt_logprobs) went out
    generation_done done;
  };
  bool filtered_ = false;
  uint64_t generated_tokens_ = 0;
  void on_reply(uint32_t choice, submit_reply& r);
  void on_delta(uint32_t choice, generation_delta& d);
  void on_done(uint32_t choice, generation_done& d);
  void fail(api_error e);
  void emit(std::string s);
  void emit_all(std::vector<std::string>& frames);
  void finish_response(const generation_done& d);
  std::string stream_chunk(uint32_t choice, const std::string& text, const std::vector<output_logprob>& lps,
                           const std::string* finish_reason, const generation_delta* parsed = nullptr);
  std::string usage_json() const;
  // `data: {"id":...,"object":...,"created":...,"model":...,"choices":` of every SSE chunk.
  std::string sse_chunk_prefix() const;
  // prompt: completions' echo with logprobs puts the prompt's scores first.
  boost::json::value logprobs_json(const std::vector<output_logprob>& lps, bool chat,
                                   std::span<const output_logprob> prompt = {}) const;
  // A stream's first chunk of a choice with echo or prompt_logprobs: the prompt's text and
  // scores, before any generated text.
  void emit_prompt_part(uint32_t choice);
  // What echo puts first: the prompt as sent, or its token ids' text.
  std::string echo_text() const;

  api_request req_;
  job_format format_;
  job_context ctx_;
  std::vector<choice_state> choices_;
  std::optional<api_error> failure_;
  bool output_started_ = false;
  bool closed_ = false;  // [DONE] / final frames emitted
  bool cancelled_ = false;
  std::vector<std::string> out_;
  std::string chunk_head_;  // sse_chunk_prefix() + "[{\"index\":", made once
  size_t pending_bytes_ = 0;
  submit_reply limits_;
  std::string tenant_ = "unknown";
  std::optional<responses_events> events_;     // the responses_* formats
  std::optional<anthropic_events> anthropic_;  // the anthropic_* formats
};

}  // namespace tandem::net
