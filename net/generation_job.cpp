#include "net/generation_job.h"

#include <boost/json.hpp>
#include <random>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "net/prompt_logprobs.h"

namespace tandem::net {
namespace json = boost::json;
namespace {

// JSON strings must be valid UTF-8; a single token may hold part of a character.
std::string valid_utf8(const std::string& s) { return utf8::replace_invalid(s); }

json::array byte_list(const std::string& s) {
  json::array a;
  for (unsigned char c : s) a.push_back(c);
  return a;
}

// OpenAI's delta.tool_calls: the first piece of a call has its id, type and name.
json::array tool_call_chunks_json(const std::vector<tool_call_chunk>& chunks) {
  json::array out;
  for (const auto& c : chunks) {
    json::object fn{{"arguments", c.arguments}};
    json::object o{{"index", c.index}};
    if (!c.id.empty()) {
      o["id"] = c.id;
      o["type"] = "function";
      fn["name"] = c.name;
    }
    o["function"] = std::move(fn);
    out.push_back(std::move(o));
  }
  return out;
}

void assemble(std::vector<tool_call>& calls, const std::vector<tool_call_chunk>& chunks) {
  for (const auto& c : chunks) {
    if (c.index >= calls.size()) calls.resize(c.index + 1);
    auto& call = calls[c.index];
    if (!c.id.empty()) {
      call.id = c.id;
      call.name = c.name;
    }
    call.arguments += c.arguments;
  }
}

}  // namespace

generation_job::generation_job(api_request req, job_format format, job_context ctx)
    : req_(std::move(req)), format_(format), ctx_(std::move(ctx)), choices_(req_.n) {
  if (format_ == job_format::responses_sse || format_ == job_format::responses_json ||
      format_ == job_format::responses_websocket) {
    const responses_framing framing = format_ == job_format::responses_sse         ? responses_framing::sse
                                      : format_ == job_format::responses_websocket ? responses_framing::websocket
                                                                                   : responses_framing::none;
    const auto& rj = *ctx_.responses;
    events_.emplace(ctx_.response_id, ctx_.model_name, ctx_.created, rj.echo, framing, rj.stream_id);
  }
  if (format_ == job_format::anthropic_sse || format_ == job_format::anthropic_json) {
    anthropic_.emplace(ctx_.response_id, ctx_.model_name, req_.gen.stop, ctx_.tok,
                       format_ == job_format::anthropic_sse);
  }
}

std::vector<generate_request> generation_job::requests() const {
  std::vector<generate_request> out;
  // The choices share their prompt's computation (generate_request::prompt_group).
  thread_local std::mt19937_64 groups{std::random_device{}()};
  const uint64_t group = choices_.size() > 1 ? (groups() | 1) : 0;
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    generate_request g = req_.gen;
    g.prompt_group = group;
    g.choices = static_cast<uint32_t>(choices_.size());
    if (g.sampling.seed >= 0) g.sampling.seed += i;
    out.push_back(std::move(g));
  }
  return out;
}

bool generation_job::finished() const {
  if (failure_) return true;
  for (const auto& c : choices_) {
    if (!c.ended) return false;
  }
  return true;
}

std::vector<uint32_t> generation_job::live_choices() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].ended) out.push_back(i);
  }
  return out;
}

std::vector<std::string> generation_job::take_output() {
  pending_bytes_ = 0;
  return std::exchange(out_, {});
}

void generation_job::emit(std::string s) {
  output_started_ = true;
  pending_bytes_ += s.size();
  out_.push_back(std::move(s));
}

void generation_job::emit_all(std::vector<std::string>& frames) {
  for (auto& f : frames) emit(std::move(f));
}

void generation_job::on_event(uint32_t choice, sink_event ev) {
  if (choice >= choices_.size() || closed_) return;
  std::visit(
      [&](auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, submit_reply>)
          on_reply(choice, e);
        else if constexpr (std::is_same_v<T, generation_delta>)
          on_delta(choice, e);
        else
          on_done(choice, e);
      },
      ev);
}

bool generation_job::all_replied() const {
  for (const auto& c : choices_) {
    if (!c.replied) return false;
  }
  return true;
}

