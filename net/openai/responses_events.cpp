#include "net/openai/responses_events.h"

#include <boost/json.hpp>
#include <chrono>

namespace tandem::net {
namespace json = boost::json;
namespace {

// resp_X -> msg_X / fc_X_n: the items' ids need no second random source.
std::string item_id(const std::string& response_id, const char* prefix) {
  const auto u = response_id.find('_');
  return prefix + response_id.substr(u == std::string::npos ? 0 : u);
}

json::object text_part(const std::string& text) {
  return json::object{
      {"type", "output_text"}, {"text", text}, {"annotations", json::array{}}, {"logprobs", json::array{}}};
}

}  // namespace

responses_events::responses_events(std::string id, std::string model, int64_t created_at, json::object echo,
                                   responses_framing framing, std::string stream_id)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_at_(created_at),
      echo_(std::move(echo)),
      framing_(framing),
      stream_id_(std::move(stream_id)) {}

void responses_events::emit(json::object event, std::vector<std::string>& out) {
  event["sequence_number"] = sequence_++;
  if (framing_ == responses_framing::none) return;
  if (!stream_id_.empty()) event["stream_id"] = stream_id_;
  const std::string data = json::serialize(event);
  if (framing_ == responses_framing::websocket) {
    out.push_back(data);
  } else {
    out.push_back("event: " + std::string(event.at("type").as_string()) + "\ndata: " + data + "\n\n");
  }
}

json::object responses_events::response() const {
  json::array output;
  for (const auto& it : items_) output.push_back(item_json(it));
  json::object r{{"id", id_},
                 {"object", "response"},
                 {"created_at", created_at_},
                 {"status", status_},
                 {"error", error_},
                 {"incomplete_details", incomplete_},
                 {"model", model_},
                 {"output", std::move(output)},
                 {"usage", usage_},
                 {"completed_at", completed_at_ ? json::value(completed_at_) : json::value(nullptr)}};
  for (const auto& kv : echo_) r[kv.key()] = kv.value();
  return r;
}

json::object responses_events::item_json(const item& it) const {
  const char* status = it.done ? item_status_.c_str() : "in_progress";
  if (it.is_call) {
    return json::object{{"id", it.id},           {"type", "function_call"}, {"status", status},
                        {"call_id", it.call_id}, {"name", it.name},         {"arguments", it.text}};
  }
  json::array content;
  if (it.done) content.push_back(text_part(it.text));
  return json::object{
      {"id", it.id}, {"type", "message"}, {"role", "assistant"}, {"status", status}, {"content", std::move(content)}};
}

json::array responses_events::conversation_items() const {
  json::array out;
  for (const auto& it : items_) {
    if (it.is_call) {
      out.push_back(
          json::object{{"type", "function_call"}, {"call_id", it.call_id}, {"name", it.name}, {"arguments", it.text}});
    } else {
      out.push_back(json::object{{"type", "message"},
                                 {"role", "assistant"},
                                 {"content", json::array{json::object{{"type", "output_text"}, {"text", it.text}}}}});
    }
  }
  return out;
}

void responses_events::start(std::vector<std::string>& out) {
  if (started_) return;
  started_ = true;
  emit(json::object{{"type", "response.created"}, {"response", response()}}, out);
  emit(json::object{{"type", "response.in_progress"}, {"response", response()}}, out);
}

responses_events::item& responses_events::message(std::vector<std::string>& out) {
  if (message_ >= 0) return items_[static_cast<size_t>(message_)];
  item it;
  it.id = item_id(id_, "msg");
  it.output_index = static_cast<uint32_t>(items_.size());
  message_ = static_cast<int>(items_.size());
  items_.push_back(it);
  emit(json::object{{"type", "response.output_item.added"}, {"output_index", it.output_index}, {"item", item_json(it)}},
       out);
  emit(json::object{{"type", "response.content_part.added"},
                    {"item_id", it.id},
                    {"output_index", it.output_index},
                    {"content_index", 0},
                    {"part", text_part("")}},
       out);
  return items_.back();
}

void responses_events::delta(const std::string& text, const std::vector<tool_call_chunk>& calls,
                             std::vector<std::string>& out) {
  if (text.empty() && calls.empty()) return;
  if (!started_) start(out);
  if (!text.empty()) {
    item& m = message(out);
    m.text += text;
    emit(json::object{{"type", "response.output_text.delta"},
                      {"item_id", m.id},
                      {"output_index", m.output_index},
                      {"content_index", 0},
                      {"delta", text},
                      {"logprobs", json::array{}}},
         out);
  }
  for (const auto& c : calls) {
    if (c.index >= calls_.size()) calls_.resize(c.index + 1, -1);
    if (calls_[c.index] < 0) {
      item it;
      it.is_call = true;
      it.id = item_id(id_, "fc") + "_" + std::to_string(c.index);
      it.call_id = c.id.empty() ? "call" + it.id.substr(2) : c.id;
      it.name = c.name;
      it.output_index = static_cast<uint32_t>(items_.size());
      calls_[c.index] = static_cast<int>(items_.size());
      items_.push_back(it);
      emit(
          json::object{
              {"type", "response.output_item.added"}, {"output_index", it.output_index}, {"item", item_json(it)}},
          out);
    }
    item& call = items_[static_cast<size_t>(calls_[c.index])];
    if (c.arguments.empty()) continue;
    call.text += c.arguments;
    emit(json::object{{"type", "response.function_call_arguments.delta"},
                      {"item_id", call.id},
                      {"output_index", call.output_index},
                      {"delta", c.arguments}},
         out);
  }
}

void responses_events::close(item& it, std::vector<std::string>& out) {
  if (it.done) return;
  if (it.is_call) {
    emit(json::object{{"type", "response.function_call_arguments.done"},
                      {"item_id", it.id},
                      {"output_index", it.output_index},
                      {"name", it.name},
                      {"arguments", it.text}},
         out);
  } else {
    emit(json::object{{"type", "response.output_text.done"},
                      {"item_id", it.id},
                      {"output_index", it.output_index},
                      {"content_index", 0},
                      {"text", it.text},
                      {"logprobs", json::array{}}},
         out);
    emit(json::object{{"type", "response.content_part.done"},
                      {"item_id", it.id},
                      {"output_index", it.output_index},
                      {"content_index", 0},
                      {"part", text_part(it.text)}},
         out);
  }
  it.done = true;
  emit(json::object{{"type", "response.output_item.done"}, {"output_index", it.output_index}, {"item", item_json(it)}},
       out);
}

void responses_events::finish(finish_reason reason, bool cancelled, const responses_usage& usage,
                              std::vector<std::string>& out) {
  if (!started_) start(out);
  const char* type = "response.completed";
  if (reason == finish_reason::length) {
    status_ = "incomplete";
    incomplete_ = json::object{{"reason", "max_output_tokens"}};
    type = "response.incomplete";
  } else if (reason == finish_reason::abort && cancelled) {
    status_ = "cancelled";
    type = "response.incomplete";
  } else {
    status_ = "completed";
  }
  item_status_ = status_ == "completed" ? "completed" : "incomplete";
  if (items_.empty()) message(out);  // an empty reply is still one (empty) message
  for (auto& it : items_) close(it, out);
  usage_ = json::object{{"input_tokens", usage.input_tokens},
                        {"input_tokens_details", json::object{{"cached_tokens", usage.cached_tokens}}},
                        {"output_tokens", usage.output_tokens},
                        {"output_tokens_details", json::object{{"reasoning_tokens", 0}}},
                        {"total_tokens", usage.input_tokens + usage.output_tokens}};
  completed_at_ =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  emit(json::object{{"type", type}, {"response", response()}}, out);
}

void responses_events::fail(const api_error& e, std::vector<std::string>& out) {
  if (!started_) start(out);
  status_ = "failed";
  item_status_ = "incomplete";
  error_ = json::object{{"code", e.status >= 500 ? "server_error" : "invalid_prompt"}, {"message", e.what()}};
  emit(json::object{{"type", "response.failed"}, {"response", response()}}, out);
}

std::string responses_error_event(const api_error& e, const std::string& stream_id) {
  json::object err{{"type", error_type_for(e.status)},
                   {"code", e.code.empty() ? json::value(nullptr) : json::value(e.code)},
                   {"message", e.what()},
                   {"param", e.param.empty() ? json::value(nullptr) : json::value(e.param)}};
  json::object event{{"type", "error"}, {"status", e.status}, {"error", std::move(err)}};
  if (e.retry_after_s > 0) event["retry_after"] = e.retry_after_s;
  if (!stream_id.empty()) event["stream_id"] = stream_id;
  return json::serialize(event);
}

}  // namespace tandem::net
