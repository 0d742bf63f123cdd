#include "net/anthropic/anthropic_events.h"

#include <algorithm>
#include <boost/json.hpp>

#include "engine/tokenizer/tokenizer.h"

namespace tandem::net {
namespace json = boost::json;

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string anthropic_error_body(const api_error& e) {
  return json::serialize(json::object{
      {"type", "error"}, {"error", json::object{{"type", anthropic_error_type(e.status)}, {"message", e.what()}}}});
}

anthropic_events::anthropic_events(std::string id, std::string model, std::vector<std::string> stop_sequences,
                                   const tokenizer* tok, bool streamed)
    : id_(std::move(id)),
      model_(std::move(model)),
      stop_sequences_(std::move(stop_sequences)),
      tok_(tok),
      streamed_(streamed) {}

void anthropic_events::emit(const char* type, json::object event, std::vector<std::string>& out) {
  if (!streamed_) return;
  json::object typed{{"type", type}};  // first, as Anthropic writes it
  for (auto& kv : event) typed[kv.key()] = std::move(kv.value());
  out.push_back(std::string("event: ") + type + "\ndata: " + json::serialize(typed) + "\n\n");
}

json::object anthropic_events::usage_json() const {
  // Anthropic's input_tokens leaves out the tokens read from its cache (counted apart).
  return json::object{{"input_tokens", input_tokens_ - std::min(cached_tokens_, input_tokens_)},
                      {"output_tokens", output_tokens_},
                      {"cache_creation_input_tokens", 0},
                      {"cache_read_input_tokens", cached_tokens_}};
}

json::object anthropic_events::block_json(const block& b, bool at_start) const {
  switch (b.k) {
    case kind::text:
      return json::object{{"type", "text"}, {"text", at_start ? "" : b.text}};
    case kind::thinking:
      // No signature: nothing here can sign, and Tandem ignores the ones handed back.
      return json::object{{"type", "thinking"}, {"thinking", at_start ? "" : b.text}, {"signature", ""}};
    case kind::tool_use:
      break;
  }
  json::value input = json::object{};
  if (!at_start && !b.text.empty()) {
    boost::system::error_code ec;
    json::value parsed = json::parse(b.text, ec);
    // Arguments cut short (max_tokens) are no object: the block keeps an empty input.
    if (!ec && parsed.is_object()) input = std::move(parsed);
  }
  return json::object{{"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", std::move(input)}};
}

json::object anthropic_events::message() const {
  json::array content;
  for (const auto& b : blocks_) content.push_back(block_json(b, false));
  return json::object{{"id", id_},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", model_},
                      {"content", std::move(content)},
                      {"stop_reason", stop_reason_.empty() ? json::value(nullptr) : json::value(stop_reason_)},
                      {"stop_sequence", stop_sequence_.empty() ? json::value(nullptr) : json::value(stop_sequence_)},
                      {"usage", usage_json()}};
}

void anthropic_events::start(std::vector<std::string>& out) {
  if (started_) return;
  started_ = true;
  emit("message_start", json::object{{"message", message()}}, out);
  emit("ping", json::object{}, out);
}

void anthropic_events::close_open(std::vector<std::string>& out) {
  if (open_ < 0) return;
  emit("content_block_stop", json::object{{"index", open_}}, out);
  open_ = -1;
}

anthropic_events::block& anthropic_events::open(kind k, std::vector<std::string>& out, std::string id,
                                                std::string name) {
  close_open(out);
  blocks_.push_back(block{k, "", std::move(id), std::move(name)});
  open_ = static_cast<int>(blocks_.size()) - 1;
  emit("content_block_start", json::object{{"index", open_}, {"content_block", block_json(blocks_.back(), true)}}, out);
  return blocks_.back();
}

void anthropic_events::add(kind k, const std::string& piece, std::vector<std::string>& out) {
  if (piece.empty()) return;
  block& b =
      open_ >= 0 && blocks_[static_cast<size_t>(open_)].k == k ? blocks_[static_cast<size_t>(open_)] : open(k, out);
  b.text += piece;
  json::object d = k == kind::text ? json::object{{"type", "text_delta"}, {"text", piece}}
                                   : json::object{{"type", "thinking_delta"}, {"thinking", piece}};
  emit("content_block_delta", json::object{{"index", open_}, {"delta", std::move(d)}}, out);
}

void anthropic_events::delta(const generation_delta& d, std::vector<std::string>& out) {
  tokens_.insert(tokens_.end(), d.tokens.begin(), d.tokens.end());
  if (d.text.empty() && d.reasoning_content.empty() && d.tool_calls.empty()) return;
  start(out);
  add(kind::thinking, d.reasoning_content, out);
  add(kind::text, d.text, out);
  for (const auto& c : d.tool_calls) {
    if (c.index >= calls_.size()) calls_.resize(c.index + 1, -1);
    if (calls_[c.index] < 0) {
      std::string id = c.id.empty() ? "toolu_" + id_.substr(id_.find('_') + 1) + "_" + std::to_string(c.index) : c.id;
      open(kind::tool_use, out, std::move(id), c.name);
      calls_[c.index] = open_;
    }
    block& b = blocks_[static_cast<size_t>(calls_[c.index])];
    b.text += c.arguments;
    // A piece of a call whose block was stopped already (the parser went back to it) is kept
    // in the Message but cannot be streamed without breaking the block order.
    if (!c.arguments.empty() && calls_[c.index] == open_) {
      emit("content_block_delta",
           json::object{{"index", open_},
                        {"delta", json::object{{"type", "input_json_delta"}, {"partial_json", c.arguments}}}},
           out);
    }
  }
}

std::string anthropic_events::matched_stop_sequence() const {
  if (stop_sequences_.size() == 1 || !tok_) return stop_sequences_.front();
  // The streamer stops at the first occurrence of any of them: the earliest one is it.
  const std::string text = tok_->decode(tokens_, false);
  size_t best = std::string::npos;
  std::string found = stop_sequences_.front();
  for (const auto& s : stop_sequences_) {
    const size_t at = text.find(s);
    if (at < best) {
      best = at;
      found = s;
    }
  }
  return found;
}

void anthropic_events::finish(const generation_done& d, std::vector<std::string>& out) {
  input_tokens_ = d.prompt_tokens;
  output_tokens_ = d.completion_tokens;
  cached_tokens_ = d.cached_tokens;
  switch (d.reason) {
    case finish_reason::length:
      stop_reason_ = "max_tokens";
      break;
    case finish_reason::tool_calls:
      stop_reason_ = "tool_use";
      break;
    default:
      stop_reason_ = "end_turn";
      if (d.reason == finish_reason::stop && !stop_sequences_.empty() && tokens_.size() == d.completion_tokens) {
        stop_reason_ = "stop_sequence";
        stop_sequence_ = matched_stop_sequence();
      }
  }
  start(out);
  close_open(out);
  emit("message_delta",
       json::object{{"delta", json::object{{"stop_reason", stop_reason_},
                                           {"stop_sequence", stop_sequence_.empty() ? json::value(nullptr)
                                                                                    : json::value(stop_sequence_)}}},
                    {"usage", usage_json()}},
       out);
  emit("message_stop", json::object{}, out);
}

void anthropic_events::fail(const api_error& e, std::vector<std::string>& out) {
  start(out);
  emit("error", json::object{{"error", json::object{{"type", anthropic_error_type(e.status)}, {"message", e.what()}}}},
       out);
}

}  // namespace tandem::net