void generation_job::on_reply(uint32_t choice, submit_reply& r) {
  auto& c = choices_[choice];
  c.replied = true;
  if (!r.tenant.empty()) tenant_ = r.tenant;
  limits_ = r;
  // A Responses stream starts (response.created) with the first output, not here: a request
  // the streamer refuses (a prompt longer than the context) is then still a plain 400.
  if (r.accepted) return;
  c.ended = true;
  if (ctx_.metrics) ctx_.metrics->count_rejection(rejection_reason(r.status));
  api_error e(r.status, r.error, "",
              r.status == 401   ? "invalid_api_key"
              : r.status == 429 ? "rate_limit_exceeded"
                                : "");
  e.retry_after_s = r.retry_after_s;
  fail(std::move(e));
}

void generation_job::fail(api_error e) {
  if (failure_) return;
  failure_ = e;
  if (events_) {
    // Before the stream started: an error response (SSE) or an error event (WebSocket);
    // after: response.failed.
    std::vector<std::string> frames;
    if (events_->started() && format_ != job_format::responses_json) {
      events_->fail(e, frames);
    } else if (format_ == job_format::responses_websocket) {
      frames.push_back(responses_error_event(e, ctx_.responses->stream_id));
    }
    emit_all(frames);
    closed_ = true;
    return;
  }
  if (anthropic_) {
    // Before message_start the session sends an error response; after it, an error event.
    std::vector<std::string> frames;
    if (anthropic_->started()) anthropic_->fail(e, frames);
    emit_all(frames);
    closed_ = true;
    return;
  }
  if (!output_started_ && format_ != job_format::websocket) return;  // the session sends an error response
  json::object err{{"message", e.what()}, {"type", error_type_for(e.status)}, {"code", e.status}};
  if (format_ == job_format::websocket) {
    json::object f{{"type", "error"}, {"id", ctx_.response_id}, {"status", e.status}, {"message", e.what()}};
    if (!e.param.empty()) f["param"] = e.param;
    if (e.retry_after_s > 0) f["retry_after"] = e.retry_after_s;
    emit(json::serialize(f));
  } else {
    emit("data: " + json::serialize(json::object{{"error", std::move(err)}}) + "\n\n");
    emit("data: [DONE]\n\n");
  }
  closed_ = true;
}

json::value generation_job::logprobs_json(const std::vector<output_logprob>& lps, bool chat,
                                          std::span<const output_logprob> prompt) const {
  json::value logprobs = nullptr;
  if (req_.gen.sampling.logprobs) {
    if (chat) {
      json::array content;
      for (const auto& lp : lps) {
        const std::string t = ctx_.tok->decode(std::vector<token_id>{lp.token}, false);
        json::array top;
        for (size_t k = 0; k < lp.top_ids.size(); ++k) {
          const std::string tt = ctx_.tok->decode(std::vector<token_id>{lp.top_ids[k]}, false);
          top.push_back(
              json::object{{"token", valid_utf8(tt)}, {"logprob", lp.top_logprobs[k]}, {"bytes", byte_list(tt)}});
        }
        content.push_back(json::object{{"token", valid_utf8(t)},
                                       {"logprob", lp.logprob},
                                       {"bytes", byte_list(t)},
                                       {"top_logprobs", std::move(top)}});
      }
      logprobs = json::object{{"content", std::move(content)}};
    } else {
      legacy_logprobs out;
      append_prompt(*ctx_.tok, prompt, out);
      for (const auto& lp : lps) {
        out.tokens.push_back(json::string(token_text(*ctx_.tok, lp.token)));
        out.token_logprobs.push_back(lp.logprob);
        json::object top;
        for (size_t k = 0; k < lp.top_ids.size(); ++k) top[token_text(*ctx_.tok, lp.top_ids[k])] = lp.top_logprobs[k];
        out.top_logprobs.push_back(std::move(top));
      }
      logprobs = out.take();
    }
  }
  return logprobs;
}

std::string generation_job::sse_chunk_prefix() const {
  const bool chat = format_ == job_format::chat_sse;
  return "data: {\"id\":" + json::serialize(json::value(ctx_.response_id)) + ",\"object\":\"" +
         (chat ? "chat.completion.chunk" : "text_completion") + "\",\"created\":" + std::to_string(ctx_.created) +
         ",\"model\":" + json::serialize(json::value(ctx_.model_name)) + ",\"choices\":";
}

std::string generation_job::stream_chunk(uint32_t choice, const std::string& text,
                                         const std::vector<output_logprob>& lps, const std::string* finish_reason,
                                         const generation_delta* parsed) {
  const bool chat = format_ == job_format::chat_sse;
  if (lps.empty() && !finish_reason && !parsed && (!chat || choices_[choice].role_sent)) {
    // The hot path, one event per token: the same object as below, written directly.
    if (chunk_head_.empty()) chunk_head_ = sse_chunk_prefix() + "[{\"index\":";
    std::string out;
    out.reserve(chunk_head_.size() + text.size() + 96);
    out += chunk_head_;
    out += std::to_string(choice);
    out += chat ? ",\"delta\":{\"content\":" : ",\"text\":";
    out += json::serialize(json::string_view(text));
    out +=
        chat ? "},\"logprobs\":null,\"finish_reason\":null}]}\n\n" : ",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
    return out;
  }
  json::object ch{{"index", choice}};
  json::value logprobs = lps.empty() ? json::value(nullptr) : logprobs_json(lps, chat);
  if (chat) {
    json::object delta;
    if (!choices_[choice].role_sent) {
      delta["role"] = "assistant";
      choices_[choice].role_sent = true;
    }
    if (parsed && !parsed->reasoning_content.empty()) delta["reasoning_content"] = parsed->reasoning_content;
    if (!text.empty() || (!finish_reason && !parsed)) delta["content"] = text;
    if (parsed && !parsed->tool_calls.empty()) delta["tool_calls"] = tool_call_chunks_json(parsed->tool_calls);
    ch["delta"] = std::move(delta);
  } else {
    ch["text"] = text;
  }
  ch["logprobs"] = std::move(logprobs);
  ch["finish_reason"] = finish_reason ? json::value(*finish_reason) : json::value(nullptr);
  json::object chunk{{"id", ctx_.response_id},
                     {"object", chat ? "chat.completion.chunk" : "text_completion"},
                     {"created", ctx_.created},
                     {"model", ctx_.model_name},
                     {"choices", json::array{std::move(ch)}}};
  return "data: " + json::serialize(chunk) + "\n\n";
}

std::string generation_job::echo_text() const {
  if (!req_.gen.prompt_tokens.empty()) return valid_utf8(ctx_.tok->decode(req_.gen.prompt_tokens, false));
  return valid_utf8(req_.gen.prompt);
}

void generation_job::emit_prompt_part(uint32_t choice) {
  auto& c = choices_[choice];
  if (c.echoed || (!req_.echo && !req_.prompt_logprobs)) return;
  c.echoed = true;
  if (format_ != job_format::completion_sse && format_ != job_format::chat_sse) return;
  const bool chat = format_ == job_format::chat_sse;
  json::object ch{{"index", choice}};
  if (chat) {
    ch["delta"] = json::object{{"role", "assistant"}, {"content", ""}};
    c.role_sent = true;
  } else {
    ch["text"] = req_.echo ? echo_text() : "";
  }
  ch["logprobs"] = req_.echo && req_.gen.sampling.logprobs ? logprobs_json({}, chat, c.prompt) : json::value(nullptr);
  ch["finish_reason"] = nullptr;
  if (req_.prompt_logprobs) ch["prompt_logprobs"] = prompt_logprobs_json(*ctx_.tok, c.prompt);
  emit(sse_chunk_prefix() + json::serialize(json::array{std::move(ch)}) + "}\n\n");
}

void generation_job::on_delta(uint32_t choice, generation_delta& d) {
  auto& c = choices_[choice];
  if (c.ended || failure_) return;
  generated_tokens_ += d.tokens.size();
  if (!d.prompt_logprobs.empty()) c.prompt = std::move(d.prompt_logprobs);
  emit_prompt_part(choice);
  // The last delta of a sequence cut by max_tokens may end inside a character: JSON needs
  // valid UTF-8, so such bytes become U+FFFD.
  d.text = valid_utf8(d.text);
  d.reasoning_content = valid_utf8(d.reasoning_content);
  if (!req_.parallel_tool_calls) {  // only the first call is the reply's
    std::erase_if(d.tool_calls, [](const tool_call_chunk& t) { return t.index > 0; });
  }
  const bool parsed = !d.reasoning_content.empty() || !d.tool_calls.empty();
  if (events_) {
    std::vector<std::string> frames;
    events_->delta(d.text, d.tool_calls, frames);
    emit_all(frames);
    return;
  }
  if (anthropic_) {
    std::vector<std::string> frames;
    anthropic_->delta(d, frames);
    emit_all(frames);
    return;
  }
  switch (format_) {
    case job_format::chat_sse:
    case job_format::completion_sse:
      c.text += d.text;  // what a guard checks (net/guard.h)
      if (!d.text.empty() || !d.logprobs.empty() || parsed) {
        emit(stream_chunk(choice, d.text, d.logprobs, nullptr, parsed ? &d : nullptr));
      }
      break;
    case job_format::websocket: {
      if (d.text.empty() && d.logprobs.empty() && !parsed) break;
      json::array toks;
      for (int32_t t : d.tokens) toks.push_back(t);
      json::object f{{"type", "delta"}, {"id", ctx_.response_id}, {"text", d.text}, {"tokens", std::move(toks)}};
      if (!d.reasoning_content.empty()) f["reasoning_content"] = d.reasoning_content;
      if (!d.tool_calls.empty()) f["tool_calls"] = tool_call_chunks_json(d.tool_calls);
      if (choices_.size() > 1) f["index"] = choice;
      if (req_.gen.sampling.logprobs) {
        json::array lps;
        for (const auto& lp : d.logprobs) lps.push_back(lp.logprob);
        f["logprobs"] = std::move(lps);
      }
      emit(json::serialize(f));
      break;
    }
    default:
      c.text += d.text;
      c.reasoning += d.reasoning_content;
      assemble(c.calls, d.tool_calls);
      for (auto& lp : d.logprobs) c.logprobs.push_back(std::move(lp));
  }
}

std::string generation_job::usage_json() const {
  uint32_t completion = 0, cached = 0;
  for (const auto& c : choices_) {
    completion += c.done.completion_tokens;
    cached = std::max(cached, c.done.cached_tokens);
  }
  const uint32_t prompt = choices_.empty() ? 0 : choices_[0].done.prompt_tokens;
  return json::serialize(json::object{{"prompt_tokens", prompt},
                                      {"completion_tokens", completion},
                                      {"total_tokens", prompt + completion},
                                      {"prompt_tokens_details", json::object{{"cached_tokens", cached}}}});
}

void generation_job::on_done(uint32_t choice, generation_done& d) {
  auto& c = choices_[choice];
  if (c.ended) return;
  c.ended = true;
  c.done = d;
  if (ctx_.metrics) ctx_.metrics->observe_generation(tenant_, d, ctx_.metrics_model);
  if (failure_) return;
  if (d.reason == finish_reason::error) {
    const std::string param = !d.error_param.empty() ? d.error_param
                              : d.status == 400      ? (events_                       ? "input"
                                                        : req_.kind == api_kind::chat ? "messages"
                                                                                      : "prompt")
                                                     : "";
    api_error e(d.status >= 400 ? d.status : 500, d.error.empty() ? "the generation failed" : d.error, param);
    if (e.status == 503) e.retry_after_s = 1;  // a cluster with every node full or down
    return fail(std::move(e));
  }
  // An abort the client did not ask for (a stop string cut the output) reads as OpenAI's "stop";
  // a cancel on the WebSocket says "cancelled".
  if (events_) return finish_response(d);
  if (anthropic_) {
    std::vector<std::string> frames;
    anthropic_->finish(d, frames);
    emit_all(frames);
    closed_ = true;
    return;
  }
  const bool aborted = d.reason == finish_reason::abort;
  std::string reason = aborted && !cancelled_ && format_ != job_format::websocket ? "stop" : to_string(d.reason);
  if (format_ == job_format::websocket) {
    json::object f{{"type", "done"},
                   {"id", ctx_.response_id},
                   {"finish_reason", aborted ? "cancelled" : reason},
                   {"usage", json::parse(usage_json())},
                   {"timings", json::object{{"queue_ms", d.queue_ms}, {"ttft_ms", d.ttft_ms}, {"tpot_ms", d.tpot_ms}}}};
    if (choices_.size() > 1) f["index"] = choice;
    emit(json::serialize(f));
  } else if (format_ == job_format::chat_sse || format_ == job_format::completion_sse) {
    emit_prompt_part(choice);  // echo with nothing generated
    emit(stream_chunk(choice, "", {}, &reason));
  }
  if (!finished()) return;
  if (format_ == job_format::chat_sse || format_ == job_format::completion_sse) {
    if (req_.include_usage) {
      emit(sse_chunk_prefix() + "[],\"usage\":" + usage_json() + "}\n\n");
    }
    emit("data: [DONE]\n\n");
    closed_ = true;
  }
}

void generation_job::finish_response(const generation_done& d) {
  std::vector<std::string> frames;
  events_->finish(d.reason, cancelled_, {d.prompt_tokens, d.completion_tokens, d.cached_tokens}, frames);
  const auto& rj = *ctx_.responses;
  if (rj.keep && (d.reason != finish_reason::abort || !cancelled_)) {
    // The conversation a continuation starts from: everything before, this input, this output.
    boost::json::array conversation = rj.conversation;
    for (auto& item : events_->conversation_items()) conversation.push_back(std::move(item));
    rj.keep(stored_response{tenant_, ctx_.response_id, json::serialize(conversation),
                            json::serialize(events_->response())});
  }
  emit_all(frames);
  closed_ = true;
}

int generation_job::final_status() const { return failure_ ? failure_->status : 200; }

void generation_job::filter_output() {
  filtered_ = true;
  if (format_ != job_format::chat_sse && format_ != job_format::completion_sse) return;
  out_.clear();  // what the guard has not passed is not sent
  pending_bytes_ = 0;
  const std::string reason = "content_filter";
  for (uint32_t i = 0; i < choices_.size(); ++i) emit(stream_chunk(i, "", {}, &reason));
  emit("data: [DONE]\n\n");
  closed_ = true;
}

std::string generation_job::json_body() const {
  if (events_) return json::serialize(events_->response());
  if (anthropic_) return json::serialize(anthropic_->message());
  const bool chat = format_ == job_format::chat_json;
  json::array choices;
  for (uint32_t i = 0; i < choices_.size(); ++i) {
    const auto& c = choices_[i];
    const std::string reason = filtered_                               ? "content_filter"
                               : c.done.reason == finish_reason::abort ? "stop"
                                                                       : to_string(c.done.reason);
    json::object ch{{"index", i}};
    const json::value logprobs =
        filtered_ ? json::value(nullptr)
                  : logprobs_json(c.logprobs, chat, req_.echo ? c.prompt : std::span<const output_logprob>());
    if (chat && filtered_) {
      ch["message"] = json::object{{"role", "assistant"}, {"content", ""}};
    } else if (chat) {
      json::object message{{"role", "assistant"}};
      message["content"] = c.text.empty() && !c.calls.empty() ? json::value(nullptr) : json::value(c.text);
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.calls.empty()) {
        json::array calls;
        for (const auto& t : c.calls) {
          calls.push_back(json::object{{"id", t.id},
                                       {"type", "function"},
                                       {"function", json::object{{"name", t.name}, {"arguments", t.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
      ch["message"] = std::move(message);
    } else {
      ch["text"] = filtered_ ? std::string() : req_.echo ? echo_text() + c.text : c.text;
    }
    ch["logprobs"] = logprobs;
    ch["finish_reason"] = reason;
    if (req_.prompt_logprobs) ch["prompt_logprobs"] = prompt_logprobs_json(*ctx_.tok, c.prompt);
    choices.push_back(std::move(ch));
  }
  json::object body{{"id", ctx_.response_id},        {"object", chat ? "chat.completion" : "text_completion"},
                    {"created", ctx_.created},       {"model", ctx_.model_name},
                    {"choices", std::move(choices)}, {"usage", json::parse(usage_json())}};
  return json::serialize(body);
}

}  // namespace tandem::net
